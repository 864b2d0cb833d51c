"""Metadata (3): brokers, topics and partition leaders; auto-creates topics Kafka's way."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.store import TopicMetadata
from odradek.cluster.metadata.view import NO_NODE, BrokerEndpoint, PartitionInfo
from odradek.protocol import metadata_response
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.acl import CLUSTER_NAME
from odradek.server.authorize import (
    CLUSTER,
    OPERATIONS_NOT_ASKED,
    TOPIC,
    Op,
    authorized_operations,
    denied,
    permits,
    permits_cluster,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


# Topics' answers as last written. An answer is a function of its key and of the state it is
# kept with alone, so one cache serves every broker of the process.
_ENCODED = metadata_response.EncodedTopics()

PartitionStates = tuple[PartitionInfo | None, ...]


def partition_states(ctx: RequestContext, topic: TopicMetadata) -> PartitionStates:
    """Each partition's state as the cluster view has it (None: the view has no such
    partition)."""
    partition_info = ctx.services.cluster.partition_info
    name = topic.name
    return tuple([partition_info(name, index) for index in range(topic.partitions)])


def describe_topic(
    ctx: RequestContext,
    topic: TopicMetadata,
    live: frozenset[int],
    states: PartitionStates | None = None,
) -> dict[str, Any]:
    """The topic's partitions as the cluster view has them; ``live`` holds the live brokers."""
    partitions = []
    if states is None:
        states = partition_states(ctx, topic)
    for index, state in enumerate(states):
        if state is None:
            partitions.append(
                {
                    "error_code": ErrorCode.leader_not_available,
                    "partition_index": index,
                    "leader_id": NO_NODE,
                    "leader_epoch": -1,
                    "replica_nodes": [],
                    "isr_nodes": [],
                    "offline_replicas": [],
                }
            )
            continue
        # As Kafka: a leader that is not live is no leader, and the client retries.
        led = state.leader in live
        partitions.append(
            {
                "error_code": ErrorCode.none if led else ErrorCode.leader_not_available,
                "partition_index": index,
                "leader_id": state.leader if led else NO_NODE,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "offline_replicas": state.offline_replicas,
            }
        )
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": OPERATIONS_NOT_ASKED,
    }


def _answer_topic(
    ctx: RequestContext, topic: TopicMetadata, live: frozenset[int], *, encoded: bool
) -> dict[str, Any] | bytes:
    """The topic as :func:`describe_topic` has it; with ``encoded``, written for the request's
    version, as written last time if its partitions' states are the same."""
    if not encoded:
        return describe_topic(ctx, topic, live)
    states = partition_states(ctx, topic)
    # Compared, not hashed: the view hands out the same state objects while nothing changes,
    # and tuples compare their items by identity first.
    state = (live, states)
    answer = _ENCODED.get(ctx.version, topic.name, topic.topic_id, state)
    if answer is None:
        answer = metadata_response.encode_topic(
            ctx.version, describe_topic(ctx, topic, live, states)
        )
        _ENCODED.put(ctx.version, topic.name, topic.topic_id, state, answer)
    return answer


def _broker(broker: BrokerEndpoint) -> dict[str, Any]:
    return {
        "node_id": broker.node_id,
        "host": broker.host,
        "port": broker.port,
        "rack": broker.rack,
    }


def _missing(name: str | None, code: ErrorCode, topic_id: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"error_code": code, "name": name, "partitions": []}
    if topic_id is not None:
        entry["topic_id"] = topic_id
    return entry


@handles(api_key=3, min_version=0, max_version=12)
async def handle_metadata(ctx: RequestContext, request: Any) -> Response:
    topics = ctx.services.topics
    cluster = ctx.services.cluster
    brokers = cluster.live_brokers()
    live = frozenset(b.node_id for b in brokers)
    wanted = request.topics
    # Topics answered with their authorized operations are described afresh; the others are
    # written once for as long as their partitions stay the same.
    with_operations = getattr(request, "include_topic_authorized_operations", False)
    encoded = not with_operations
    described: list[dict[str, Any] | bytes]
    if wanted is None or (ctx.version == 0 and not wanted):
        # Only the topics the principal may describe are listed.
        every = list(topics.topics())
        hidden = denied(ctx, Op.DESCRIBE, TOPIC, (t.name for t in every))
        described = [
            _answer_topic(ctx, t, live, encoded=encoded) for t in every if t.name not in hidden
        ]
    else:
        auto_create = getattr(request, "allow_auto_topic_creation", True) and (
            ctx.services.config.get_bool("auto.create.topics.enable")
        )
        by_id = {t.topic_id: t for t in topics.topics()}
        refused = denied(ctx, Op.DESCRIBE, TOPIC, (t.name for t in by_id.values()))
        refused |= denied(ctx, Op.DESCRIBE, TOPIC, (i.name for i in wanted if i.name is not None))
        described = []
        for item in wanted:
            if item.name is None:
                described.append(
                    _by_id(ctx, by_id.get(item.topic_id), item.topic_id, refused, live, encoded)
                )
            else:
                described.append(
                    await _by_name(ctx, item.name, refused, auto_create, live, encoded)
                )
    if with_operations:
        for entry in described:
            if isinstance(entry, dict) and entry["error_code"] == ErrorCode.none:
                entry["topic_authorized_operations"] = authorized_operations(
                    ctx, TOPIC, entry["name"]
                )
    # Written by hand: kio's writer took over a second for 20,000 partitions.
    return metadata_response.encode(
        ctx.version,
        ctx.header.correlation_id,
        brokers=[_broker(b) for b in brokers],
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id(),
        topics=described,
        cluster_authorized_operations=(
            authorized_operations(ctx, CLUSTER, CLUSTER_NAME)
            if getattr(request, "include_cluster_authorized_operations", False)
            else OPERATIONS_NOT_ASKED
        ),
    )


def _by_id(
    ctx: RequestContext,
    found: TopicMetadata | None,
    topic_id: Any,
    refused: frozenset[str],
    live: frozenset[int],
    encoded: bool,
) -> dict[str, Any] | bytes:
    """A topic asked for by id (Metadata v10+)."""
    if found is None:
        return _missing(None, ErrorCode.unknown_topic_id, topic_id)
    if found.name in refused:
        return _missing(None, ErrorCode.topic_authorization_failed, topic_id)
    return _answer_topic(ctx, found, live, encoded=encoded)


async def _by_name(
    ctx: RequestContext,
    name: str,
    refused: frozenset[str],
    auto_create: bool,
    live: frozenset[int],
    encoded: bool,
) -> dict[str, Any] | bytes:
    """A topic asked for by name, created first if it is missing and auto-creation is on and
    allowed to this principal."""
    if name in refused:
        return _missing(name, ErrorCode.topic_authorization_failed)
    topics = ctx.services.topics
    topic = topics.topic(name)
    if topic is None and auto_create:
        if not (permits_cluster(ctx, Op.CREATE) or permits(ctx, Op.CREATE, TOPIC, name)):
            return _missing(name, ErrorCode.topic_authorization_failed)
        try:
            topic = await topics.create_topic(name)
        except KafkaError as e:
            # Made meanwhile by another broker (or request), not known here yet: as Kafka
            # answers, it is on its way (the client asks again).
            exists = e.code == ErrorCode.topic_already_exists
            return _missing(name, ErrorCode.leader_not_available if exists else e.code)
    if topic is None:
        return _missing(name, ErrorCode.unknown_topic_or_partition)
    return _answer_topic(ctx, topic, live, encoded=encoded)
