"""KIP-392: a consumer with ``client.rack`` reads from an in-sync replica in its rack."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningCluster, wait_until
from tests.server.conftest import KafkaConnection, batch_of

from .support import create_topic, partition_view

pytestmark = pytest.mark.slow

TOPIC = "racked"
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def fetch_fields(rack: str) -> dict[str, object]:
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "rack_id": rack,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    }


def only_partition(response: object) -> object:
    (topic,) = response.responses  # type: ignore[attr-defined]
    (partition,) = topic.partitions
    return partition


def test_a_consumer_is_sent_to_the_replica_in_its_rack_and_reads_there(tmp_path: Path) -> None:
    racks = {1: "rack-a", 2: "rack-b", 3: "rack-c"}
    with RunningCluster(
        tmp_path, racks=racks, settings={"replica.selector.class": SELECTOR}
    ) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 3)
        view = partition_view(cluster.bootstrap, TOPIC)
        leader = view.leader
        follower = next(b for b in view.replicas if b != leader)
        with KafkaConnection(cluster.brokers[leader].bootstrap) as connection:
            for i in range(5):
                produced = connection.produce(TOPIC, 0, batch_of(b"r%d" % i), acks=-1)
                assert produced.error_code == ErrorCode.none
            # The leader points a consumer of the follower's rack at the follower ...
            sent = only_partition(connection.request(1, 12, **fetch_fields(racks[follower])))
            assert sent.preferred_read_replica == follower
            assert not sent.records
            # ... and serves one of its own rack (or of no known rack) itself.
            own = only_partition(connection.request(1, 12, **fetch_fields(racks[leader])))
            assert own.preferred_read_replica == -1 and own.records
        with KafkaConnection(cluster.brokers[follower].bootstrap) as connection:

            def served_up_to_the_end() -> object:
                found = only_partition(connection.request(1, 12, **fetch_fields(racks[follower])))
                return found if found.high_watermark == 5 else None  # type: ignore[attr-defined]

            # The follower learns the high watermark from its next fetch of the leader.
            served = wait_until(served_up_to_the_end, 10, what="the follower's high watermark")
            assert served.error_code == ErrorCode.none and served.records
            without_rack = only_partition(connection.request(1, 12, **fetch_fields("")))
            assert without_rack.error_code == ErrorCode.not_leader_or_follower
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "racked",
                "client.rack": racks[follower],
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            values = []
            while len(values) < 5:
                message = consumer.poll(10)
                assert message is not None, f"read only {values}"
                assert not message.error(), message.error()
                values.append(message.value())
            assert values == [b"r%d" % i for i in range(5)]
        finally:
            consumer.close()
