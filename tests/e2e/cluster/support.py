"""What the cluster tests share: topics and partition metadata through confluent-kafka's admin
client, a producer under load that records what was acknowledged, and reading a partition back."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningCluster, wait_until


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, replication: int = 3, **configs: str
) -> None:
    client = admin(bootstrap)  # kept: the futures fail if the client is destroyed first
    futures = client.create_topics(
        [NewTopic(name, partitions, replication, config=configs)], operation_timeout=30
    )
    for future in futures.values():
        future.result(30)
    wait_until(lambda: leader_of(bootstrap, name, partitions - 1) >= 0, what=f"{name} has leaders")


@dataclass(frozen=True)
class PartitionView:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partition_view(bootstrap: str, topic: str, partition: int = 0) -> PartitionView:
    client = admin(bootstrap)
    metadata = client.list_topics(topic, timeout=10)
    found = metadata.topics[topic].partitions.get(partition)
    if found is None:
        return PartitionView(-1, (), ())
    return PartitionView(found.leader, tuple(found.replicas), tuple(found.isrs))


def wait_back_in_isr(cluster: RunningCluster, topic: str, broker_id: int, timeout_s: float) -> None:
    """Wait for ``broker_id`` to be in partition 0's ISR again; failing that, the assertion
    carries the partition as Metadata shows it and the end of every broker's log."""
    try:
        wait_until(
            lambda: broker_id in partition_view(cluster.bootstrap, topic).isr,
            timeout_s,
            what=f"broker {broker_id} back in the ISR",
        )
    except AssertionError as e:
        logs = "\n".join(
            f"--- broker {b} ---\n" + "".join(list(cluster.brokers[b].output)[-40:])
            for b in sorted(cluster.brokers)
        )
        raise AssertionError(f"{e}; {partition_view(cluster.bootstrap, topic)}\n{logs}") from e


def leader_of(bootstrap: str, topic: str, partition: int = 0) -> int:
    try:
        return partition_view(bootstrap, topic, partition).leader
    except Exception:
        return -1


@dataclass
class ProducerLoad:
    """A librdkafka producer (idempotent, acks=all unless told) writing numbered values to one
    partition from a thread, recording each acknowledged offset with its value and every
    delivery error."""

    bootstrap: str
    topic: str
    config: dict[str, Any] = field(default_factory=dict)
    acked: dict[int, bytes] = field(default_factory=dict)
    errors: list[KafkaError] = field(default_factory=list)
    sent: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> ProducerLoad:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                **self.config,
            }
        )

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                self.errors.append(error)
            else:
                self.acked[message.offset()] = message.value()

        while not self._stop.is_set():
            try:
                producer.produce(
                    self.topic, value=b"value-%08d" % self.sent, partition=0, on_delivery=delivered
                )
                self.sent += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
            time.sleep(0.001)
        producer.flush(120)

    def wait_for_more(self, count: int = 100, timeout_s: float = 60) -> None:
        """Until ``count`` more records are acknowledged than now."""
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target, timeout_s, what=f"{target} acks")

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(180)
        assert not self._thread.is_alive(), "the producer did not finish flushing"


def read_partition(
    bootstrap: str, topic: str, end_offset: int, partition: int = 0, timeout_s: float = 60
) -> dict[int, bytes]:
    """Every record of the partition below ``end_offset``, by offset (a value seen twice at one
    offset fails the test)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "read-back",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    seen: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < end_offset and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            offset, value = message.offset(), message.value()
            assert seen.setdefault(offset, value) == value, f"two values at offset {offset}"
    finally:
        consumer.close()
    return seen
