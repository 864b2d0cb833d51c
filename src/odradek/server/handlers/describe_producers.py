"""DescribeProducers (61): the producer state of partitions this broker leads (what
``kafka-transactions.sh describe-producers`` shows)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _describe(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    partition = ctx.services.topics.partition(topic, index)
    if not permits(ctx, Op.READ, TOPIC, topic):
        code = ErrorCode.topic_authorization_failed
    elif partition is None:
        code = ErrorCode.unknown_topic_or_partition
    elif not partition.is_leader:
        code = ErrorCode.not_leader_or_follower
    else:
        return {
            "partition_index": index,
            "error_code": ErrorCode.none,
            "error_message": None,
            "active_producers": [
                {
                    "producer_id": p.producer_id,
                    "producer_epoch": p.epoch,
                    "last_sequence": p.last_sequence,
                    "last_timestamp": p.last_timestamp,
                    "coordinator_epoch": p.coordinator_epoch,
                    "current_txn_start_offset": p.txn_first_offset,
                }
                for p in partition.log.producers.producers()
            ],
        }
    return {
        "partition_index": index,
        "error_code": code,
        "error_message": None,
        "active_producers": [],
    }


@handles(api_key=61, min_version=0, max_version=0)
async def handle_describe_producers(ctx: RequestContext, request: Any) -> Response:
    return ctx.respond(
        throttle_time=0,
        topics=[
            {
                "name": topic.name,
                "partitions": [
                    _describe(ctx, topic.name, int(index)) for index in topic.partition_indexes
                ],
            }
            for topic in request.topics
        ],
    )
