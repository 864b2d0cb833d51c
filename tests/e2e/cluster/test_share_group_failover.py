"""A share group outlives the leader of its partition, or of its share coordinator: kill -9 of
that broker mid-run.

Three brokers, a topic and ``__share_group_state`` with replication factor 3, a confluent-kafka
``ShareConsumer`` accepting what it gets. Halfway, with everything delivered so far accepted
(its acknowledgements answered, so written to the share coordinator), the partition's leader
is killed, or the leader of the ``__share_group_state`` partition holding the share-partition's
state (its share coordinator). The partition's leader reads the state from the share coordinator
(which may itself have moved) and goes on from there. Nothing is lost, nothing accepted before
the kill comes again, no record is delivered more often than the delivery limit, and ``odradek
groups describe`` shows the group's start offset from the share coordinator's state.

The brokers are processes of their own (librdkafka's consumers must not share a process with
the broker, see ``tests/e2e/groups_support.py``).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer, ShareConsumer, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from odradek.cli.main import main
from odradek.coordinator.share.records import partition_for
from odradek.testing import RunningCluster

from .support import admin, create_topic, leader_of

RECORDS = 60
DELIVERY_LIMIT = 5  # group.share.delivery.count.limit's default
TIMEOUT_S = 60
STATE_PARTITIONS = 50  # share.coordinator.state.topic.num.partitions' default


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(first, first + count):
        producer.produce(topic, str(i).encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0


def earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)


def share_coordinator_of(bootstrap: str, group: str, topic: str) -> int:
    """The broker leading the ``__share_group_state`` partition of the group's partition 0
    (Kafka's coordinator key: group, topic id, partition)."""
    client = admin(bootstrap)  # kept: the futures fail if the client is destroyed first
    (description,) = client.describe_topics(TopicCollection([topic])).values()
    key = f"{group}:{description.result(TIMEOUT_S).topic_id}:0"
    return leader_of(bootstrap, "__share_group_state", partition_for(key, STATE_PARTITIONS))


@pytest.mark.parametrize("victim", ["partition leader", "share coordinator"])
def test_a_share_group_survives_the_loss_of_its_partition_leader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], victim: str
) -> None:
    settings = {"replica.lag.time.max.ms": "4000", "group.share.heartbeat.interval.ms": "500"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        bootstrap = cluster.bootstrap
        topic = f"share-failover-{uuid.uuid4().hex[:8]}"
        group = f"g-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic)
        earliest(bootstrap, group)
        produce(bootstrap, topic, 0, RECORDS // 2)
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([topic])
        deliveries: dict[str, list[int]] = {}

        def poll_until(count: int) -> None:
            deadline = time.monotonic() + TIMEOUT_S
            while len(deliveries) < count:
                assert time.monotonic() < deadline, f"{len(deliveries)} of {count} delivered"
                for message in consumer.poll(0.2):
                    if message.error() is not None:
                        continue
                    value = (message.value() or b"").decode()
                    deliveries.setdefault(value, []).append(message.delivery_count())

        try:
            poll_until(RECORDS // 2)
            consumer.commit_sync(TIMEOUT_S)  # implicit mode: everything delivered is accepted
            before = set(deliveries)
            if victim == "partition leader":
                leader = leader_of(bootstrap, topic)
            else:
                leader = share_coordinator_of(bootstrap, group, topic)
            assert leader >= 0
            cluster.kill(leader)
            survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != leader)
            produce(survivors, topic, RECORDS // 2, RECORDS - RECORDS // 2)
            poll_until(RECORDS)
            consumer.commit_sync(TIMEOUT_S)
        finally:
            consumer.close()
        # Where the group stands, as its coordinator tells it from the share coordinator's
        # state, whichever broker leads the partition now.
        capsys.readouterr()
        args = ["groups", "describe", group, "--bootstrap-server", survivors, "--output", "json"]
        assert main(args) == 0
        (described,) = json.loads(capsys.readouterr().out)
        assert [(o["partition"], o["current_offset"]) for o in described["offsets"]] == [
            (0, RECORDS)
        ]
    assert set(deliveries) == {str(i) for i in range(RECORDS)}, "records lost"
    again = {v for v in before if len(deliveries[v]) > 1}
    assert not again, f"accepted before the kill, delivered again: {sorted(again)}"
    assert max(c for counts in deliveries.values() for c in counts) <= DELIVERY_LIMIT
