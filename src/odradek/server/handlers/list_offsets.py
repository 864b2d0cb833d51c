"""ListOffsets (2): earliest, latest, max-timestamp and by-timestamp offsets of partitions.

v0 (Burrow before 1.9.4, clients of Kafka 0.9) asks for up to ``max_num_offsets`` offsets and
gets segment boundaries, as Kafka 3.9's ``legacyFetchOffsetsBefore`` answered it.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
READ_COMMITTED = 1  # isolation_level, ListOffsets v2+


def _lookup(
    ctx: RequestContext,
    topic: str,
    index: int,
    timestamp: int,
    current_leader_epoch: int,
    read_committed: bool,
) -> dict[str, Any]:
    partition = ctx.services.topics.partition(topic, index)
    if partition is None or not permits(ctx, Op.DESCRIBE, TOPIC, topic):
        return {
            "partition_index": index,
            "error_code": ErrorCode.unknown_topic_or_partition
            if partition is None
            else ErrorCode.topic_authorization_failed,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
    refused = (
        ErrorCode.kafka_storage_error  # its log dir is offline (KIP-112)
        if partition.log.offline
        else partition.check_leader_epoch(current_leader_epoch)
        if partition.is_leader
        else ErrorCode.not_leader_or_follower
    )
    if refused != ErrorCode.none:
        return {
            "partition_index": index,
            "error_code": refused,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
    log = partition.log
    # read_committed clients see the log up to the last stable offset, as in Fetch.
    visible = partition.last_stable_offset if read_committed else partition.high_watermark
    found: tuple[int, int] | None
    if timestamp == LATEST:
        found = (visible, -1)
    elif timestamp in (EARLIEST, EARLIEST_LOCAL):
        found = (log.log_start_offset, -1)
    elif timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    elif timestamp < 0:
        return {
            "partition_index": index,
            "error_code": ErrorCode.invalid_request,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
    else:
        found = log.offset_for_timestamp(timestamp)
        if found is not None and found[0] >= visible:
            found = None
    offset, found_timestamp = found if found is not None else (-1, -1)
    return {
        "partition_index": index,
        "error_code": ErrorCode.none,
        "timestamp": found_timestamp,
        "offset": offset,
        "leader_epoch": partition.leader_epoch if found is not None else -1,
    }


def _old_style_offsets(
    ctx: RequestContext,
    topic: str,
    index: int,
    timestamp: int,
    max_num_offsets: int,
    consumer: bool,
) -> dict[str, Any]:
    """ListOffsets v0: the base offsets of the segments last modified at or before
    ``timestamp`` (latest: the log end offset first, earliest: the log start offset), newest
    first, at most ``max_num_offsets``; a consumer sees none past the high watermark."""
    partition = ctx.services.topics.partition(topic, index)
    if partition is None or not partition.is_leader:
        code = (
            ErrorCode.unknown_topic_or_partition
            if partition is None
            else ErrorCode.not_leader_or_follower
        )
        return {"partition_index": index, "error_code": code, "old_style_offsets": []}
    log = partition.log
    segments = log.segments
    points = [(max(s.base_offset, log.log_start_offset), s.last_modified_ms()) for s in segments]
    if segments[-1].size > 0:
        points.append((log.log_end_offset, ctx.services.clock.time_ms()))
    if timestamp == LATEST:
        start = len(points) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(points) - 1
        while start >= 0 and points[start][1] > timestamp:
            start -= 1
    offsets = sorted(
        (points[i][0] for i in range(start, start - min(max_num_offsets, start + 1), -1)),
        reverse=True,
    )
    hw = partition.high_watermark
    if consumer and any(o > hw for o in offsets):
        offsets = [hw, *(o for o in offsets if o <= hw)]
    return {"partition_index": index, "error_code": ErrorCode.none, "old_style_offsets": offsets}


@handles(api_key=2, min_version=0, max_version=8, decode=old_messages.decoder(2))
async def handle_list_offsets(ctx: RequestContext, request: Any) -> Response:
    read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    if ctx.version == 0:
        consumer = int(request.replica_id) < 0
        return respond(
            ctx,
            topics=[
                {
                    "name": topic.name,
                    "partitions": [
                        _old_style_offsets(
                            ctx,
                            topic.name,
                            int(p.partition_index),
                            int(p.timestamp),
                            int(p.max_num_offsets),
                            consumer,
                        )
                        for p in topic.partitions
                    ],
                }
                for topic in request.topics
            ],
        )
    return respond(
        ctx,
        throttle_time=0,
        topics=[
            {
                "name": topic.name,
                "partitions": [
                    _lookup(
                        ctx,
                        topic.name,
                        int(p.partition_index),
                        int(p.timestamp),
                        int(getattr(p, "current_leader_epoch", -1)),
                        read_committed,
                    )
                    for p in topic.partitions
                ],
            }
            for topic in request.topics
        ],
    )
