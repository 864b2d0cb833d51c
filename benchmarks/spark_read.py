"""Records/s a Spark streaming query reads from odradek, next to Spark's own ceiling.

Not a test — numbers to compare. It starts ``odradek serve`` as a child process (so the broker
does not share the driver's interpreter) unless ``--bootstrap`` names a running broker, produces
``--records`` records of ``--value-bytes`` bytes spread over ``--partitions`` partitions, then
runs on ``local[N]``:

1. **odradek**: ``readStream.format("odradek")`` from earliest, ``Trigger.AvailableNow``, to the
   ``noop`` sink — broker, wire, decoding into Arrow, and Spark;
2. **ceiling**: the same number of rows in the same schema from a Python data source that yields
   Arrow batches it built before the clock started — what Spark's Python data source path itself
   can take on this machine, with no broker and no decoding.

Each query runs once to warm up (JVM, Python workers) and is then timed ``--runs`` times; the
best run is reported. ``--variable`` makes values 50..150 bytes instead of all the same size.
Each read is timed as a batch read (``spark.read``) as well as a streaming one. ``--avro`` adds a
topic of Avro values (~100-byte records in Confluent's framing, the schema registered at the
broker's registry) read with ``valueFormat=avro`` into typed columns, batch and streaming.
``--transactional`` writes each batch of 4,000 records in a committed transaction of its own
(a marker after each) and adds a run with ``kafka.isolation.level=read_committed`` (reading
up to the last stable offset and checking each batch against the aborted transactions).
``--spark-kafka`` reads the same topic with Spark's own Kafka connector (``format("kafka")``,
its jars fetched as the Java tests fetch them) in the same run, batch and streaming, at its
defaults and tuned (``kafka.max.poll.records=20000``).

    python benchmarks/spark_read.py [--records 4000000] [--partitions 4] [--value-bytes 100]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType

import odradek.spark
from odradek.client.data import DataClient, TopicPartition
from odradek.client.transactions import TransactionalProducer
from odradek.spark.sink import ProducerStamp, encode_records
from odradek.spark.source import SCHEMA
from odradek.testing import BrokerProcess, free_port

TOPIC = "bench-read"
AVRO_TOPIC = "bench-read-avro"
RECORDS_PER_BATCH = 4000
# Avro values of about 100 bytes, as a typical event: ids, names, an amount, a short list.
AVRO_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "items", "type": {"type": "array", "items": "string"}},
    ],
}


@contextlib.contextmanager
def broker(given: str | None, registry: str | None) -> Iterator[tuple[str, str]]:
    """The bootstrap servers and the schema registry's URL (the broker's own)."""
    if given:
        yield given, registry or f"http://{given.rsplit(':', 1)[0]}:8081"
        return
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as directory:
        process = BrokerProcess(
            Path(directory),
            "-o",
            "num.partitions=1",
            "-o",
            f"schema.registry.listener=127.0.0.1:{port}",
        ).start()
        try:
            yield process.bootstrap, f"http://127.0.0.1:{port}"
        finally:
            process.terminate()


def avro_values(count: int, schema_id: int, rng: random.Random) -> list[bytes]:
    """``count`` framed Avro values (magic byte, schema id, body), cycling through 1,000."""
    import io
    import struct

    import fastavro

    parsed = fastavro.parse_schema(AVRO_SCHEMA)
    prefix = b"\0" + struct.pack(">I", schema_id)
    distinct = []
    for i in range(1000):
        out = io.BytesIO()
        out.write(prefix)
        record = {
            "id": rng.randrange(1 << 40),
            "customer": f"customer-{rng.randrange(100_000):06d}",
            "amount": rng.random() * 1000,
            "paid": i % 2 == 0,
            "note": None if i % 3 else f"note {rng.randrange(1000)}",
            "items": [f"sku-{rng.randrange(10_000):05d}" for _ in range(i % 4 + 1)],
        }
        fastavro.schemaless_writer(out, parsed, record)
        distinct.append(out.getvalue())
    return [distinct[i % len(distinct)] for i in range(count)]


def produce_avro(bootstrap: str, registry: str, partitions: int, records: int) -> None:
    """Write ``records`` Avro values to AVRO_TOPIC, registered as its value schema."""
    import json

    from odradek.spark.schema_registry import SchemaRegistryClient

    schema_id = SchemaRegistryClient(registry).register(
        f"{AVRO_TOPIC}-value", json.dumps(AVRO_SCHEMA)
    )
    create_topic(bootstrap, AVRO_TOPIC, partitions)
    rng = random.Random(11)
    per_partition = records // partitions
    values = avro_values(RECORDS_PER_BATCH, schema_id, rng)
    size = sum(len(v) for v in values) / len(values)
    with DataClient(bootstrap) as client:
        for p in range(partitions):
            done = 0
            while done < per_partition:
                n = min(RECORDS_PER_BATCH, per_partition - done)
                batch = encode_records(
                    [None] * n, values[:n], None, timestamp_ms=int(time.time() * 1000)
                )
                client.produce({TopicPartition(AVRO_TOPIC, p): batch}, acks=1)
                done += n
    print(f"produced {per_partition * partitions:,} Avro records of ~{size:.0f} bytes")


def values_for(count: int, size: int, variable: bool, rng: random.Random) -> list[bytes]:
    block = rng.randbytes(256 * 1024)
    out = []
    for _ in range(count):
        n = rng.randint(size // 2, size * 3 // 2) if variable else size
        at = rng.randrange(len(block) - n)
        out.append(block[at : at + n])
    return out


def produce(bootstrap: str, topic: str, partitions: int, records: int, args: Any) -> None:
    """Write ``records`` records round-robin over the partitions, in large batches (each in a
    transaction of its own with ``--transactional``)."""
    rng = random.Random(7)
    with DataClient(bootstrap) as client:
        txn = None
        if args.transactional:
            txn = TransactionalProducer(client, f"bench-read-{time.monotonic_ns()}")
            txn.init()
        info = client.describe([topic], auto_create=False).get(topic)
        if info is not None:
            sys.exit(f"topic {topic} exists already; use a fresh broker")
        create_topic(bootstrap, topic, partitions)
        per_partition = records // partitions
        started = time.perf_counter()
        for p in range(partitions):
            done = 0
            while done < per_partition:
                n = min(RECORDS_PER_BATCH, per_partition - done)
                values = values_for(n, args.value_bytes, args.variable, rng)
                tp = TopicPartition(topic, p)
                stamp = None
                if txn is not None:
                    txn.begin()
                    txn.add_partitions([tp])
                    stamp = ProducerStamp(
                        txn.producer_id, txn.producer_epoch, txn.next_sequence(tp, n)
                    )
                batch = encode_records(
                    [None] * n,
                    values,
                    None,
                    timestamp_ms=int(time.time() * 1000),
                    producer=stamp,
                )
                if txn is None:
                    client.produce({tp: batch}, acks=1)
                else:
                    client.produce({tp: batch}, transactional_id=txn.transactional_id)
                    txn.commit()
                done += n
        took = time.perf_counter() - started
        print(f"produced {per_partition * partitions:,} records in {took:.1f}s")


def spark_kafka_jars() -> str:
    """Spark's Kafka connector's jars for ``spark.jars`` (fetched once per machine)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.java.jars import spark_kafka_jars as fetched

    return fetched()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)


