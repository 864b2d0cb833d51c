"""ListGroups (16): every group of this coordinator, filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=16, min_version=0, max_version=5)
async def handle_list_groups(ctx: RequestContext, request: Any) -> Response:
    groups = ctx.services.groups.coordinator.list_groups(
        getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
    )
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in groups
        ],
    )
