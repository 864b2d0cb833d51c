"""The single broker's cluster view, and topic checks that follow the view's live brokers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.cluster.controller.assignment import BrokerMetadata
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


def _manager(tmp_path: Path, live: Sequence[int] | None) -> Iterator[TopicManager]:
    clock = ManualClock()
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": str(HERE.node_id)})
    logs = LogManager(config.log_dirs, clock)
    manager = TopicManager(
        config,
        LocalMetadataStore(tmp_path, node_id=HERE.node_id),
        logs,
        clock,
        None if live is None else (lambda: [BrokerMetadata(n) for n in live]),
    )
    manager.open()
    yield manager
    logs.close()


@pytest.fixture
def topics(tmp_path: Path) -> Iterator[TopicManager]:
    """A lone broker's topics (placed on this broker only)."""
    yield from _manager(tmp_path, None)


@pytest.fixture
def three(tmp_path: Path) -> Iterator[TopicManager]:
    """Topics of a broker whose cluster has brokers 1, 2 and 3 live."""
    yield from _manager(tmp_path, (1, 2, 3))


async def test_the_local_view_leads_what_the_broker_hosts(topics: TopicManager) -> None:
    view = LocalClusterView(HERE, "cid", topics, group_partition=lambda group: len(group) % 2)
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


async def test_replication_factor_is_checked_against_live_brokers(three: TopicManager) -> None:
    await three.create_topic("three", 1, 3, validate_only=True)
    with pytest.raises(KafkaError) as refused:
        await three.create_topic("four", 1, 4, validate_only=True)
    assert refused.value.code == ErrorCode.invalid_replication_factor
    assert refused.value.message == "replication factor 4 is larger than the 3 brokers available"


async def test_assignments_are_checked_against_live_brokers(three: TopicManager) -> None:
    await three.create_topic("spread", assignments={0: [1, 2], 1: [3, 1]}, validate_only=True)
    for bad in ({0: [1, 7]}, {0: [2, 2]}, {0: []}, {0: [1, 2], 1: [3]}, {1: [1]}):
        with pytest.raises(KafkaError) as refused:
            await three.create_topic("bad", assignments=bad, validate_only=True)
        assert refused.value.code == ErrorCode.invalid_replica_assignment, bad


async def test_added_partitions_are_checked_against_live_brokers(three: TopicManager) -> None:
    await three.create_topic("grown", assignments={0: [1, 2]})
    await three.create_partitions("grown", 3, [[2, 3], [3, 1]], validate_only=True)
    for bad in ([[2, 3], [3, 9]], [[2, 3], [3]]):
        with pytest.raises(KafkaError) as refused:
            await three.create_partitions("grown", 3, bad, validate_only=True)
        assert refused.value.code == ErrorCode.invalid_replica_assignment, bad
