"""kill -9 of the broker while it translates under load: every acknowledged record is a row of
the table exactly once after the restart."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer

from odradek.testing import wait_until
from tests.iceberg.support import (
    create_topic,
    log_ends,
    start_broker,
    table_offsets,
    table_rows,
)

TOPIC = "crashing"
PARTITIONS = 3


class Acks:
    def __init__(self) -> None:
        self.acked: set[tuple[int, int]] = set()

    def __call__(self, err: KafkaError | None, message: Message) -> None:
        if err is None:
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            self.acked.add((partition, offset))


def _produce_until(producer: Producer, acks: Acks, target: int) -> None:
    deadline = time.monotonic() + 30
    i = 0
    while len(acks.acked) < target and time.monotonic() < deadline:
        producer.produce(TOPIC, key=str(i % 11).encode(), value=b"x" * 100, on_delivery=acks)
        producer.poll(0)
        i += 1
        if i % 500 == 0:
            producer.poll(0.01)  # lets acks in; the load goes on
    assert len(acks.acked) >= target


def test_kill_9_under_load_loses_and_repeats_no_row(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    acks = Acks()
    try:
        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2})
        _produce_until(producer, acks, 5_000)
        # The translator has committed some of it (so the kill lands between commits).
        wait_until(lambda: sum(table_offsets(tmp_path, TOPIC).values()) > 0, what="a commit")
        _produce_until(producer, acks, 15_000)
        broker.kill()
        producer.flush(1)  # what is in flight fails or waits for the restart
        broker = start_broker(tmp_path, broker.port)
        _produce_until(producer, acks, len(acks.acked) + 3_000)
        assert producer.flush(30) == 0
        ends = log_ends(broker.bootstrap, TOPIC, PARTITIONS)
        wait_until(
            lambda: table_offsets(tmp_path, TOPIC) == ends,
            timeout_s=60,
            what=f"the table at the log ends {ends}",
        )
        rows = table_rows(tmp_path, TOPIC)
        assert rows is not None
        keys = Counter((r["partition"], r["offset"]) for r in rows.column("kafka").to_pylist())
        assert [k for k, n in keys.items() if n > 1] == []
        assert acks.acked - set(keys) == set()
        assert len(keys) == sum(ends.values())
    finally:
        broker.kill()
