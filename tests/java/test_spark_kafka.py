"""Spark's built-in Kafka connector (``spark-sql-kafka-0-10``, fetched by ``spark-kafka-pom.xml``
and passed to PySpark with ``spark.jars``) against one broker: a batch write and read with
``format("kafka")``, the same records read with ``format("odradek")`` for comparison, a
streaming read with Trigger.AvailableNow run twice on one checkpoint, and a streaming write.

The connector's version is pinned in the pom: PySpark's own (4.3.0) is not on Maven Central yet,
so it is the newest that is (4.2.0), which runs on PySpark 4.3.0's Spark.

The session is this module's own (``spark.jars`` is fixed when a Spark context starts) and is
stopped at the module's end so that ``tests/spark``, which runs later, starts its own. A Spark
context already running in this process (``tests/spark`` run first) makes these tests skip."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.testing import RunningBroker

from . import jars
from .support import create_topic

Row = tuple[str, int, int, str, str]  # topic, partition, offset, key, value


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+ (scripts/setup.sh --test installs it)")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    import odradek.spark

    if SparkContext._active_spark_context is not None:
        pytest.skip("a Spark context without the Kafka connector's jars already runs here")
    try:
        connector = jars.spark_kafka_jars()
    except RuntimeError as error:
        if os.environ.get("CI"):
            pytest.fail(f"Spark's Kafka connector cannot be fetched: {error}")
        pytest.skip(f"Spark's Kafka connector needs Maven: {error}")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-kafka-tests")
        .config("spark.jars", connector)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(session)
    yield session
    session.stop()


def rows(df: Any) -> list[Row]:
    return sorted(
        (r.topic, r.partition, r.offset, r.key, r.value)
        for r in df.selectExpr(
            "topic", "partition", "offset", "CAST(key AS STRING) AS key",
            "CAST(value AS STRING) AS value",
        ).collect()
    )  # fmt: skip


def read_with_confluent(bootstrap: str, topic: str, partitions: int) -> list[Row]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "spark-check", "enable.partition.eof": True}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        found: list[Row] = []
        ended: set[int] = set()
        while len(ended) < partitions:
            message = consumer.poll(10)
            assert message is not None, f"{topic} did not reach its end"
            if message.error():
                ended.add(message.partition())
                continue
            found.append(
                (
                    topic,
                    message.partition(),
                    message.offset(),
                    message.key().decode(),
                    message.value().decode(),
                )
            )
        return sorted(found)
    finally:
        consumer.close()


def test_batch_write_and_read_with_format_kafka(spark: Any, broker: RunningBroker) -> None:
    topic = f"spark-kafka-batch-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 3)
    written = [(f"k{i % 7}", f"value {i}", i % 3) for i in range(90)]
    (
        spark.createDataFrame(written, "key STRING, value STRING, partition INT")
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .save()
    )
    stored = read_with_confluent(broker.bootstrap, topic, 3)
    assert sorted((k, v, p) for _, p, _, k, v in stored) == sorted(written)
    for p in range(3):  # 30 records in each partition, offsets from 0 without a gap
        assert sorted(o for _, q, o, _, _ in stored if q == p) == list(range(30))

    def read(source: str, **options: str) -> Any:
        reader = spark.read.format(source).option("kafka.bootstrap.servers", broker.bootstrap)
        for name, value in (
            options if "assign" in options else {"subscribe": topic, **options}
        ).items():
            reader = reader.option(name, value)
        return reader.load()

    kafka = read("kafka", startingOffsets="earliest", endingOffsets="latest")
    assert rows(kafka) == stored
    # The project's own source reads the same records, with the same timestamps.
    odradek = read("odradek", startingOffsets="earliest", endingOffsets="latest")
    assert rows(odradek) == stored
    columns = "topic, partition, offset, timestamp, timestampType"
    assert sorted(kafka.selectExpr(*columns.split(", ")).collect()) == sorted(
        odradek.selectExpr(*columns.split(", ")).collect()
    )
    # Offsets as Spark's JSON: a slice of one partition (assigned: with a subscription Spark
    # wants the offsets of every partition).
    sliced = read(
        "kafka",
        assign=f'{{"{topic}": [1]}}',
        startingOffsets=f'{{"{topic}": {{"1": 10}}}}',
        endingOffsets=f'{{"{topic}": {{"1": 15}}}}',
    )
    assert [(p, o) for _, p, o, _, _ in rows(sliced)] == [(1, o) for o in range(10, 15)]


def test_streaming_read_twice_on_one_checkpoint_and_streaming_write(
    spark: Any, broker: RunningBroker, tmp_path: Path
) -> None:
    topic = f"spark-kafka-stream-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def produce(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
        producer.flush(30)

    batches: list[list[Row]] = []

    def run() -> None:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "15")
            .load()
            .writeStream.foreachBatch(lambda df, _: batches.append(rows(df)))
            .trigger(availableNow=True)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start()
        )
        with contextlib.suppress(Exception):  # a failure shows in query.exception()
            query.awaitTermination(120)
        assert not query.isActive, "the query did not finish in time"
        assert query.exception() is None, query.exception()

    produce(0, 40)
    run()
    first = [row for batch in batches for row in batch]
    sizes = [len(b) for b in batches if b]
    assert len(sizes) == 3 and max(sizes) <= 15, sizes  # maxOffsetsPerTrigger per batch
    produce(40, 10)
    batches.clear()
    run()  # resumes from the checkpoint: only the new records
    second = [row for batch in batches for row in batch]
    assert sorted((k, v) for *_, k, v in first) == sorted((f"k{i}", f"v{i}") for i in range(40))
    assert sorted((k, v) for *_, k, v in second) == sorted(
        (f"k{i}", f"v{i}") for i in range(40, 50)
    )
    assert sorted(first + second) == read_with_confluent(broker.bootstrap, topic, 2)

    # The streaming sink: a copy of the topic, upper-cased, written by format("kafka").
    copy = f"{topic}-copy"
    create_topic(broker.bootstrap, copy, 1)
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", copy)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "copy-checkpoint"))
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert sorted((k, v) for *_, k, v in read_with_confluent(broker.bootstrap, copy, 1)) == sorted(
        (f"k{i}", f"V{i}") for i in range(50)
    )
