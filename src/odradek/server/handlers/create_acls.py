"""CreateAcls (30): store ACL bindings, each answered on its own (ALTER on the cluster needed)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclBinding, InvalidAclError, validate_binding
from odradek.server.acl_requests import NO_AUTHORIZER, creation_binding
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles


@handles(api_key=30, min_version=0, max_version=3, decode=old_messages.decoder(30))
async def handle_create_acls(ctx: RequestContext, request: Any) -> Response:
    authorizer = ctx.services.authorizer
    if authorizer is None:
        failed = {"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER}
        return respond(ctx, throttle_time=0, results=[failed] * len(request.creations))
    if not permits_cluster(ctx, Op.ALTER):
        failed = {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
        return respond(ctx, throttle_time=0, results=[failed] * len(request.creations))
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for creation in request.creations:
        try:
            binding = creation_binding(creation)
            validate_binding(binding)
        except InvalidAclError as e:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(e)})
            continue
        valid.append(binding)
        results.append({"error_code": ErrorCode.none, "error_message": None})
    await authorizer.create(valid)
    return respond(ctx, throttle_time=0, results=results)
