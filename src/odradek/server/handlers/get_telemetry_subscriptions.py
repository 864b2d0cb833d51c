"""GetTelemetrySubscriptions (71): a client's instance id and the metrics it is to push
(KIP-714)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.telemetry.clients import ACCEPTED_COMPRESSION


def client_selectors(ctx: RequestContext) -> dict[str, str]:
    """What subscriptions' ``match`` selectors see of the asking client."""
    host, _, port = ctx.session.peer.rpartition(":")
    return {
        "client_id": ctx.header.client_id or "",
        "client_software_name": ctx.session.software_name,
        "client_software_version": ctx.session.software_version,
        "client_source_address": host.strip("[]"),
        "client_source_port": port,
    }


@handles(api_key=71, min_version=0, max_version=0)
async def handle_get_telemetry_subscriptions(ctx: RequestContext, request: Any) -> Response:
    telemetry = ctx.services.telemetry
    if telemetry is None:
        return ctx.respond(throttle_time=0, error_code=ErrorCode.unsupported_version)
    instance = telemetry.subscribe(
        request.client_instance_id, client_selectors(ctx), ctx.session.principal
    )
    assigned = instance.assigned
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        client_instance_id=instance.instance_id,
        subscription_id=assigned.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION),
        push_interval=assigned.interval_ms,
        telemetry_max_bytes=telemetry.max_bytes,
        # Cumulative sums, which Prometheus shows as they come.
        delta_temporality=False,
        requested_metrics=list(assigned.prefixes),
    )
