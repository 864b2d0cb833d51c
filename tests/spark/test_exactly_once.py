"""The sink's ``exactlyOnce`` mode: rows written in transactions, once per task and micro-batch,
whatever Spark replays. The kill -9 test of the driver is in test_exactly_once_kill.py."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from odradek.client.data import READ_COMMITTED, DataClient, TopicPartition, data_batches
from odradek.protocol.records import decode_batch
from odradek.testing import RunningBroker

from .conftest import create_topic, produce, values


def output_values(bootstrap: str, topic: str, partitions: int, isolation: int) -> list[bytes]:
    """Every value in ``topic`` as a reader with ``isolation`` sees it (data client, no Spark)."""
    found: list[bytes] = []
    with DataClient(bootstrap, isolation_level=isolation) as client:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            end = client.latest([tp])[tp]
            for fetched in client.fetch_range(tp, 0, end):
                for batch in data_batches(fetched):
                    found.extend(r.value or b"" for r in decode_batch(batch))
    return found


def wait_stable(bootstrap: str, topic: str, partitions: int) -> None:
    """Until the output's last stable offsets reach its ends: markers follow EndTxn."""
    import time

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with (
        DataClient(bootstrap) as plain,
        DataClient(bootstrap, isolation_level=READ_COMMITTED) as committed,
    ):
        deadline = time.monotonic() + 30
        while committed.latest(tps) != plain.latest(tps) and time.monotonic() < deadline:
            time.sleep(0.02)


def run_stream(spark: Any, bootstrap: str, source: str, output: str, checkpoint: Path) -> Any:
    df = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("key", "value")
    )
    query = (
        df.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with contextlib.suppress(Exception):
        query.awaitTermination(120)
    assert not query.isActive and query.exception() is None, query.exception()
    return query


def test_a_replayed_micro_batch_is_not_written_twice(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    source, output = f"{topic}-in", f"{topic}-out"
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, output, 3)
    sent = [
        r.value
        for p in range(2)
        for r in produce(broker.bootstrap, source, p, values(source, p, 0, 150))
    ]
    checkpoint = tmp_path / "checkpoint"
    run_stream(spark, broker.bootstrap, source, output, checkpoint)
    wait_stable(broker.bootstrap, output, 3)
    assert sorted(output_values(broker.bootstrap, output, 3, READ_COMMITTED)) == sorted(sent)

    # A driver that died after the tasks committed but before Spark's commit log had the last
    # batch: Spark runs that batch again, with the same id and the same input.
    commits = sorted(
        (p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    assert len(commits) >= 3  # 300 rows, 100 a batch
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run_stream(spark, broker.bootstrap, source, output, checkpoint)
    wait_stable(broker.bootstrap, output, 3)
    assert sorted(output_values(broker.bootstrap, output, 3, READ_COMMITTED)) == sorted(sent)
    # Nothing was produced the second time, not even aborted data.
    assert sorted(output_values(broker.bootstrap, output, 3, 0)) == sorted(sent)


def test_exactly_once_batch_write(spark: Any, broker: RunningBroker, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 2)
    df = spark.range(500).selectExpr("CAST(id AS STRING) AS key", "concat('row-', id) AS value")
    (
        df.repartition(3)
        .write.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", "true")
        .mode("append")
        .save()
    )
    wait_stable(broker.bootstrap, topic, 2)
    got = output_values(broker.bootstrap, topic, 2, READ_COMMITTED)
    assert sorted(got) == sorted(f"row-{i}".encode() for i in range(500))
