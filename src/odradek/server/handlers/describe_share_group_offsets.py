"""DescribeShareGroupOffsets (90): where a share group stands on each partition — its start
offset (every record before it is done for the group) and, from v1, its lag — as
``kafka-share-groups --describe`` shows them. Answered by the group's coordinator from the
share-partitions this broker leads and, for the others, the share coordinator's persisted state
(ReadShareGroupStateSummary); a partition the group has no state of has offset -1."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import share_group

TopicPartitionKey = tuple[str, int]


async def _describe(ctx: RequestContext, group: Any) -> dict[str, Any]:
    group_id = group.group_id
    answer: dict[str, Any] = {"group_id": group_id, "topics": [], "error_code": ErrorCode.none}
    if not permits(ctx, Op.DESCRIBE, GROUP, group_id):
        return answer | {"error_code": ErrorCode.group_authorization_failed}
    described = await share_group(ctx, group_id)
    if described.error != ErrorCode.none:
        return answer | {"error_code": described.error, "error_message": described.message}
    manager = ctx.services.share_partitions
    topics = ctx.services.topics
    keys: list[TopicPartitionKey] | None = None
    if group.topics is not None:
        keys = [(t.topic_name, int(p)) for t in group.topics for p in t.partitions]
    found: dict[TopicPartitionKey, tuple[int, int, int]] = {}
    if manager is not None:
        # No topics named: every partition of every topic the group may have a state of.
        candidates = keys if keys is not None else _every_partition(ctx)
        found = await manager.offsets(group_id, candidates)
    wanted = keys if keys is not None else sorted(found)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for name, index in wanted:
        start, epoch, lag = found.get((name, index), (-1, -1, -1))
        error = ErrorCode.none
        if topics.topic(name) is None:
            error = ErrorCode.unknown_topic_or_partition
        elif not permits(ctx, Op.DESCRIBE, TOPIC, name):
            error = ErrorCode.topic_authorization_failed
        by_topic.setdefault(name, []).append(
            {
                "partition_index": index,
                "start_offset": start,
                "leader_epoch": epoch,
                "lag": lag,
                "error_code": error,
            }
        )
    answer["topics"] = [
        {
            "topic_name": name,
            "topic_id": getattr(topics.topic(name), "topic_id", None),
            "partitions": partitions,
        }
        for name, partitions in by_topic.items()
    ]
    return answer


def _every_partition(ctx: RequestContext) -> list[TopicPartitionKey]:
    return [
        (t.name, index)
        for t in ctx.services.topics.topics()
        if not t.name.startswith("__")
        for index in range(t.partitions)
    ]


@handles(api_key=90, min_version=0, max_version=1)
async def handle_describe_share_group_offsets(ctx: RequestContext, request: Any) -> Response:
    groups = await asyncio.gather(*(_describe(ctx, g) for g in request.groups))
    return ctx.respond(throttle_time=0, groups=list(groups))
