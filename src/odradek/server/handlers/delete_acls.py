"""DeleteAcls (31): remove the ACL bindings each filter selects, answered per filter with what
it removed (ALTER on the cluster needed)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclBindingFilter
from odradek.server.acl_requests import NO_AUTHORIZER, filter_error
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles


def _failed(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "matching_acls": []}


@handles(api_key=31, min_version=0, max_version=3, decode=old_messages.decoder(31))
async def handle_delete_acls(ctx: RequestContext, request: Any) -> Response:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        failed = _failed(ErrorCode.security_disabled, NO_AUTHORIZER)
        return respond(ctx, throttle_time=0, filter_results=[failed] * len(request.filters))
    if not permits_cluster(ctx, Op.ALTER):
        failed = _failed(ErrorCode.cluster_authorization_failed, None)
        return respond(ctx, throttle_time=0, filter_results=[failed] * len(request.filters))
    checked = [filter_error(item) for item in request.filters]
    valid: list[AclBindingFilter] = [f for f, _ in checked if f is not None]
    deleted = iter(await authorizer.delete(valid))
    results = []
    for selection, problem in checked:
        if selection is None:
            results.append(_failed(ErrorCode.invalid_request, problem))
            continue
        results.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": ErrorCode.none,
                        "error_message": None,
                        "resource_type": b.pattern.resource_type,
                        "resource_name": b.pattern.name,
                        "pattern_type": b.pattern.pattern_type,
                        "principal": b.entry.principal,
                        "host": b.entry.host,
                        "operation": b.entry.operation,
                        "permission_type": b.entry.permission,
                    }
                    for b in next(deleted).bindings
                ],
            }
        )
    return respond(ctx, throttle_time=0, filter_results=results)
