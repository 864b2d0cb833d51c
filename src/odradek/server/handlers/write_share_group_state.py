"""WriteShareGroupState (85): a partition leader writes what acknowledgements and released locks
changed of its share-partitions (start offset, state batches); answered once the record is
committed, FENCED_STATE_EPOCH or FENCED_LEADER_EPOCH from a writer older than the state."""

from __future__ import annotations

from typing import Any

from odradek.cluster.share.persister import StateBatch
from odradek.coordinator.share.records import StateKey
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import ShareStateAnswer, share_state_results


async def _write(runtime: ShareCoordinatorRuntime, key: StateKey, data: Any) -> ShareStateAnswer:
    batches = [
        StateBatch(
            int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count)
        )
        for b in data.state_batches
    ]
    if any(b.last_offset < b.first_offset or b.first_offset < 0 for b in batches):
        return {"error_code": ErrorCode.invalid_request, "error_message": "bad state batch"}
    answer = await runtime.write_state(
        key, int(data.state_epoch), int(data.leader_epoch), int(data.start_offset), batches
    )
    return {"error_code": answer.error, "error_message": answer.message}


@handles(api_key=85, min_version=0, max_version=0)
async def handle_write_share_group_state(ctx: RequestContext, request: Any) -> Response:
    return ctx.respond(results=await share_state_results(ctx, request, _write))
