"""DeleteGroups (42): remove empty groups and their committed offsets."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, denied
from odradek.server.context import RequestContext, Response
from odradek.server.group_commits import committed
from odradek.server.registry import handles


@handles(api_key=42, min_version=0, max_version=2)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> Response:
    names = list(dict.fromkeys(request.groups_names))
    refused = denied(ctx, Op.DELETE, GROUP, names)
    groups = ctx.services.groups
    # A group whose records were refused has the error in its answer already.
    results, _ = groups.perform(
        lambda coordinator: coordinator.delete_groups([n for n in names if n not in refused])
    )
    outcomes = await committed(ctx, [groups.commit_point(name) for name in names])
    for name, failure in zip(names, outcomes, strict=True):
        if name in refused:
            results[name] = ErrorCode.group_authorization_failed
        elif failure != ErrorCode.none:
            results[name] = failure
    return ctx.respond(
        throttle_time=0,
        results=[{"group_id": name, "error_code": results[name]} for name in names],
    )
