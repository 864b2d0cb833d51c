"""A consumer group outlives its coordinator: kill -9 of the broker that coordinates it.

Three brokers, a topic and ``__consumer_offsets`` with replication factor 3, two confluent-kafka
consumers of one group committing each record after reading it (synchronously). The coordinator
(the leader of the group's offsets partition) is killed halfway; the group carries on with the
new leader of that partition, which loaded the group from its replica. A commit acknowledged
is replicated, so none is lost: a record is consumed twice only if a commit of it failed (the
uncommitted tail), and none is skipped.

The brokers are processes of their own (librdkafka's group consumers must not share a process
with the broker, see ``tests/e2e/groups_support.py``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningCluster, wait_until

from ..groups_support import close_all

PARTITIONS = 4
PER_PARTITION = 30
TIMEOUT_S = 60


def produce(bootstrap: str, topic: str, prefix: str) -> set[tuple[int, bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    sent = set()
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            value = f"{prefix}-{p}-{i}".encode()
            producer.produce(topic, value, partition=p)
            sent.add((p, value))
    assert producer.flush(TIMEOUT_S) == 0
    return sent


def stable_coordinator(admin: AdminClient, group: str) -> int | None:
    """The group's coordinator (found by FindCoordinator), once the group is Stable there with
    both members; None before."""
    (future,) = admin.describe_consumer_groups([group], request_timeout=10).values()
    try:
        described = future.result(timeout=15)
    except KafkaException:
        return None  # the coordinator is moving
    if not str(described.state).endswith("STABLE") or len(described.members) != 2:
        return None
    return int(described.coordinator.id)


def test_group_survives_the_loss_of_its_coordinator(tmp_path: Path) -> None:
    settings = {"group.min.session.timeout.ms": "500", "replica.lag.time.max.ms": "4000"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = f"failover-{uuid.uuid4().hex[:8]}"
        (created,) = admin.create_topics(
            [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3)],
            operation_timeout=15,
        ).values()
        created.result(timeout=20)
        sent = produce(bootstrap, topic, "before")

        group = f"g-{uuid.uuid4().hex[:8]}"
        consumers = [
            Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": group,
                    "client.id": f"member-{i}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 10_000,
                    "heartbeat.interval.ms": 500,
                }
            )
            for i in range(2)
        ]
        for c in consumers:
            c.subscribe([topic])
        seen: Counter[tuple[int, int]] = Counter()
        values: dict[tuple[int, int], bytes] = {}
        failed: set[tuple[int, int]] = set()

        def poll_once() -> None:
            for c in consumers:
                message = c.poll(0.05)
                if message is None or message.error():
                    continue
                key = (message.partition(), message.offset())
                seen[key] += 1
                values[key] = message.value()
                try:
                    c.commit(message=message, asynchronous=False)
                except KafkaException:
                    failed.add(key)

        def consumed(count: int) -> bool:
            poll_once()
            return len(seen) >= count

        wait_until(lambda: consumed(len(sent) // 2), TIMEOUT_S, 0, "half the records consumed")
        coordinator = wait_until(
            lambda: poll_once() or stable_coordinator(admin, group), TIMEOUT_S, 0, "a stable group"
        )
        offsets_topic = admin.list_topics("__consumer_offsets", timeout=10).topics
        partitions = offsets_topic["__consumer_offsets"].partitions.values()
        assert partitions and all(len(p.replicas) == 3 for p in partitions)

        cluster.kill(coordinator)
        killed_at = time.monotonic()
        survivors = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != coordinator)
        admin = AdminClient({"bootstrap.servers": survivors})
        sent |= produce(survivors, topic, "after")
        wait_until(lambda: consumed(len(sent)), TIMEOUT_S, 0, "every record consumed")
        took = time.monotonic() - killed_at

        new_coordinator = wait_until(
            lambda: poll_once() or stable_coordinator(admin, group), TIMEOUT_S, 0, "a stable group"
        )
        assert new_coordinator != coordinator
        # The group's commits are at the new coordinator: everything read is committed.
        ends = [TopicPartition(topic, p) for p in range(PARTITIONS)]

        def all_committed() -> bool:
            poll_once()
            for c in consumers:
                # Again a position whose commit failed, the last of its partition (KafkaException:
                # nothing to commit, or the coordinator still moving).
                with contextlib.suppress(KafkaException):
                    c.commit(asynchronous=False)
            try:
                committed = consumers[0].committed(ends, timeout=10)
            except KafkaException:
                return False
            return all(tp.offset == PER_PARTITION * 2 for tp in committed)

        wait_until(all_committed, TIMEOUT_S, 0, "every record committed")
        close_all(consumers)

    assert {(p, values[(p, o)]) for p, o in seen} == sent, "records skipped"
    twice = {key for key, count in seen.items() if count > 1}
    assert twice <= failed, f"records read again after their commit succeeded: {twice - failed}"
    print(f"failover: {len(seen)} records, {len(twice)} read twice, {took:.1f} s after the kill")
