"""ElectLeaders (43): preferred (0) or unclean (1, KIP-460) leader election, on the controller
(another broker answers NOT_CONTROLLER)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.partition_errors import by_topic
from odradek.server.registry import handles
from odradek.topic_partition import TopicPartition

PREFERRED = 0
UNCLEAN = 1


def _result(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"partition_id": index, "error_code": code, "error_message": message}


@handles(api_key=43, min_version=0, max_version=2)
async def handle_elect_leaders(ctx: RequestContext, request: Any) -> Response:
    asked = (
        None
        if request.topic_partitions is None
        else [
            TopicPartition(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions
        ]
    )
    election_type = int(getattr(request, "election_type", PREFERRED))
    controller = ctx.services.controller
    error = ErrorCode.none
    results: dict[TopicPartition, dict[str, Any]] = {}
    if not permits_cluster(ctx, Op.ALTER):
        error = ErrorCode.cluster_authorization_failed
        for tp in asked or []:
            results[tp] = _result(tp.partition, error)
    elif election_type not in (PREFERRED, UNCLEAN):
        error = ErrorCode.invalid_request
    elif controller is None:
        # One broker leads every partition it has: no election is ever needed.
        for tp in asked or []:
            known = ctx.services.topics.partition(tp.topic, tp.partition) is not None
            results[tp] = _result(
                tp.partition,
                ErrorCode.election_not_needed if known else ErrorCode.unknown_topic_or_partition,
            )
    else:
        try:
            elect = (
                controller.elect_unclean if election_type == UNCLEAN else controller.elect_preferred
            )
            elected = await elect(asked)
        except KafkaError as e:
            error = e.code
        else:
            for tp, outcome in elected.items():
                results[tp] = _result(tp.partition, outcome.error, outcome.message)
    return ctx.respond(
        throttle_time=0,
        error_code=error,
        replica_election_results=[
            {"topic": topic, "partition_result": partitions}
            for topic, partitions in by_topic(results).items()
        ],
    )
