"""ApiVersions (18): the versions of every API this broker registers, derived from the registry."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import HANDLERS, handles


@handles(api_key=18, min_version=0, max_version=4)
async def handle_api_versions(ctx: RequestContext, request: Any) -> Response:
    if ctx.version >= 3:
        # KIP-511: kept for what clients are asked to push (KIP-714's selectors).
        ctx.session.software_name = str(request.client_software_name)
        ctx.session.software_version = str(request.client_software_version)
    return ctx.respond(
        error_code=ErrorCode.none,
        api_keys=[
            {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
        ],
        throttle_time=0,
    )
