"""LeaveGroup (13): members leave at once instead of waiting out their session."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.internal_topic import write_error
from odradek.coordinator.messages import MemberIdentity
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.group_commits import group_committed
from odradek.server.registry import handles


@handles(api_key=13, min_version=0, max_version=5)
async def handle_leave_group(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP)
    groups = ctx.services.groups
    if ctx.version < 3:
        leaving = [MemberIdentity(request.member_id)]
        result, refused = groups.perform(lambda c: c.leave_group(request.group_id, leaving))
        error = result.error
        if error == ErrorCode.none and result.members:
            error = result.members[0][1]
        if refused != ErrorCode.none:
            error = write_error(refused)
        failure = await group_committed(ctx, request.group_id)
        if failure != ErrorCode.none:
            error = failure
        return ctx.respond(throttle_time=0, error_code=error)
    identities = [
        MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None))
        for m in request.members
    ]
    result, refused = groups.perform(lambda c: c.leave_group(request.group_id, identities))
    failure = await group_committed(ctx, request.group_id)
    if failure == ErrorCode.none and refused != ErrorCode.none:
        failure = write_error(refused)
    if failure != ErrorCode.none:
        return ctx.respond(throttle_time=0, error_code=failure, members=[])
    return ctx.respond(
        throttle_time=0,
        error_code=result.error,
        members=[
            {
                "member_id": identity.member_id,
                "group_instance_id": identity.group_instance_id,
                "error_code": code,
            }
            for identity, code in result.members
        ],
    )
