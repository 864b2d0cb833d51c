"""ReadShareGroupStateSummary (87): where share-partitions stand (state epoch, leader epoch, start
offset), as DescribeShareGroupOffsets shows a group's partitions led on another broker."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.share.records import StateKey
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import ShareStateAnswer, share_state_results, state_fields


async def _summary(runtime: ShareCoordinatorRuntime, key: StateKey, data: Any) -> ShareStateAnswer:
    answer = await runtime.read_summary(key)
    return state_fields(answer, batches=False, leader_epoch=True)


@handles(api_key=87, min_version=0, max_version=0)
async def handle_read_share_group_state_summary(ctx: RequestContext, request: Any) -> Response:
    return ctx.respond(results=await share_state_results(ctx, request, _summary))
