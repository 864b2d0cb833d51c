"""LeaveGroup (13): members leave at once instead of waiting out their session."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.messages import LeaveResult, MemberIdentity
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=13, min_version=0, max_version=5)
async def handle_leave_group(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP)
    if ctx.version < 3:
        identities = [MemberIdentity(request.member_id)]
    else:
        identities = [
            MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None))
            for m in request.members
        ]
    try:
        result: LeaveResult = await ctx.services.groups.write(
            request.group_id,
            lambda c: c.leave_group(request.group_id, identities),
            api_key=ctx.header.api_key,
        )
    except CoordinatorError as e:
        if ctx.version < 3:
            return ctx.respond(throttle_time=0, error_code=e.code)
        return ctx.respond(throttle_time=0, error_code=e.code, members=[])
    if ctx.version < 3:
        error = result.error
        if error == ErrorCode.none and result.members:
            error = result.members[0][1]
        return ctx.respond(throttle_time=0, error_code=error)
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
