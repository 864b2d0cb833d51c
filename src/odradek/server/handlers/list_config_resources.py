"""ListConfigResources (74; ListClientMetricsResources at v0): the config resources there are,
by type (v0: the client metrics subscriptions only), for ``kafka-client-metrics --list`` and
``kafka-configs --describe`` without a name."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.topic_configs import BROKER_RESOURCE, TOPIC_RESOURCE
from odradek.telemetry.subscriptions import CLIENT_METRICS_RESOURCE

LISTED = (TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE)


@handles(api_key=74, min_version=0, max_version=1)
async def handle_list_config_resources(ctx: RequestContext, request: Any) -> Response:
    if not permits_cluster(ctx, Op.DESCRIBE_CONFIGS):
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, config_resources=[]
        )
    asked = [int(t) for t in getattr(request, "resource_types", ())] or (
        list(LISTED) if ctx.version >= 1 else [CLIENT_METRICS_RESOURCE]
    )
    if any(kind not in LISTED for kind in asked):
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.unsupported_version, config_resources=[]
        )
    found: list[dict[str, Any]] = []
    if TOPIC_RESOURCE in asked:
        names = sorted(t.name for t in ctx.services.topics.topics())
        found += [{"resource_name": n, "resource_type": TOPIC_RESOURCE} for n in names]
    if BROKER_RESOURCE in asked:
        brokers = sorted(b.node_id for b in ctx.services.cluster.live_brokers())
        found += [{"resource_name": str(b), "resource_type": BROKER_RESOURCE} for b in brokers]
    if CLIENT_METRICS_RESOURCE in asked:
        subscriptions = sorted(await ctx.services.topics.store.client_metrics_configs())
        found += [
            {"resource_name": n, "resource_type": CLIENT_METRICS_RESOURCE} for n in subscriptions
        ]
    if ctx.version == 0:
        found = [{"resource_name": r["resource_name"]} for r in found]
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, config_resources=found)
