"""ListPartitionReassignments (46): the moves in progress, on the controller (KIP-455)."""

from __future__ import annotations

from typing import Any

from odradek.cluster.controller.state import Reassignment
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.partition_errors import by_topic
from odradek.server.registry import handles
from odradek.topic_partition import TopicPartition


@handles(api_key=46, min_version=0, max_version=0)
async def handle_list_partition_reassignments(ctx: RequestContext, request: Any) -> Response:
    asked = (
        None
        if request.topics is None
        else [TopicPartition(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    )
    controller = ctx.services.controller
    error, message = ErrorCode.none, None
    ongoing: dict[TopicPartition, Reassignment] = {}
    if not permits_cluster(ctx, Op.DESCRIBE):
        error = ErrorCode.cluster_authorization_failed
    elif controller is not None:
        try:
            ongoing = await controller.list_reassignments(asked)
        except KafkaError as e:
            error, message = e.code, e.message
    grouped = by_topic(
        {
            tp: {
                "partition_index": tp.partition,
                "replicas": list(move.replicas),
                "adding_replicas": list(move.adding),
                "removing_replicas": list(move.removing),
            }
            for tp, move in ongoing.items()
        }
    )
    return ctx.respond(
        throttle_time=0,
        error_code=error,
        error_message=message,
        topics=[{"name": topic, "partitions": ps} for topic, ps in grouped.items()],
    )
