"""OffsetForLeaderEpoch (23): where a leader epoch ends in this leader's log (KIP-101, KIP-279),
for followers (and consumers, KIP-320) finding where their log diverges."""

from __future__ import annotations

from typing import Any

from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles


def _end_of_epoch(ctx: RequestContext, topic: str, p: Any) -> dict[str, Any]:
    index = int(p.partition)
    partition = ctx.services.topics.partition(topic, index)
    if not permits(ctx, Op.DESCRIBE, TOPIC, topic):
        partition, code = None, ErrorCode.topic_authorization_failed
    elif partition is None:
        code = ErrorCode.unknown_topic_or_partition
    elif partition.log.offline:
        code = ErrorCode.kafka_storage_error  # its log dir failed (KIP-112)
    elif not partition.is_leader:
        code = ErrorCode.not_leader_or_follower
    else:
        code = partition.check_leader_epoch(int(getattr(p, "current_leader_epoch", -1)))
    if partition is None or code != ErrorCode.none:
        return {"error_code": code, "partition": index, "leader_epoch": -1, "end_offset": -1}
    epoch, end_offset = partition.log.end_offset_for_epoch(int(p.leader_epoch))
    return {
        "error_code": ErrorCode.none,
        "partition": index,
        "leader_epoch": epoch,
        "end_offset": end_offset,
    }


@handles(api_key=23, min_version=0, max_version=4, decode=old_messages.decoder(23))
async def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Response:
    return respond(
        ctx,
        throttle_time=0,
        topics=[
            {
                "topic": topic.topic,
                "partitions": [_end_of_epoch(ctx, topic.topic, p) for p in topic.partitions],
            }
            for topic in request.topics
        ],
    )
