"""ExpireDelegationToken (40): move a token's expiry to now plus the period (never past its
maximum time), or with a negative period remove the token at once. Only the owner or a renewer
may; an unknown HMAC is DELEGATION_TOKEN_NOT_FOUND, an expired token DELEGATION_TOKEN_EXPIRED."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.token_answers import changed_expiry

_MS = datetime.timedelta(milliseconds=1)


@handles(api_key=40, min_version=1, max_version=2)
async def handle_expire_delegation_token(ctx: RequestContext, request: Any) -> Response:
    code, expiry = await changed_expiry(
        ctx,
        lambda tokens: tokens.expire(
            ctx.session.principal, bytes(request.hmac), request.expiry_time_period // _MS
        ),
    )
    return ctx.respond(throttle_time=0, error_code=code, expiry_timestamp=expiry)
