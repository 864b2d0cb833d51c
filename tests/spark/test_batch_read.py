"""``spark.read.format("odradek")``: exactly the produced rows, with Spark's Kafka schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from odradek.protocol import compression as codecs
from odradek.protocol.records import Header, NewRecord
from odradek.testing import RunningBroker

from .conftest import Sent, create_topic, produce, values

T0 = 1_700_000_000_000


def read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    """(topic, partition, offset, key, value, ms, timestampType, headers) sorted."""
    columns = [
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "unix_millis(timestamp)",
        "timestampType",
    ]
    if "headers" in df.columns:
        columns.append("headers")
    rows = []
    for row in df.selectExpr(*columns).collect():
        values_ = list(row)
        values_[3] = bytes(values_[3]) if values_[3] is not None else None
        values_[4] = bytes(values_[4]) if values_[4] is not None else None
        if len(values_) == 8:
            values_[7] = (
                None
                if values_[7] is None
                else [(h.key, None if h.value is None else bytes(h.value)) for h in values_[7]]
            )
        rows.append(tuple(values_))
    return sorted(rows, key=lambda r: (r[0], r[1], r[2]))


def expected(sent: list[Sent], with_headers: bool) -> list[tuple[Any, ...]]:
    out = []
    for s in sent:
        row: tuple[Any, ...] = (s.topic, s.partition, s.offset, s.key, s.value, s.timestamp, 0)
        if with_headers:
            row += ([(h.key, h.value) for h in s.headers] or None,)
        out.append(row)
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


def mixed_records(partition: int, count: int) -> list[NewRecord]:
    return [
        NewRecord(
            None if i % 3 == 0 else f"key-{i}".encode(),
            None if i == 5 else f"value-{partition}-{i}".encode() * (1 + i % 4),
            (Header("trace", f"{partition}:{i}".encode()), Header("empty", None)) if i % 2 else (),
            T0 + 1000 * i + partition,
        )
        for i in range(count)
    ]


@pytest.fixture
def three_partitions(broker: RunningBroker, topic: str) -> list[Sent]:
    """40 records in each of 3 partitions: keys, null keys and values, headers, and batches of
    different sizes and codecs."""
    create_topic(broker.bootstrap, topic, 3)
    sent = []
    for p, codec in zip(range(3), [codecs.NONE, codecs.ZSTD, codecs.LZ4], strict=True):
        sent += produce(
            broker.bootstrap, topic, p, mixed_records(p, 40), per_batch=7 + p, compression=codec
        )
    return sent


def test_batch_read_returns_exactly_the_produced_rows(
    spark: Any, broker: RunningBroker, topic: str, three_partitions: list[Sent]
) -> None:
    df = read(spark, broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    assert rows_of(df) == expected(three_partitions, with_headers=True)
    plain = read(spark, broker.bootstrap, subscribe=topic)
    assert "headers" not in plain.columns
    assert rows_of(plain) == expected(three_partitions, with_headers=False)


def test_offsets_json_assign_and_pattern(
    spark: Any, broker: RunningBroker, topic: str, three_partitions: list[Sent]
) -> None:
    window = read(
        spark,
        broker.bootstrap,
        subscribe=topic,
        startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": 39}}),
        endingOffsets=json.dumps({topic: {"0": 12, "1": 3, "2": -1}}),
    )
    got = [(r[1], r[2]) for r in rows_of(window)]
    assert got == [(0, 10), (0, 11), (1, 0), (1, 1), (1, 2), (2, 39)]

    assigned = read(spark, broker.bootstrap, assign=json.dumps({topic: [2]}))
    assert {r[1] for r in rows_of(assigned)} == {2}
    assert assigned.count() == 40

    pattern = read(spark, broker.bootstrap, subscribePattern=topic[:-8] + "[0-9a-f]{8}")
    assert pattern.count() == 120


def test_starting_timestamp_and_min_partitions(
    spark: Any, broker: RunningBroker, topic: str, three_partitions: list[Sent]
) -> None:
    since = T0 + 1000 * 30
    df = read(spark, broker.bootstrap, subscribe=topic, startingTimestamp=str(since))
    assert rows_of(df) == expected([s for s in three_partitions if s.timestamp >= since], False)

    split = read(spark, broker.bootstrap, subscribe=topic, minPartitions="8")
    assert split.rdd.getNumPartitions() >= 8
    assert rows_of(split) == expected(three_partitions, with_headers=False)


def test_a_large_topic_arrives_whole(spark: Any, broker: RunningBroker, topic: str) -> None:
    from pyspark.sql import functions as F

    create_topic(broker.bootstrap, topic, 2)
    sent = []
    for p in range(2):
        sent += produce(broker.bootstrap, topic, p, values(topic, p, 0, 10_000), per_batch=2000)
    df = read(
        spark, broker.bootstrap, subscribe=topic, **{"kafka.max.partition.fetch.bytes": "32768"}
    )
    summary = (
        df.groupBy("partition")
        .agg(F.count("*").alias("n"), F.max("offset").alias("last"))
        .collect()
    )
    assert sorted((r.partition, r.n, r.last) for r in summary) == [
        (0, 10_000, 9_999),
        (1, 10_000, 9_999),
    ]
    assert (
        df.where("cast(value as string) != concat(topic, '/', partition, '/', offset)").count() == 0
    )


def test_bad_options_fail_at_load(spark: Any, broker: RunningBroker) -> None:
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        read(spark, broker.bootstrap).collect()
