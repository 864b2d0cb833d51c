"""Requests a three-broker cluster must refuse, each with Kafka's error code, and the brokers
serving on: a connection opened before the bad request still gets answers, and the partition's
leader still takes an acks=all produce that a consumer can read back.

The cluster is shared by the module. Its RF=3 topic has had its leader killed and restarted once,
so that its leader epoch is past 0 and a stale epoch can be sent.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.testing import BrokerProcess, RunningCluster
from tests.server.conftest import (
    API_VERSIONS,
    FETCH,
    FETCH_VERSION,
    LIST_OFFSETS,
    METADATA,
    KafkaConnection,
    batch_of,
    values_of,
)

from .failover_support import (
    PartitionMetadata,
    address,
    agreed,
    create_replicated_topic,
    create_topic,
    started_cluster,
    unique_name,
    wait_for_leader,
)

OFFSET_FOR_LEADER_EPOCH = 23


@dataclass
class Setup:
    cluster: RunningCluster
    topic: str  # RF=3, one partition, leader epoch > 0
    pair_topic: str  # RF=2: one broker is no replica of it

    def state(self, topic: str | None = None) -> PartitionMetadata:
        found = agreed(self.cluster, topic or self.topic)
        assert found is not None, "the brokers disagree on the partition"
        return found

    def follower(self, topic: str | None = None) -> int:
        state = self.state(topic)
        return next(r for r in state.isr if r != state.leader)

    def connect(self, broker_id: int) -> KafkaConnection:
        return KafkaConnection(address(self.cluster, broker_id))


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with started_cluster(tmp_path_factory.mktemp("bad-requests")) as cluster:
        topic = unique_name("bad-requests")
        (first,) = create_replicated_topic(cluster, topic)
        cluster.kill(first.leader)
        wait_for_leader(cluster, topic, not_on=(first.leader,))
        cluster.start_broker(first.leader)
        state = wait_for_leader(cluster, topic, isr_size=3)
        assert state.leader_epoch > 0
        pair_topic = unique_name("pair")
        result = create_topic(cluster, pair_topic, 1, 2)
        assert result.error_code == ErrorCode.none, result
        wait_for_leader(cluster, pair_topic, isr_size=2)
        yield Setup(cluster, topic, pair_topic)


@pytest.fixture
def bystanders(setup: Setup) -> Iterator[list[KafkaConnection]]:
    """A connection to every broker, opened and used before the bad request."""
    connections = [setup.connect(b) for b in sorted(setup.cluster.brokers)]
    for connection in connections:
        _api_versions(connection)
    yield connections
    for connection in connections:
        connection.close()


def _api_versions(connection: KafkaConnection) -> None:
    response = connection.request(
        API_VERSIONS, 3, client_software_name="t", client_software_version="1"
    )
    assert response.error_code == ErrorCode.none


def assert_cluster_serves(setup: Setup, bystanders: list[KafkaConnection]) -> None:
    """Every earlier connection still answers, and the leader takes and serves a new record."""
    for connection in bystanders:
        _api_versions(connection)
    state = setup.state()
    assert len(state.isr) == 3, state
    with setup.connect(state.leader) as connection:
        produced = connection.produce(setup.topic, 0, batch_of(b"still serving"), acks=-1)
        assert produced.error_code == ErrorCode.none, produced
        fetched = connection.fetch(setup.topic, 0, int(produced.base_offset))
        assert fetched.error_code == ErrorCode.none
        assert values_of(fetched.records)[0] == b"still serving"


def fetch_fields(
    connection: KafkaConnection,
    topic: str,
    *,
    current_leader_epoch: int = -1,
    replica_id: int = -1,
    fetch_offset: int = 0,
) -> dict[str, Any]:
    fields = connection.fetch_request_fields([(topic, 0, fetch_offset)])
    fields["replica_id"] = replica_id
    fields["topics"][0]["partitions"][0]["current_leader_epoch"] = current_leader_epoch
    return fields


def fetch_error(connection: KafkaConnection, topic: str, **fields: int) -> int:
    response = connection.request(FETCH, FETCH_VERSION, **fetch_fields(connection, topic, **fields))
    assert response.error_code == ErrorCode.none
    (partition,) = response.responses[0].partitions
    return int(partition.error_code)


def list_offsets_error(connection: KafkaConnection, topic: str, current_leader_epoch: int) -> int:
    response = connection.request(
        LIST_OFFSETS,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "current_leader_epoch": current_leader_epoch,
                        "timestamp": -1,
                    }
                ],
            }
        ],
    )
    (partition,) = response.topics[0].partitions
    return int(partition.error_code)


def offset_for_leader_epoch(
    connection: KafkaConnection, topic: str, leader_epoch: int, current_leader_epoch: int = -1
) -> Any:
    response = connection.request(
        OFFSET_FOR_LEADER_EPOCH,
        4,
        replica_id=-1,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": current_leader_epoch,
                        "leader_epoch": leader_epoch,
                    }
                ],
            }
        ],
    )
    (partition,) = response.topics[0].partitions
    return partition


def test_produce_to_a_follower_is_not_leader_or_follower(setup, bystanders):
    follower = setup.follower()
    before = setup.state()
    with setup.connect(follower) as connection:
        for acks in (1, -1):
            answer = connection.produce(setup.topic, 0, batch_of(b"misdirected"), acks=acks)
            assert answer.error_code == ErrorCode.not_leader_or_follower
            assert answer.base_offset == -1
    assert setup.state() == before
    assert_cluster_serves(setup, bystanders)


def test_fetch_with_a_stale_or_future_leader_epoch_is_refused(setup, bystanders):
    state = setup.state()
    with setup.connect(state.leader) as connection:
        assert (
            fetch_error(connection, setup.topic, current_leader_epoch=state.leader_epoch - 1)
            == ErrorCode.fenced_leader_epoch
        )
        assert (
            fetch_error(connection, setup.topic, current_leader_epoch=state.leader_epoch + 1)
            == ErrorCode.unknown_leader_epoch
        )
        # The epoch the leader has, and none at all, are served.
        assert (
            fetch_error(connection, setup.topic, current_leader_epoch=state.leader_epoch)
            == ErrorCode.none
        )
        assert fetch_error(connection, setup.topic) == ErrorCode.none
    with setup.connect(setup.follower()) as connection:
        assert fetch_error(connection, setup.topic) == ErrorCode.not_leader_or_follower
    assert_cluster_serves(setup, bystanders)


def test_list_offsets_with_a_stale_or_future_leader_epoch_is_refused(setup, bystanders):
    state = setup.state()
    with setup.connect(state.leader) as connection:
        epoch = state.leader_epoch
        assert list_offsets_error(connection, setup.topic, epoch - 1) == (
            ErrorCode.fenced_leader_epoch
        )
        assert list_offsets_error(connection, setup.topic, epoch + 1) == (
            ErrorCode.unknown_leader_epoch
        )
        assert list_offsets_error(connection, setup.topic, epoch) == ErrorCode.none
        assert list_offsets_error(connection, setup.topic, -1) == ErrorCode.none
    with setup.connect(setup.follower()) as connection:
        assert list_offsets_error(connection, setup.topic, -1) == ErrorCode.not_leader_or_follower
    assert_cluster_serves(setup, bystanders)


def test_create_topics_with_more_replicas_than_brokers_is_invalid_replication_factor(
    setup, bystanders
):
    name = unique_name("rf4")
    result = create_topic(setup.cluster, name, 1, 4)
    assert result.error_code == ErrorCode.invalid_replication_factor
    # Nothing of the topic was made.
    with setup.connect(1) as connection:
        metadata = connection.request(
            METADATA, 9, topics=[{"name": name}], allow_auto_topic_creation=False
        )
        assert metadata.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert_cluster_serves(setup, bystanders)


def test_replica_fetch_from_a_broker_that_is_no_replica_is_refused(setup, bystanders):
    """Kafka's leader refuses a follower fetch from a broker outside the replica set
    (``Partition.followerReplicaOrThrow``): NOT_LEADER_OR_FOLLOWER for a request without a
    leader epoch; the ISR stays as it was."""
    state = setup.state(setup.pair_topic)
    outsider = next(b for b in sorted(setup.cluster.brokers) if b not in state.replicas)
    with setup.connect(state.leader) as connection:
        for replica_id in (outsider, 99):
            assert (
                fetch_error(connection, setup.pair_topic, replica_id=replica_id)
                == ErrorCode.not_leader_or_follower
            )
    after = setup.state(setup.pair_topic)
    assert after.isr == state.isr
    assert after.leader_epoch == state.leader_epoch
    assert outsider not in after.isr
    assert_cluster_serves(setup, bystanders)


def test_a_second_broker_with_a_registered_id_exits_naming_the_id(setup, bystanders, tmp_path):
    cluster = setup.cluster
    taken = 2
    overrides = {
        **cluster.settings,
        "zookeeper.connect": cluster.zookeeper_connect,
        "broker.id": str(taken),
    }
    args = [arg for key, value in overrides.items() for arg in ("-o", f"{key}={value}")]
    duplicate = BrokerProcess(tmp_path / "duplicate", *args)
    with pytest.raises(RuntimeError) as refused:
        duplicate.start()
    if duplicate.process is not None and duplicate.process.poll() is None:
        duplicate.kill()
    assert duplicate.process is not None
    try:
        code = duplicate.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        duplicate.kill()
        raise
    assert code != 0
    message = str(refused.value)
    assert f"broker.id {taken} is already registered" in message, message
    # The first broker with that id still serves, at its own address.
    with setup.connect(taken) as connection:
        _api_versions(connection)
        metadata = connection.request(METADATA, 9, topics=[], allow_auto_topic_creation=False)
        brokers = {int(b.node_id): int(b.port) for b in metadata.brokers}
        assert brokers[taken] == cluster.brokers[taken].port
    assert_cluster_serves(setup, bystanders)


def test_offset_for_leader_epoch_to_a_follower_is_not_leader_or_follower(setup, bystanders):
    state = setup.state()
    with setup.connect(setup.follower()) as connection:
        answer = offset_for_leader_epoch(connection, setup.topic, state.leader_epoch)
        assert answer.error_code == ErrorCode.not_leader_or_follower
        assert answer.end_offset == -1
    with setup.connect(state.leader) as connection:
        answer = offset_for_leader_epoch(
            connection, setup.topic, state.leader_epoch, current_leader_epoch=state.leader_epoch
        )
        assert answer.error_code == ErrorCode.none
        assert answer.leader_epoch == state.leader_epoch
        assert answer.end_offset >= 0
        stale = offset_for_leader_epoch(
            connection, setup.topic, 0, current_leader_epoch=state.leader_epoch - 1
        )
        assert stale.error_code == ErrorCode.fenced_leader_epoch
    assert_cluster_serves(setup, bystanders)
