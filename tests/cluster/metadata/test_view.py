"""The single broker's cluster view, and topic checks that follow the view's live brokers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.metadata.view import (
    CONSUMER_OFFSETS,
    BrokerEndpoint,
    LocalClusterView,
    PartitionInfo,
    leader_endpoint,
)
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import LogManager

HERE = BrokerEndpoint(5, "here.example", 9092)


class Brokers:
    """A view of live brokers, where every partition is on the first two."""

    def __init__(self, *node_ids: int) -> None:
        self.node_id = node_ids[0]
        self.cluster_id = "c"
        self._brokers = [BrokerEndpoint(n, f"b{n}", 9092) for n in node_ids]
        self._replicas = tuple(node_ids[:2])

    def controller_id(self) -> int:
        return self.node_id

    def live_brokers(self) -> Sequence[BrokerEndpoint]:
        return self._brokers

    def partition_info(self, topic: str, index: int) -> PartitionInfo | None:
        return PartitionInfo(self.node_id, 0, self._replicas, self._replicas)

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        return None


@pytest.fixture
def topics(tmp_path: Path) -> Iterator[TopicManager]:
    clock = ManualClock()
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": str(HERE.node_id)})
    logs = LogManager(config.log_dirs, clock)
    manager = TopicManager(config, LocalMetadataStore(tmp_path, node_id=HERE.node_id), logs, clock)
    manager.open()
    yield manager
    logs.close()


async def test_the_local_view_leads_what_the_broker_hosts(topics: TopicManager) -> None:
    view = LocalClusterView(HERE, "cid", topics, group_partition=lambda group: len(group) % 2)
    topics.cluster = view
    assert (view.node_id, view.cluster_id, view.controller_id()) == (5, "cid", 5)
    assert list(view.live_brokers()) == [HERE]
    await topics.create_topic("t", 2)
    assert view.partition_info("t", 1) == PartitionInfo(5, 0, (5,), (5,), ())
    assert view.partition_info("t", 2) is None
    assert view.partition_info("other", 0) is None
    assert leader_endpoint(view, "t", 0) == HERE
    assert view.group_coordinator("g") is None  # no __consumer_offsets yet
    await topics.create_topic(CONSUMER_OFFSETS, 2)
    assert view.group_coordinator("g") == HERE


async def test_replication_factor_is_checked_against_live_brokers(topics: TopicManager) -> None:
    topics.cluster = Brokers(1, 2, 3)
    await topics.create_topic("three", 1, 3, validate_only=True)
    with pytest.raises(KafkaError) as refused:
        await topics.create_topic("four", 1, 4, validate_only=True)
    assert refused.value.code == ErrorCode.invalid_replication_factor
    assert refused.value.message == "replication factor 4 is larger than the 3 brokers available"


async def test_assignments_are_checked_against_live_brokers(topics: TopicManager) -> None:
    topics.cluster = Brokers(1, 2, 3)
    await topics.create_topic("spread", assignments={0: [1, 2], 1: [3, 1]}, validate_only=True)
    for bad in ({0: [1, 7]}, {0: [2, 2]}, {0: []}, {0: [1, 2], 1: [3]}, {1: [1]}):
        with pytest.raises(KafkaError) as refused:
            await topics.create_topic("bad", assignments=bad, validate_only=True)
        assert refused.value.code == ErrorCode.invalid_replica_assignment, bad


async def test_added_partitions_are_checked_against_live_brokers(topics: TopicManager) -> None:
    topics.cluster = Brokers(1, 2, 3)
    await topics.create_topic("grown", assignments={0: [1, 2]})
    await topics.create_partitions("grown", 3, [[2, 3], [3, 1]], validate_only=True)
    for bad in ([[2, 3], [3, 9]], [[2, 3], [3]]):
        with pytest.raises(KafkaError) as refused:
            await topics.create_partitions("grown", 3, bad, validate_only=True)
        assert refused.value.code == ErrorCode.invalid_replica_assignment, bad
