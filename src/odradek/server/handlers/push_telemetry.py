"""PushTelemetry (72): a client's metrics, in OTLP, kept for the Prometheus endpoint (KIP-714)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=72, min_version=0, max_version=0)
async def handle_push_telemetry(ctx: RequestContext, request: Any) -> Response:
    telemetry = ctx.services.telemetry
    if telemetry is None:
        return ctx.respond(throttle_time=0, error_code=ErrorCode.unsupported_version)
    error = telemetry.push(
        request.client_instance_id,
        int(request.subscription_id),
        bool(request.terminating),
        int(request.compression_type),
        bytes(request.metrics),
    )
    return ctx.respond(throttle_time=0, error_code=error)
