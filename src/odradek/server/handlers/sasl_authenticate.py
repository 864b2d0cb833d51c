"""SaslAuthenticate (36): one round of the SASL exchange the handshake chose (KIP-152).

A completed exchange makes the connection's principal ``User:<name>``; from version 1 the answer
carries the session lifetime (``connections.max.reauth.ms``, KIP-368), after which the client
must re-authenticate on the same connection. A failure answers SASL_AUTHENTICATION_FAILED and
the connection closes after ``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.sasl import SaslFailure
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=36, min_version=0, max_version=2)
async def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> Response:
    sasl = ctx.session.sasl
    if sasl is None or sasl.mechanism is None:
        message = (
            "SaslAuthenticate on a listener without SASL"
            if sasl is None
            else "SaslAuthenticate before SaslHandshake"
        )
        if sasl is not None:
            sasl.failure = message
        return ctx.respond(
            error_code=ErrorCode.illegal_sasl_state,
            error_message=message,
            auth_bytes=b"",
            session_lifetime=0,
        )
    now_ms = ctx.services.clock.monotonic_ms()
    try:
        answer, complete = sasl.authenticate(bytes(request.auth_bytes), now_ms)
    except SaslFailure as e:
        return ctx.respond(
            error_code=ErrorCode.sasl_authentication_failed,
            error_message=str(e),
            auth_bytes=b"",
            session_lifetime=0,
        )
    lifetime = 0
    if complete:
        assert sasl.principal is not None
        ctx.session.principal = sasl.principal
        if sasl.expires_at_ms is not None:
            lifetime = sasl.expires_at_ms - now_ms
    return ctx.respond(
        error_code=ErrorCode.none,
        error_message=None,
        auth_bytes=answer,
        session_lifetime=lifetime,
    )
