"""JoinGroup (11): become a member of a group's next generation; the answer waits for the group,
then for the records behind it to be replicated."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.messages import JoinReply, JoinRequest, JoinResult, Protocol
from odradek.server.authorize import GROUP, Op, client_host, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

_MS = datetime.timedelta(milliseconds=1)


@handles(api_key=11, min_version=0, max_version=9)
async def handle_join_group(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        # Before v7 the protocol name is not nullable.
        protocol_name = None if ctx.version >= 7 else ""
        return refusal(ctx, GROUP, member_id=request.member_id, protocol_name=protocol_name)
    session_ms = int(request.session_timeout / _MS)
    rebalance = getattr(request, "rebalance_timeout", None)  # v1+; v0 uses the session timeout
    join = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=int(rebalance / _MS) if rebalance is not None else session_ms,
        protocol_type=request.protocol_type,
        protocols=tuple(Protocol(p.name, bytes(p.metadata)) for p in request.protocols),
        client_id=ctx.header.client_id or "",
        client_host="/" + client_host(ctx),  # as Kafka reports it
        require_known_member_id=ctx.version >= 4,
        reason=getattr(request, "reason", None),
    )

    def op(coordinator: GroupCoordinator, reply: JoinReply) -> None:
        coordinator.join_group(join, reply)

    try:
        result: JoinResult = await ctx.services.groups.write_deferred(
            join.group_id, op, api_key=ctx.header.api_key
        )
    except CoordinatorError as e:
        result = JoinResult(e.code, member_id=join.member_id)
    # Before v7 the protocol name is not nullable.
    protocol_name = result.protocol_name
    if protocol_name is None and ctx.version < 7:
        protocol_name = ""
    return ctx.respond(
        throttle_time=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in result.members
        ],
    )
