"""Metadata answers from the cluster view: one broker leads everything; with a view of several
brokers, leaders, replicas and ISRs are the view's."""

from __future__ import annotations

import asyncio

from odradek.cluster.metadata.view import BrokerEndpoint, PartitionInfo
from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices
from tests.server.conftest import METADATA

from .conftest import ENDPOINT, NODE_ID, HandlerCaller, StaticClusterView


def _metadata(handlers: HandlerCaller, *names: str, auto_create: bool = False) -> object:
    return handlers.call(
        METADATA,
        12,
        topics=[{"name": name} for name in names],
        allow_auto_topic_creation=auto_create,
    )


def test_a_single_broker_leads_every_partition(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("orders", 3))
    response = handlers.call(METADATA, 12, topics=None)
    (broker,) = response.brokers
    assert (broker.node_id, broker.host, broker.port, broker.rack) == (
        NODE_ID,
        ENDPOINT.host,
        ENDPOINT.port,
        None,
    )
    assert response.controller_id == NODE_ID
    assert response.cluster_id == services.cluster.cluster_id
    (topic,) = response.topics
    assert (topic.error_code, topic.name, topic.is_internal) == (ErrorCode.none, "orders", False)
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    for p in topic.partitions:
        assert p.error_code == ErrorCode.none
        assert p.leader_id == NODE_ID
        assert p.leader_epoch == 0
        assert list(p.replica_nodes) == [NODE_ID]
        assert list(p.isr_nodes) == [NODE_ID]
        assert list(p.offline_replicas) == []


def test_unknown_topics_are_created_only_when_allowed(handlers: HandlerCaller) -> None:
    (missing,) = _metadata(handlers, "later").topics
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    (created,) = _metadata(handlers, "later", auto_create=True).topics
    assert created.error_code == ErrorCode.none
    assert len(created.partitions) == 1  # num.partitions
    assert created.partitions[0].leader_id == NODE_ID


def test_leaders_and_replicas_come_from_the_view(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("spread", 2))
    others = [ENDPOINT, BrokerEndpoint(2, "b2.example", 9093, "rack-b")]
    view = StaticClusterView(
        node_id=NODE_ID,
        cluster_id="a-cluster",
        brokers=others,
        controller=2,
        states={
            ("spread", 0): PartitionInfo(2, 7, (2, 1, 3), (2, 1), offline_replicas=(3,)),
            ("spread", 1): PartitionInfo(3, 4, (3, 1), (3,)),  # broker 3 is not live
        },
    )
    response = _metadata(handlers.with_cluster(view), "spread")
    assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (1, "broker.example", 9092, None),
        (2, "b2.example", 9093, "rack-b"),
    ]
    assert (response.controller_id, response.cluster_id) == (2, "a-cluster")
    first, second = response.topics[0].partitions
    assert (first.error_code, first.leader_id, first.leader_epoch) == (ErrorCode.none, 2, 7)
    assert (list(first.replica_nodes), list(first.isr_nodes)) == ([2, 1, 3], [2, 1])
    assert list(first.offline_replicas) == [3]
    assert (second.error_code, second.leader_id) == (ErrorCode.leader_not_available, -1)
    assert list(second.replica_nodes) == [3, 1]


def test_answers_follow_every_change_of_a_topic_asked_again_and_again(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("again", 2))
    view = StaticClusterView(
        node_id=NODE_ID,
        cluster_id="a-cluster",
        brokers=[ENDPOINT, BrokerEndpoint(2, "b2.example", 9093)],
        controller=NODE_ID,
        states={
            ("again", 0): PartitionInfo(NODE_ID, 3, (NODE_ID, 2), (NODE_ID, 2)),
            ("again", 1): PartitionInfo(2, 5, (2, NODE_ID), (2,)),
        },
    )
    caller = handlers.with_cluster(view)

    def answered() -> list[tuple[int, int, int, list[int]]]:
        (topic,) = _metadata(caller, "again").topics
        return [
            (p.error_code, p.leader_id, p.leader_epoch, list(p.isr_nodes)) for p in topic.partitions
        ]

    assert (
        answered()
        == answered()
        == [
            (ErrorCode.none, NODE_ID, 3, [NODE_ID, 2]),
            (ErrorCode.none, 2, 5, [2]),
        ]
    )
    # A new leader, epoch and ISR: the next answer has them.
    view.states[("again", 1)] = PartitionInfo(NODE_ID, 6, (2, NODE_ID), (NODE_ID,))
    assert answered()[1] == (ErrorCode.none, NODE_ID, 6, [NODE_ID])
    # The leader's broker is no longer live: no leader.
    view.brokers = [ENDPOINT]
    view.states[("again", 1)] = PartitionInfo(2, 7, (2, NODE_ID), (2,))
    assert answered()[1] == (ErrorCode.leader_not_available, -1, 7, [2])


def test_a_topic_grown_or_made_again_is_answered_as_it_is_now(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("grows", 2))
    (before,) = _metadata(handlers, "grows").topics
    assert len(before.partitions) == 2
    asyncio.run(services.topics.create_partitions("grows", 5))
    (after,) = _metadata(handlers, "grows").topics
    assert [p.partition_index for p in after.partitions] == [0, 1, 2, 3, 4]
    asyncio.run(services.topics.delete_topic("grows"))
    asyncio.run(services.topics.create_topic("grows", 1))
    (made_again,) = _metadata(handlers, "grows").topics
    assert made_again.topic_id != before.topic_id
    assert len(made_again.partitions) == 1
