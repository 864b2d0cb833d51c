"""DescribeCluster (60): the cluster id, controller and brokers."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import CLUSTER_NAME
from odradek.server.authorize import (
    CLUSTER,
    OPERATIONS_NOT_ASKED,
    Op,
    authorized_operations,
    permits_cluster,
    refusal,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=60, min_version=0, max_version=1)
async def handle_describe_cluster(ctx: RequestContext, request: Any) -> Response:
    if not permits_cluster(ctx, Op.DESCRIBE):
        return refusal(ctx, CLUSTER, brokers=[])
    cluster = ctx.services.cluster
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=1,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id(),
        brokers=[
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in cluster.live_brokers()
        ],
        cluster_authorized_operations=(
            authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
            if request.include_cluster_authorized_operations
            else OPERATIONS_NOT_ASKED
        ),
    )
