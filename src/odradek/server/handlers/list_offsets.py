"""ListOffsets (2): earliest, latest, max-timestamp and by-timestamp offsets of partitions."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
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
        partition.check_leader_epoch(current_leader_epoch)
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


@handles(api_key=2, min_version=1, max_version=8)
async def handle_list_offsets(ctx: RequestContext, request: Any) -> Response:
    read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    return ctx.respond(
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