# -- the ceiling: prebuilt Arrow batches ---------------------------------------------------------


class _Slice(InputPartition):
    def __init__(self, index: int, rows: int) -> None:
        super().__init__(index)
        self.index = index
        self.rows = rows


class _SyntheticReader(DataSourceStreamReader):
    def __init__(self, partitions: int, rows: int, value_bytes: int) -> None:
        self.parts = partitions
        self.rows = rows
        self.value_bytes = value_bytes

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"batch": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        if start["batch"] >= end["batch"]:
            return []
        return [_Slice(i, self.rows // self.parts) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        from odradek.spark.arrow import KAFKA_SCHEMA

        assert isinstance(partition, _Slice)
        n = 20_000
        values = pa.array(values_for(n, self.value_bytes, False, random.Random(1)), pa.binary())
        columns = [
            pa.nulls(n, pa.binary()),
            values,
            pa.array([TOPIC] * n, pa.string()),
            pa.array(np.full(n, partition.index, np.int32)),
            None,
            pa.array(np.arange(n, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
            pa.array(np.zeros(n, np.int32)),
        ]
        batches = []
        for first in range(0, partition.rows, n):
            count = min(n, partition.rows - first)
            cols = list(columns)
            cols[4] = pa.array(np.arange(first, first + n, dtype=np.int64))
            batches.append(pa.RecordBatch.from_arrays(cols, schema=KAFKA_SCHEMA).slice(0, count))
        yield from batches


class SyntheticSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek_bench_synthetic"

    def schema(self) -> StructType:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _SyntheticReader(
            int(self.options["partitions"]),
            int(self.options["rows"]),
            int(self.options["value_bytes"]),
        )


# -- running ---------------------------------------------------------------------------------


def timed_query(spark: SparkSession, reader: Any, checkpoints: Path) -> tuple[int, float, float]:
    """Rows read, seconds from start() to termination, and seconds inside micro-batches."""
    checkpoint = checkpoints / f"q{time.monotonic_ns()}"
    started = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.awaitTermination()
    took = time.perf_counter() - started
    progress = query.recentProgress
    rows = sum(int(p["numInputRows"]) for p in progress)
    in_batches = sum(int(p["durationMs"].get("triggerExecution", 0)) for p in progress) / 1000
    return rows, took, in_batches


def timed_batch(reader: Any, rows: int) -> tuple[int, float, float]:
    """Rows read, and seconds of a batch read (``spark.read``) from ``load()`` to the end of
    its job, twice (a batch query has no micro-batches: all of it is the query)."""
    started = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    took = time.perf_counter() - started
    return rows, took, took


def best_of(label: str, runs: int, run: Any) -> tuple[float, float]:
    """Rows/s of the fastest timed run: overall, and within its micro-batches."""
    results = [run() for _ in range(runs + 1)]  # the first warms up
    rows, took, in_batches = min(results[1:], key=lambda r: r[1])
    rate = rows / took
    print(
        f"{label:<32} {rows:>10,} rows {took:6.2f}s {rate:>11,.0f} rows/s"
        f"   (in micro-batches {in_batches:5.2f}s {rows / in_batches:>11,.0f} rows/s)"
    )
    return rate, rows / in_batches


def connector_side_by_side(
    spark: SparkSession,
    bootstrap: str,
    runs: int,
    total: int,
    checkpoints: Path,
    batch_rate: float,
    stream_rate: float,
) -> None:
    """The same topic through Spark's own Kafka connector, at its defaults and tuned."""
    for label, tuning in (("defaults", {}), ("tuned", {"kafka.max.poll.records": "20000"})):
        options = {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC, **tuning}
        batch_reader = spark.read.format("kafka").options(**options)
        stream_reader = (
            spark.readStream.format("kafka")
            .options(**options)
            .option("startingOffsets", "earliest")
        )
        theirs_batch = best_of(
            f"Spark Kafka batch ({label})", runs, lambda r=batch_reader: timed_batch(r, total)
        )
        theirs = best_of(
            f"Spark Kafka ({label})",
            runs,
            lambda r=stream_reader: timed_query(spark, r, checkpoints),
        )
        print(
            f"odradek against Spark's connector ({label}): "
            f"batch {batch_rate / theirs_batch[0]:.2f}x, streaming {stream_rate / theirs[0]:.2f}x"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=4_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--variable", action="store_true", help="values of 50%%..150%% size")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--fetch-bytes", type=int, default=8 << 20, help="per fetch and partition")
    parser.add_argument("--transactional", action="store_true", help="also read_committed")
    parser.add_argument("--bootstrap")
    parser.add_argument("--registry", help="schema registry URL (default: the broker's own)")
    parser.add_argument("--avro", action="store_true", help="also Avro values, typed columns")
    parser.add_argument(
        "--spark-kafka", action="store_true", help="also Spark's Kafka connector, same topic"
    )
    args = parser.parse_args(argv)

    builder = (
        SparkSession.builder.master(f"local[{args.cores}]")
        .appName("odradek-spark-read-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(args.cores))
        .config("spark.driver.memory", "4g")
    )
    if args.spark_kafka:
        builder = builder.config("spark.jars", spark_kafka_jars())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    spark.dataSource.register(SyntheticSource)
    print(
        f"local[{args.cores}], {args.records:,} records of "
        f"{'~' if args.variable else ''}{args.value_bytes} bytes in {args.partitions} partitions"
    )
    with (
        broker(args.bootstrap, args.registry) as (bootstrap, registry),
        tempfile.TemporaryDirectory() as checkpoints,
    ):
        produce(bootstrap, TOPIC, args.partitions, args.records, args)
        if args.avro:
            produce_avro(bootstrap, registry, args.partitions, args.records)
        where = Path(checkpoints)
        odradek_reader = (
            spark.readStream.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .option("kafka.max.partition.fetch.bytes", str(args.fetch_bytes))
        )
        synthetic_reader = (
            spark.readStream.format("odradek_bench_synthetic")
            .option("partitions", str(args.partitions))
            .option("rows", str(args.records))
            .option("value_bytes", str(args.value_bytes))
        )
        batch_reader = (
            spark.read.format("odradek")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("kafka.max.partition.fetch.bytes", str(args.fetch_bytes))
        )
        total = args.records // args.partitions * args.partitions
        batch = best_of(
            "odradek batch -> noop", args.runs, lambda r=batch_reader: timed_batch(r, total)
        )
        ours = best_of(
            "odradek -> noop", args.runs, lambda: timed_query(spark, odradek_reader, where)
        )
        print(f"streaming reads at {ours[0] / batch[0]:.0%} of the batch read")
        if args.spark_kafka:
            connector_side_by_side(spark, bootstrap, args.runs, total, where, batch[0], ours[0])
        if args.avro:
            typed_batch = (
                batch_reader.option("subscribe", AVRO_TOPIC)
                .option("valueFormat", "avro")
                .option("schema.registry.url", registry)
            )
            typed_stream = (
                odradek_reader.option("subscribe", AVRO_TOPIC)
                .option("valueFormat", "avro")
                .option("schema.registry.url", registry)
            )
            avro_batch = best_of(
                "odradek Avro batch -> noop", args.runs, lambda: timed_batch(typed_batch, total)
            )
            avro_stream = best_of(
                "odradek Avro -> noop",
                args.runs,
                lambda: timed_query(spark, typed_stream, where),
            )
            print(
                f"Avro values read at {avro_batch[0] / batch[0]:.0%} (batch) and "
                f"{avro_stream[0] / ours[0]:.0%} (streaming) of raw bytes' rows/s"
            )
        if args.transactional:
            committed_reader = odradek_reader.option("kafka.isolation.level", "read_committed")
            committed = best_of(
                "odradek read_committed -> noop",
                args.runs,
                lambda: timed_query(spark, committed_reader, where),
            )
            print(
                f"read_committed reads at {committed[0] / ours[0]:.0%} of read_uncommitted "
                f"({committed[1] / ours[1]:.0%} within micro-batches)"
            )
        ceiling = best_of(
            "in-memory Arrow source -> noop",
            args.runs,
            lambda: timed_query(spark, synthetic_reader, where),
        )
        print(
            f"odradek reads at {ours[0] / ceiling[0]:.0%} of the ceiling "
            f"({ours[1] / ceiling[1]:.0%} within micro-batches)"
        )
    spark.stop()


if __name__ == "__main__":
    main()
