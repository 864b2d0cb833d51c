"""DescribeCluster (60): the cluster id, controller and brokers."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=60, min_version=0, max_version=1)
async def handle_describe_cluster(ctx: RequestContext, request: Any) -> Response:
    host, port = ctx.broker.advertised
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=ctx.broker.cluster_id,
        controller_id=ctx.broker.node_id,
        brokers=[{"broker_id": ctx.broker.node_id, "host": host, "port": port, "rack": None}],
        cluster_authorized_operations=-(2**31),
    )
