"""``kafka.isolation.level``: read_committed batch and streaming reads of a topic written by
confluent-kafka's transactional producer see exactly the committed records, up to the last
stable offset; read_uncommitted reads see everything."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.testing import RunningBroker

from .conftest import create_topic

PARTITIONS = 2


def transactional_producer(bootstrap: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"spark-rc-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": 60_000,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    return producer


def send(producer: Any, topic: str, values: list[str]) -> None:
    for i, value in enumerate(values):
        producer.produce(topic, value=value.encode(), partition=i % PARTITIONS)


@pytest.fixture
def written(broker: RunningBroker, topic: str) -> Iterator[tuple[Any, set[str], set[str]]]:
    """Committed and aborted transactions (and plain records) in ``topic``, then one open
    transaction left running: (its producer, committed values, every value)."""
    create_topic(broker.bootstrap, topic, PARTITIONS)
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": broker.bootstrap})
    txn = transactional_producer(broker.bootstrap)
    committed: set[str] = set()
    everything: set[str] = set()
    for round_ in range(6):
        values = [f"r{round_}-{i}" for i in range(25)]
        txn.begin_transaction()
        send(txn, topic, values)
        everything.update(values)
        if round_ % 3 == 1:
            txn.flush(30)  # librdkafka drops what it has not sent when a transaction aborts
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
            committed.update(values)
        loose = [f"plain{round_}-{i}" for i in range(5)]
        send(plain, topic, loose)
        plain.flush(30)
        everything.update(loose)
        committed.update(loose)
    open_txn = transactional_producer(broker.bootstrap)
    open_txn.begin_transaction()
    pending = [f"open-{i}" for i in range(10)]
    send(open_txn, topic, pending)
    open_txn.flush(30)
    everything.update(pending)
    yield open_txn, committed, everything
    with contextlib.suppress(Exception):
        open_txn.abort_transaction(10)


def batch_values(spark: Any, bootstrap: str, topic: str, isolation: str) -> list[str]:
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", isolation)
        .load()
    )
    return [bytes(r.value).decode() for r in df.select("value").collect()]


def test_batch_reads_see_committed_or_all(
    spark: Any, broker: RunningBroker, topic: str, written: tuple[Any, set[str], set[str]]
) -> None:
    open_txn, committed, everything = written
    seen = batch_values(spark, broker.bootstrap, topic, "read_committed")
    assert len(seen) == len(set(seen))
    assert set(seen) == committed  # no aborted rows, nothing of the open transaction
    all_rows = batch_values(spark, broker.bootstrap, topic, "read_uncommitted")
    assert sorted(all_rows) == sorted(everything)
    open_txn.commit_transaction(30)
    seen = batch_values(spark, broker.bootstrap, topic, "read_committed")
    assert set(seen) == committed | {f"open-{i}" for i in range(10)}
    assert len(seen) == len(set(seen))


def test_streaming_read_committed_stops_at_the_open_transaction(
    spark: Any,
    broker: RunningBroker,
    topic: str,
    written: tuple[Any, set[str], set[str]],
    tmp_path: Path,
) -> None:
    open_txn, committed, _ = written
    seen: list[str] = []

    def collect(df: Any, batch_id: int) -> None:
        seen.extend(bytes(r.value).decode() for r in df.select("value").collect())

    def run() -> None:
        df = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("kafka.isolation.level", "read_committed")
            .option("maxOffsetsPerTrigger", "60")
            .load()
        )
        query = (
            df.writeStream.foreachBatch(collect)
            .trigger(availableNow=True)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        query.awaitTermination(120)
        assert not query.isActive and query.exception() is None

    run()
    assert sorted(seen) == sorted(committed)
    open_txn.commit_transaction(30)
    run()  # from the checkpoint: only what the commit made stable
    assert sorted(seen) == sorted(committed | {f"open-{i}" for i in range(10)})
