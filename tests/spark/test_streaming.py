"""``spark.readStream.format("odradek")``: micro-batches, rate limits, checkpoints, data loss."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from odradek.client.data import TopicPartition
from odradek.testing import RunningBroker

from .conftest import add_partitions, create_topic, delete_records_before, produce, values


def stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


class Recorder:
    """A foreachBatch sink that keeps every attempt of every micro-batch, and can fail one."""

    def __init__(self) -> None:
        self.attempts: list[tuple[int, list[tuple[str, int, int]]]] = []
        self.fail_batch: int | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = sorted(
            (r.topic, r.partition, r.offset)
            for r in df.select("topic", "partition", "offset").collect()
        )
        self.attempts.append((batch_id, rows))
        if batch_id == self.fail_batch:
            self.fail_batch = None  # fail once: the restarted query replays this batch
            raise RuntimeError(f"simulated crash in batch {batch_id}")

    def final(self) -> dict[int, list[tuple[str, int, int]]]:
        """The last attempt of each batch: what a sink that overwrites by batch id keeps."""
        return dict(self.attempts)

    def sizes(self) -> list[int]:
        return [len(rows) for _, rows in sorted(self.final().items()) if rows]


def run_available_now(df: Any, checkpoint: Path, sink: Callable[[Any, int], None]) -> Any:
    query = (
        df.writeStream.foreachBatch(sink)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    # A failed query raises here; the tests look at query.exception() instead.
    with contextlib.suppress(Exception):
        query.awaitTermination(120)
    assert not query.isActive, "the query did not finish in time"
    return query


def test_available_now_honours_max_offsets_per_trigger(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, 2)
    for p in range(2):
        produce(broker.bootstrap, topic, p, values(topic, p, 0, 30), per_batch=9)
    recorder = Recorder()
    df = stream(
        spark,
        broker.bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="20",
    )
    run_available_now(df, tmp_path / "checkpoint", recorder)
    assert recorder.sizes() == [20, 20, 20]
    batches = recorder.final()
    # Each batch takes 10 offsets of each partition, in order.
    assert [sorted({o for _, p, o in rows if p == 1})[:1] for rows in batches.values() if rows] == [
        [0],
        [10],
        [20],
    ]
    everything = [r for rows in batches.values() for r in rows]
    assert sorted(everything) == sorted((topic, p, o) for p in range(2) for o in range(30))
    # The offsets Spark checkpointed are in Spark's Kafka layout.
    offsets_dir = tmp_path / "checkpoint" / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    assert json.loads(last.read_text().splitlines()[-1]) == {topic: {"0": 30, "1": 30}}


def test_available_now_without_a_limit_reads_everything_in_one_micro_batch(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    """A micro-batch's fixed cost (offset and commit logs, planning) is paid once: with no
    maxOffsetsPerTrigger, AvailableNow takes all it found in one batch and adds no empty one."""
    create_topic(broker.bootstrap, topic, 2)
    for p in range(2):
        produce(broker.bootstrap, topic, p, values(topic, p, 0, 30), per_batch=9)
    recorder = Recorder()
    df = stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest")
    query = run_available_now(df, tmp_path / "checkpoint", recorder)
    assert query.exception() is None
    assert [(batch, len(rows)) for batch, rows in recorder.attempts] == [(0, 60)]
    assert [int(p["numInputRows"]) for p in query.recentProgress] == [60]


def test_replayed_and_restarted_queries_read_no_gap_and_no_duplicate(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, 3)
    for p in range(3):
        produce(broker.bootstrap, topic, p, values(topic, p, 0, 20), per_batch=6)
    checkpoint = tmp_path / "checkpoint"
    recorder = Recorder()
    recorder.fail_batch = 1
    options = {"subscribe": topic, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "30"}

    # Run 1 dies in batch 1, after Spark logged the batch's offsets but before it committed.
    query = run_available_now(stream(spark, broker.bootstrap, **options), checkpoint, recorder)
    assert query.exception() is not None
    assert "simulated crash in batch 1" in str(query.exception())
    # More records arrive while the query is down.
    for p in range(3):
        produce(broker.bootstrap, topic, p, values(topic, p, 20, 10), per_batch=6)

    # Run 2 restarts from the checkpoint: batch 1 again, then the rest.
    query = run_available_now(stream(spark, broker.bootstrap, **options), checkpoint, recorder)
    assert query.exception() is None
    replays = [rows for batch, rows in recorder.attempts if batch == 1]
    assert len(replays) == 2
    assert replays[0] == replays[1], "a replayed micro-batch read other records"
    assert len(replays[0]) == 30
    everything = [r for rows in recorder.final().values() for r in rows]
    assert len(everything) == len(set(everything)), "duplicates across micro-batches"
    assert sorted(everything) == sorted((topic, p, o) for p in range(3) for o in range(30))
    assert all(size <= 30 for size in recorder.sizes())


def test_new_partitions_are_picked_up(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 0, values(topic, 0, 0, 5))
    recorder = Recorder()
    df = stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest")
    run_available_now(df, tmp_path / "cp", recorder)
    add_partitions(broker.bootstrap, topic, 3)
    produce(broker.bootstrap, topic, 2, values(topic, 2, 0, 4))
    produce(broker.bootstrap, topic, 0, values(topic, 0, 5, 1))
    run_available_now(df, tmp_path / "cp", recorder)
    everything = sorted(r for rows in recorder.final().values() for r in rows)
    assert everything == sorted(
        [(topic, 0, o) for o in range(6)] + [(topic, 2, o) for o in range(4)]
    )


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_deleted_data_fails_the_query_or_is_skipped(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path, fail_on_data_loss: bool
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 0, values(topic, 0, 0, 100), per_batch=10)
    recorder = Recorder()
    df = stream(spark, broker.bootstrap, subscribe=topic, startingOffsets="earliest")
    run_available_now(df, tmp_path / "cp", recorder)
    assert recorder.sizes() == [100]

    # While the query is down, 100 more arrive and retention (here DeleteRecords) removes
    # everything before offset 150: offsets 100..149 are gone before the query saw them.
    produce(broker.bootstrap, topic, 0, values(topic, 0, 100, 100), per_batch=10)
    delete_records_before(broker.bootstrap, topic, 0, 150)
    df = stream(
        spark,
        broker.bootstrap,
        subscribe=topic,
        startingOffsets="earliest",
        failOnDataLoss=str(fail_on_data_loss).lower(),
    )
    query = run_available_now(df, tmp_path / "cp", recorder)
    if fail_on_data_loss:
        error = str(query.exception())
        assert "offsets 100..149" in error
        assert "failOnDataLoss" in error
        assert [len(rows) for _, rows in recorder.attempts] == [100]
    else:
        assert query.exception() is None
        later = [r for batch, rows in recorder.final().items() if batch > 0 for r in rows]
        assert sorted(later) == [(topic, 0, o) for o in range(150, 200)]


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    """The driver-side reader on its own, with a clock the test moves."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from odradek.spark.options import ReadOptions
    from odradek.spark.source import OdradekStreamReader

    create_topic(broker.bootstrap, topic, 1)
    now = [1000.0]
    options = ReadOptions.parse(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": topic,
            "startingOffsets": "earliest",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "1m",
        },
        streaming=True,
    )
    reader = OdradekStreamReader(options, clock=lambda: now[0])
    try:
        start = reader.initialOffset()
        assert start == {topic: {"0": 0}}
        limit = reader.getDefaultReadLimit()
        produce(broker.bootstrap, topic, 0, values(topic, 0, 0, 4))
        assert reader.latestOffset(start, limit) == start  # 4 < 10: wait
        now[0] += 30
        assert reader.latestOffset(start, limit) == start
        now[0] += 31  # maxTriggerDelay has passed: go with what there is
        assert reader.latestOffset(start, limit) == {topic: {"0": 4}}
        produce(broker.bootstrap, topic, 0, values(topic, 0, 4, 12))
        after = {topic: {"0": 4}}
        assert reader.latestOffset(after, limit) == {topic: {"0": 16}}  # 12 >= 10: at once
        # ReadAllAvailable (Trigger.Once, say) ignores the limits.
        produce(broker.bootstrap, topic, 0, values(topic, 0, 16, 1))
        assert reader.latestOffset({topic: {"0": 16}}, ReadAllAvailable()) == {topic: {"0": 17}}
        # Nothing needs Spark to plan: partitions of a range are plain offset ranges.
        parts = reader.partitions({topic: {"0": 4}}, {topic: {"0": 16}})
        assert [(p.topic, p.partition, p.start, p.end) for p in parts] == [(topic, 0, 4, 16)]
        # The reader pickles (as Spark pickles it) without its connection.
        from pyspark import cloudpickle

        clone = cloudpickle.loads(cloudpickle.dumps(reader))
        assert clone._planner is None
    finally:
        reader.stop()
    assert TopicPartition(topic, 0).topic == topic


