"""SyncGroup (14): the leader hands out assignments; every member gets its own once the group's
record holding them is replicated."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.coordinator.internal_topic import write_error
from odradek.coordinator.messages import SyncRequest, SyncResult
from odradek.counters import remote_wait
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.group_commits import committed
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
    groups = ctx.services.groups
    future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()

    def reply(result: SyncResult) -> None:
        if not future.done():
            future.set_result(result)

    _, refused = groups.perform(lambda coordinator: coordinator.sync_group(sync, reply))
    if refused != ErrorCode.none:
        result = SyncResult(write_error(refused))
    else:
        result = await remote_wait(future)
    (failure,) = await committed(ctx, [groups.commit_point(sync.group_id)])
    if failure != ErrorCode.none:
        result = SyncResult(failure)
    return ctx.respond(
        throttle_time=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
