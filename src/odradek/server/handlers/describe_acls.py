"""DescribeAcls (29): the ACL bindings a filter selects, grouped by resource pattern (DESCRIBE on
the cluster needed)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AccessControlEntry, ResourcePattern
from odradek.server.acl_requests import NO_AUTHORIZER, filter_error
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles


@handles(api_key=29, min_version=0, max_version=3, decode=old_messages.decoder(29))
async def handle_describe_acls(ctx: RequestContext, request: Any) -> Response:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return respond(
            ctx,
            throttle_time=0,
            error_code=ErrorCode.security_disabled,
            error_message=NO_AUTHORIZER,
        )
    if not permits_cluster(ctx, Op.DESCRIBE):
        return respond(ctx, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed)
    selection, problem = filter_error(request)
    if selection is None:
        return respond(
            ctx, throttle_time=0, error_code=ErrorCode.invalid_request, error_message=problem
        )
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in authorizer.describe(selection):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    return respond(
        ctx,
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        resources=[
            {
                "resource_type": pattern.resource_type,
                "resource_name": pattern.name,
                "pattern_type": pattern.pattern_type,
                "acls": [
                    {
                        "principal": e.principal,
                        "host": e.host,
                        "operation": e.operation,
                        "permission_type": e.permission,
                    }
                    for e in entries
                ],
            }
            for pattern, entries in by_pattern.items()
        ],
    )
