"""DeleteGroups (42): remove empty groups and their committed offsets."""

from __future__ import annotations

from typing import Any

from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=42, min_version=0, max_version=2)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> Response:
    names = list(dict.fromkeys(request.groups_names))
    results = ctx.services.groups.coordinator.delete_groups(names)
    return ctx.respond(
        throttle_time=0,
        results=[{"group_id": name, "error_code": results[name]} for name in names],
    )
