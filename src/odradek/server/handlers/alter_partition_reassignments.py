"""AlterPartitionReassignments (45): move partitions to new replicas, or cancel a move (KIP-455).

Served by the controller, as in Kafka's ZooKeeper mode: another broker answers NOT_CONTROLLER
and clients send it again to the controller that Metadata names. A broker alone (no
controller) has one replica of everything: a target naming only itself changes nothing.
"""

from __future__ import annotations

from typing import Any

from odradek.cluster.controller.state import ReassignmentResult
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.partition_errors import by_topic
from odradek.server.registry import handles
from odradek.topic_partition import TopicPartition


@handles(api_key=45, min_version=0, max_version=1)
async def handle_alter_partition_reassignments(ctx: RequestContext, request: Any) -> Response:
    targets: dict[TopicPartition, tuple[int, ...] | None] = {
        TopicPartition(t.name, int(p.partition_index)): (
            None if p.replicas is None else tuple(int(r) for r in p.replicas)
        )
        for t in request.topics
        for p in t.partitions
    }
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    controller = ctx.services.controller
    error, message = ErrorCode.none, None
    results: dict[TopicPartition, ReassignmentResult] = {}
    if not permits_cluster(ctx, Op.ALTER):
        error = ErrorCode.cluster_authorization_failed
        results = {tp: ReassignmentResult(error) for tp in targets}
    elif controller is None:
        results = {tp: _alone(ctx, tp, target) for tp, target in targets.items()}
    else:
        try:
            results = await controller.alter_reassignments(
                targets, allow_replication_factor_change=allow_rf_change
            )
        except KafkaError as e:
            error, message = e.code, e.message
    grouped = by_topic(
        {
            tp: {
                "partition_index": tp.partition,
                "error_code": result.error,
                "error_message": result.message,
            }
            for tp, result in results.items()
        }
    )
    return ctx.respond(
        throttle_time=0,
        error_code=error,
        error_message=message,
        allow_replication_factor_change=allow_rf_change,
        responses=[{"name": topic, "partitions": ps} for topic, ps in grouped.items()],
    )


def _alone(
    ctx: RequestContext, tp: TopicPartition, target: tuple[int, ...] | None
) -> ReassignmentResult:
    if ctx.services.topics.partition(tp.topic, tp.partition) is None:
        return ReassignmentResult(ErrorCode.unknown_topic_or_partition)
    if target is None:
        return ReassignmentResult(ErrorCode.no_reassignment_in_progress)
    node = ctx.services.config.node_id
    if target != (node,):
        return ReassignmentResult(
            ErrorCode.invalid_replica_assignment,
            f"broker {node} is the only broker: the replicas can only be [{node}]",
        )
    return ReassignmentResult(ErrorCode.none)
