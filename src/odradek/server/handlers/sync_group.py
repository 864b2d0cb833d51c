"""SyncGroup (14): the leader hands out assignments; every member gets its own once the group's
record holding them is replicated."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.messages import SyncReply, SyncRequest, SyncResult
from odradek.server.authorize import GROUP, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=14, min_version=0, max_version=5)
async def handle_sync_group(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP)
    sync = SyncRequest(
        group_id=request.group_id,
        generation_id=int(request.generation_id),
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
    )

    def op(coordinator: GroupCoordinator, reply: SyncReply) -> None:
        coordinator.sync_group(sync, reply)

    try:
        result: SyncResult = await ctx.services.groups.write_deferred(
            sync.group_id, op, api_key=ctx.header.api_key
        )
    except CoordinatorError as e:
        result = SyncResult(e.code)
    return ctx.respond(
        throttle_time=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
