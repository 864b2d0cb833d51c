"""DescribeTopicPartitions (75): topics' partitions (leader, epoch, replicas, ISR, ELR) in pages
of at most ``ResponsePartitionLimit`` partitions (capped by ``max.request.partition.size.limit``),
with a cursor to ask for the next page (KIP-966); what ``kafka-topics --describe`` asks first.
Topics are authorized like Metadata's: listing all hides those the principal may not describe,
naming one it may not describe answers TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, authorized_operations, denied
from odradek.server.context import RequestContext, Response
from odradek.server.handlers.metadata import describe_topic
from odradek.server.registry import handles


def _refused(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": None, "partitions": []}


@handles(api_key=75, min_version=0, max_version=0)
async def handle_describe_topic_partitions(ctx: RequestContext, request: Any) -> Response:
    topics = ctx.services.topics
    limit = min(
        max(int(request.response_partition_limit), 1),
        ctx.services.config.get_int("max.request.partition.size.limit"),
    )
    cursor = request.cursor
    names = sorted({t.name for t in request.topics})
    fetch_all = not names
    if fetch_all:
        names = sorted(t.name for t in topics.topics())
        hidden = denied(ctx, Op.DESCRIBE, TOPIC, names)
        names = [n for n in names if n not in hidden]
        refused: frozenset[str] = frozenset()
    else:
        refused = denied(ctx, Op.DESCRIBE, TOPIC, names)
    if cursor is not None:
        if not fetch_all and cursor.topic_name not in names:
            return ctx.respond(
                throttle_time=0,
                topics=[_refused(cursor.topic_name, ErrorCode.invalid_request)],
                next_cursor=None,
            )
        names = [n for n in names if n >= cursor.topic_name]
    live = frozenset(b.node_id for b in ctx.services.cluster.live_brokers())
    described: list[dict[str, Any]] = []
    left = limit
    next_cursor = None
    for name in names:
        if left == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if name in refused:
            described.append(_refused(name, ErrorCode.topic_authorization_failed))
            continue
        topic = topics.topic(name)
        if topic is None:
            described.append(_refused(name, ErrorCode.unknown_topic_or_partition))
            continue
        entry = describe_topic(ctx, topic, live)
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if first < 0:
            return ctx.respond(
                throttle_time=0,
                topics=[_refused(name, ErrorCode.invalid_request)],
                next_cursor=None,
            )
        partitions = entry["partitions"][first : first + left]
        cluster = ctx.services.cluster
        for partition in partitions:
            info = cluster.partition_info(name, partition["partition_index"])
            partition["eligible_leader_replicas"] = list(info.elr) if info is not None else []
            partition["last_known_elr"] = []
        entry["partitions"] = partitions
        entry["topic_authorized_operations"] = authorized_operations(ctx, TOPIC, name)
        described.append(entry)
        left -= len(partitions)
        if first + len(partitions) < topic.partitions:
            next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
            break
    return ctx.respond(throttle_time=0, topics=described, next_cursor=next_cursor)
