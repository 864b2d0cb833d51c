"""ReadShareGroupState (84): a partition leader reads the persisted state of its
share-partitions (start offset, state epoch, the state batches in flight) when it first uses
them; FENCED_LEADER_EPOCH for a leader epoch older than one already seen."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.records import StateKey
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import ShareStateAnswer, share_state_results, state_fields


async def _read(runtime: ShareCoordinatorRuntime, key: StateKey, data: Any) -> ShareStateAnswer:
    answer = await runtime.read_state(key, int(data.leader_epoch))
    return state_fields(answer, batches=True, leader_epoch=False)


@handles(api_key=84, min_version=0, max_version=0)
async def handle_read_share_group_state(ctx: RequestContext, request: Any) -> Response:
    return ctx.respond(results=await share_state_results(ctx, request, _read))
