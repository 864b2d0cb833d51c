"""InitializeShareGroupState (83): a partition leader (or the group coordinator, resetting a
share group's offsets) starts share-partitions at a start offset in a new state epoch; answered
by their share coordinator once the snapshot record is committed."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.records import StateKey
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import ShareStateAnswer, share_state_results


async def _initialize(
    runtime: ShareCoordinatorRuntime, key: StateKey, data: Any
) -> ShareStateAnswer:
    answer = await runtime.initialize_state(key, int(data.state_epoch), int(data.start_offset))
    return {"error_code": answer.error, "error_message": answer.message}


@handles(api_key=83, min_version=0, max_version=0)
async def handle_initialize_share_group_state(ctx: RequestContext, request: Any) -> Response:
    return ctx.respond(results=await share_state_results(ctx, request, _initialize))
