"""DeleteShareGroupState (86): a deleted share group's (or topic offsets') persisted
share-partition states go, as tombstones in ``__share_group_state``."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.records import StateKey
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import ShareStateAnswer, share_state_results


async def _delete(runtime: ShareCoordinatorRuntime, key: StateKey, data: Any) -> ShareStateAnswer:
    answer = await runtime.delete_state(key)
    return {"error_code": answer.error, "error_message": answer.message}


@handles(api_key=86, min_version=0, max_version=0)
async def handle_delete_share_group_state(ctx: RequestContext, request: Any) -> Response:
    return ctx.respond(results=await share_state_results(ctx, request, _delete))
