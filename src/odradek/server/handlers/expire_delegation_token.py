"""ExpireDelegationToken (40): move a token's expiry to now plus the period (never past its
maximum time), or with a negative period remove the token at once. Only the owner or a renewer
may; an unknown HMAC is DELEGATION_TOKEN_NOT_FOUND, an expired token DELEGATION_TOKEN_EXPIRED."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import token_requests_allowed
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

_MS = datetime.timedelta(milliseconds=1)


@handles(api_key=40, min_version=1, max_version=2)
async def handle_expire_delegation_token(ctx: RequestContext, request: Any) -> Response:
    tokens = ctx.services.tokens
    if not token_requests_allowed(ctx):
        code, expiry = ErrorCode.delegation_token_request_not_allowed, -1
    elif tokens is None or not tokens.enabled:
        code, expiry = ErrorCode.delegation_token_auth_disabled, -1
    else:
        try:
            code, expiry = await tokens.expire(
                ctx.session.principal, bytes(request.hmac), request.expiry_time_period // _MS
            )
        except MetadataStoreError:
            code, expiry = ErrorCode.unknown_server_error, -1
    return ctx.respond(throttle_time=0, error_code=code, expiry_timestamp=expiry)
