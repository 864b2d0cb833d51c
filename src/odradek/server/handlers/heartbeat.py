"""Heartbeat (12): a member is alive; the answer tells it when to rejoin."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.messages import HeartbeatRequest
from odradek.server.authorize import GROUP, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=12, min_version=0, max_version=4)
async def handle_heartbeat(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP)
    heartbeat = HeartbeatRequest(
        request.group_id,
        int(request.generation_id),
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    try:
        error = await ctx.services.groups.write(
            heartbeat.group_id, lambda c: c.heartbeat(heartbeat), api_key=ctx.header.api_key
        )
    except CoordinatorError as e:
        error = e.code
    return ctx.respond(throttle_time=0, error_code=error)
