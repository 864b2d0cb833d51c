"""``df.write`` / ``writeStream`` ``.format("odradek")``: rows become records, read back whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from odradek.client.data import DataClient, TopicPartition
from odradek.protocol.partitioner import key_partition
from odradek.protocol.records import iter_records
from odradek.testing import RunningBroker

from .conftest import create_topic, produce, values


def records_of(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Any]]:
    """Every record of ``topic`` by partition, read with the data client (not Spark)."""
    out: dict[int, list[Any]] = {}
    with DataClient(bootstrap) as client:
        for p in range(partitions):
            tp = TopicPartition(topic, p)
            end = client.latest([tp])[tp]
            out[p] = [
                r
                for fetched in client.fetch_range(tp, 0, end)
                for _, rs in iter_records(fetched.records)
                for r in rs
            ]
    return out


def test_batch_write_then_read_back(spark: Any, broker: RunningBroker, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 3)
    df = spark.range(300).selectExpr(
        "CASE WHEN id % 10 = 0 THEN NULL ELSE concat('user-', id % 7) END AS key",
        "CAST(concat('click-', id) AS BINARY) AS value",
        "CASE WHEN id % 2 = 0 THEN array(named_struct('key', 'n', 'value', CAST(id AS STRING)"
        " :: BINARY)) END AS headers",
        "CASE WHEN id >= 290 THEN 2 END AS partition",
    )
    (
        df.repartition(2)
        .write.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", topic)
        .mode("append")
        .save()
    )
    stored = records_of(broker.bootstrap, topic, 3)
    by_value = {r.value.decode(): (p, r) for p, rs in stored.items() for r in rs}
    assert sorted(by_value) == sorted(f"click-{i}" for i in range(300))
    for i in range(300):
        partition, record = by_value[f"click-{i}"]
        key = None if i % 10 == 0 else f"user-{i % 7}".encode()
        assert record.key == key
        if i >= 290:
            assert partition == 2
        elif key is not None:
            assert partition == key_partition(key, 3)  # where Kafka's Java producer puts it
        assert [(h.key, h.value) for h in record.headers] == (
            [("n", str(i).encode())] if i % 2 == 0 else []
        )
    # And the source reads the same back.
    back = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert back.count() == 300
    assert back.where("headers IS NOT NULL").count() == 150


def test_topic_column_routes_rows(spark: Any, broker: RunningBroker, topic: str) -> None:
    topics = [f"{topic}-a", f"{topic}-b"]
    for name in topics:
        create_topic(broker.bootstrap, name, 1)
    rows = [(topics[i % 2], f"v{i}") for i in range(20)]
    (
        spark.createDataFrame(rows, "topic string, value string")
        .write.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .mode("append")
        .save()
    )
    for n, name in enumerate(topics):
        got = [r.value.decode() for r in records_of(broker.bootstrap, name, 1)[0]]
        assert sorted(got) == sorted(f"v{i}" for i in range(20) if i % 2 == n)


def test_streaming_write_copies_a_topic(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    source, target = f"{topic}-in", f"{topic}-out"
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, target, 2)
    for p in range(2):
        produce(broker.bootstrap, source, p, values(source, p, 0, 500), per_batch=100)
    query = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "partition")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    copied = records_of(broker.bootstrap, target, 2)
    for p in range(2):
        assert sorted(r.value.decode() for r in copied[p]) == sorted(
            f"{source}/{p}/{i}".upper() for i in range(500)
        )


def test_a_failed_delivery_fails_the_write(spark: Any, broker: RunningBroker, topic: str) -> None:
    create_topic(broker.bootstrap, topic, 1, **{"max.message.bytes": "2000"})
    df = spark.range(3).selectExpr("repeat('x', 5000) AS value")
    with pytest.raises(Exception, match=r"(?i)message_too_large"):
        (
            df.write.format("odradek")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", topic)
            .mode("append")
            .save()
        )


def test_bad_sink_schemas_are_refused(spark: Any, broker: RunningBroker, topic: str) -> None:
    writer = spark.range(1).selectExpr("id AS key").write.format("odradek")
    with pytest.raises(Exception, match="needs a value column"):
        writer.option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).mode(
            "append"
        ).save()
    no_topic = spark.range(1).selectExpr("'v' AS value").write.format("odradek")
    with pytest.raises(Exception, match="topic option or a topic column"):
        no_topic.option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    with pytest.raises(Exception, match="overwrite is not supported"):
        spark.range(1).selectExpr("'v' AS value").write.format("odradek").option(
            "kafka.bootstrap.servers", broker.bootstrap
        ).option("topic", topic).mode("overwrite").save()
