"""Heartbeat (12): a member is alive; the answer tells it when to rejoin."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.messages import HeartbeatRequest
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.group_commits import group_committed
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
    error, _ = ctx.services.groups.perform(lambda coordinator: coordinator.heartbeat(heartbeat))
    failure = await group_committed(ctx, request.group_id)
    if failure != ErrorCode.none:
        error = failure
    return ctx.respond(throttle_time=0, error_code=error)