def test_the_initial_offset_is_the_first_answer(broker: RunningBroker, topic: str) -> None:
    """Spark asks a new query's source for its initial offset more than once; a "latest" start
    is where the query began, not where the topic ended at the last call (Spark's Kafka source
    likewise fixes it once)."""
    from odradek.spark.options import ReadOptions
    from odradek.spark.source import OdradekStreamReader

    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, 0, values(topic, 0, 0, 3))
    options = ReadOptions.parse(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic}, streaming=True
    )
    reader = OdradekStreamReader(options)
    try:
        first = reader.initialOffset()
        assert first == {topic: {"0": 3}}
        produce(broker.bootstrap, topic, 0, values(topic, 0, 3, 2))
        assert reader.initialOffset() == first
        # the records that came after the start are the first micro-batch's
        assert reader.latestOffset(first, reader.getDefaultReadLimit()) == {topic: {"0": 5}}
    finally:
        reader.stop()
    # a reader of its own (another query) starts at the end it finds
    fresh = OdradekStreamReader(options)
    try:
        assert fresh.initialOffset() == {topic: {"0": 5}}
    finally:
        fresh.stop()


def test_a_running_query_sees_records_as_they_arrive(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    create_topic(broker.bootstrap, topic, 2)
    df = stream(spark, broker.bootstrap, subscribe=topic)  # startingOffsets=latest
    query = (
        df.selectExpr("CAST(value AS STRING) AS v")
        .writeStream.format("memory")
        .queryName("arrivals")
        .trigger(processingTime="200 milliseconds")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.2)
        for p in range(2):
            produce(broker.bootstrap, topic, p, values(topic, p, 0, 10))
        seen: set[str] = set()
        while len(seen) < 20 and time.monotonic() < deadline:
            query.processAllAvailable()
            seen = {r.v for r in spark.sql("SELECT v FROM arrivals").collect()}
        assert seen == {f"{topic}/{p}/{i}" for p in range(2) for i in range(10)}
    finally:
        query.stop()
