"""The Java consumer's incremental fetch sessions (KIP-227) against one broker: reading a
100-partition topic, it opens a session with one full Fetch and then sends incremental ones that
name only the partitions whose position moved, and gets every record."""

from __future__ import annotations

from confluent_kafka import Producer

from odradek.testing import RunningBroker, wait_until

from .support import create_topic, start_java

PARTITIONS = 100


def test_the_java_consumer_fetches_incrementally(
    broker: RunningBroker, bootstrap: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    topic = "java-fetch-sessions"
    create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(1000):
        producer.produce(topic, value=b"v%d" % i, partition=i % PARTITIONS)
    producer.flush(30)
    assert broker.broker is not None
    sessions = broker.broker.services.fetch_sessions
    assert sessions is not None
    full_before, incremental_before = sessions.full_requests, sessions.incremental_requests
    named_before = sessions.partitions_named_incrementally

    # The consumer wants 1005 records: after the first 1000 it goes on fetching, idle.
    consumer = start_java(
        "JavaConsumer", bootstrap, topic, "java-fetch-sessions", "1005", "30000",
        log=tmp_path / "consumer.log",
    )  # fmt: skip
    try:
        wait_until(
            lambda: sessions.incremental_requests - incremental_before >= 5,
            timeout_s=30,
            what="incremental fetches",
        )
        for i in range(5):
            producer.produce(topic, value=b"late%d" % i, partition=7)
        producer.flush(30)
        assert consumer.stdout is not None
        out = consumer.stdout.read()
        assert consumer.wait(60) == 0
    finally:
        if consumer.poll() is None:
            consumer.kill()
    values = [line.split(" ")[5] for line in out.splitlines() if line.startswith("record ")]
    assert sorted(values) == sorted([f"v{i}" for i in range(1000)] + [f"late{i}" for i in range(5)])
    full = sessions.full_requests - full_before
    incremental = sessions.incremental_requests - incremental_before
    named = sessions.partitions_named_incrementally - named_before
    assert full >= 1 and incremental >= 5, (full, incremental)
    # Incremental requests name only what moved: far fewer than 100 partitions each.
    assert named < incremental * PARTITIONS / 4, (named, incremental)
