"""SaslHandshake (17): the client names the SASL mechanism it will authenticate with (KIP-152).

Served only on SASL listeners (elsewhere ILLEGAL_SASL_STATE, as Kafka answers once a connection
is past authentication). A mechanism the listener does not enable gets UNSUPPORTED_SASL_MECHANISM
with the enabled ones, and the connection is closed as after a failed authentication. After
version 0 the SASL tokens travel as bare size-prefixed frames (Kafka before 1.0), which the
connection handles; librdkafka 2.0 also looks for version 0 in ApiVersions before it will use
version 1.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=17, min_version=0, max_version=1)
async def handle_sasl_handshake(ctx: RequestContext, request: Any) -> Response:
    sasl = ctx.session.sasl
    if sasl is None:
        return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=[])
    enabled = list(sasl.settings.mechanisms)
    if sasl.authenticated and sasl.settings.reauth_ms <= 0:
        # Re-authentication exists only with connections.max.reauth.ms (KIP-368).
        return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=enabled)
    if not sasl.handshake(request.mechanism):
        sasl.failure = (
            f"unsupported SASL mechanism {request.mechanism!r} (listener "
            f"{ctx.session.listener} enables {', '.join(enabled)})"
        )
        return ctx.respond(error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled)
    sasl.legacy_tokens = ctx.version == 0
    return ctx.respond(error_code=ErrorCode.none, mechanisms=enabled)
