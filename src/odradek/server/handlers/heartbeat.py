"""Heartbeat (12): a member is alive; the answer tells it when to rejoin."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.messages import HeartbeatRequest
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=12, min_version=0, max_version=4)
async def handle_heartbeat(ctx: RequestContext, request: Any) -> Response:
    error = ctx.services.groups.coordinator.heartbeat(
        HeartbeatRequest(
            request.group_id,
            int(request.generation_id),
            request.member_id,
            getattr(request, "group_instance_id", None),
        )
    )
    return ctx.respond(throttle_time=0, error_code=error)
