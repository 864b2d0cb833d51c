"""RenewDelegationToken (39): move a token's expiry to now plus the renew period (a negative period:
``delegation.token.expiry.time.ms``), never past its maximum time. Only the owner or a renewer
may; an expired token is DELEGATION_TOKEN_EXPIRED, an unknown HMAC DELEGATION_TOKEN_NOT_FOUND."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.token_answers import changed_expiry

_MS = datetime.timedelta(milliseconds=1)


@handles(api_key=39, min_version=1, max_version=2)
async def handle_renew_delegation_token(ctx: RequestContext, request: Any) -> Response:
    code, expiry = await changed_expiry(
        ctx,
        lambda tokens: tokens.renew(
            ctx.session.principal, bytes(request.hmac), request.renew_period // _MS
        ),
    )
    return ctx.respond(throttle_time=0, error_code=code, expiry_timestamp=expiry)
