"""Metadata (3): brokers, topics and partition leaders; auto-creates topics Kafka's way."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata_store import TopicMetadata
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_NO_OPERATIONS = -(2**31)


def describe_topic(ctx: RequestContext, topic: TopicMetadata) -> dict[str, Any]:
    node_id = ctx.broker.node_id
    partitions = []
    for index in range(topic.partitions):
        partition = ctx.broker.topics.partition(topic.name, index)
        partitions.append(
            {
                "error_code": ErrorCode.none,
                "partition_index": index,
                "leader_id": node_id,
                "leader_epoch": partition.leader_epoch if partition else 0,
                "replica_nodes": [node_id],
                "isr_nodes": [node_id],
                "offline_replicas": [],
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": _NO_OPERATIONS,
    }


def _missing(name: str | None, code: ErrorCode, topic_id: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"error_code": code, "name": name, "partitions": []}
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


@handles(api_key=3, min_version=0, max_version=12)
async def handle_metadata(ctx: RequestContext, request: Any) -> Response:
    topics = ctx.broker.topics
    wanted = request.topics
    if wanted is None or (ctx.version == 0 and not wanted):
        described = [describe_topic(ctx, t) for t in topics.topics()]
    else:
        auto_create = getattr(request, "allow_auto_topic_creation", True) and (
            ctx.broker.config.get_bool("auto.create.topics.enable")
        )
        by_id = {t.topic_id: t for t in topics.topics()}
        described = []
        for item in wanted:
            name = item.name
            if name is None:
                found = by_id.get(item.topic_id)
                described.append(
                    describe_topic(ctx, found)
                    if found
                    else _missing(None, ErrorCode.unknown_topic_id, item.topic_id)
                )
                continue
            topic = topics.topic(name)
            if topic is None and auto_create:
                try:
                    topic = topics.create_topic(name)
                except KafkaError as e:
                    described.append(_missing(name, e.code))
                    continue
            described.append(
                describe_topic(ctx, topic)
                if topic
                else _missing(name, ErrorCode.unknown_topic_or_partition)
            )
    host, port = ctx.broker.advertised
    return ctx.respond(
        throttle_time=0,
        brokers=[{"node_id": ctx.broker.node_id, "host": host, "port": port, "rack": None}],
        cluster_id=ctx.broker.cluster_id,
        controller_id=ctx.broker.node_id,
        topics=described,
        cluster_authorized_operations=_NO_OPERATIONS,
    )
