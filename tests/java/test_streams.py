"""Kafka Streams (kafka-streams 4.x, as in pom.xml) against one broker: a word count with a
state store, its changelog and a repartition topic, run with processing.guarantee
exactly_once_v2 (transactions: a producer per thread, offsets committed in the transaction) and
at_least_once; its output is read back by a read_committed consumer."""

from __future__ import annotations

import collections
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing import wait_until

from .support import create_topic, start_java

LINES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "the dog barks",
    "a fox is quick and the dog is lazy",
] * 25


def latest_counts(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    """The last count of each word in ``topic``, as a read_committed consumer reads it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        counts: dict[str, int] = {}
        at_end: set[int] = set()
        while len(at_end) < partitions:
            message = consumer.poll(5)
            if message is None:
                break
            if message.error():
                at_end.add(message.partition())
                continue
            counts[message.key().decode()] = int(message.value())
        return counts
    finally:
        consumer.close()


@pytest.mark.parametrize("guarantee", ["exactly_once_v2", "at_least_once"])
def test_word_count(bootstrap: str, tmp_path: Path, guarantee: str) -> None:
    suffix = uuid.uuid4().hex[:6]
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(LINES):
        producer.produce(source, value=line.encode(), key=str(i).encode())
    producer.flush(30)
    expected = collections.Counter(w for line in LINES for w in line.split())

    app = start_java(
        "JavaStreams",
        bootstrap,
        f"wordcount-{suffix}",
        source,
        sink,
        str(tmp_path / "state"),
        guarantee,
        log=tmp_path / "streams.log",
    )
    try:
        wait_until(
            lambda: latest_counts(bootstrap, sink, 2) == expected,
            timeout_s=90,
            interval_s=1,
            what=f"the word counts ({(tmp_path / 'streams.log').read_text()[-3000:]})",
        )
    finally:
        assert app.stdin is not None and app.stdout is not None
        app.stdin.close()
        out = app.stdout.read()
        app.wait(60)
    states = [line.split()[1] for line in out.splitlines() if line.startswith("state ")]
    assert "RUNNING" in states and "ERROR" not in states, out
    assert "closed" in out.splitlines()
