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
