"""Records/s the ``odradek`` sink writes from Spark, next to a sink that discards.

Not a test — numbers to compare. It starts ``odradek serve`` as a child process unless
``--bootstrap`` names a running broker, then on ``local[N]`` writes ``--records`` rows
(``--value-bytes`` bytes of value, a 12-byte key) made by ``spark.range``:

1. **odradek**: ``write.format("odradek")`` to a topic of ``--partitions`` partitions, acks=all;
2. **odradek exactly-once**: the same with ``exactlyOnce=true`` — each task's rows in one
   transaction, with its done-marker committed in it (see :mod:`odradek.spark.sink`);
3. **ceiling**: the same rows to a Python Arrow sink that only counts them — what Spark's Python
   data source write path itself costs, with no encoding and no broker.

``--spark-kafka`` also writes the same rows with Spark's own Kafka connector
(``write.format("kafka")``, its producer's defaults: acks=all) in the same run.

One warm-up run each, then the best of ``--runs``.

    python benchmarks/spark_write.py [--records 2000000] [--partitions 4] [--value-bytes 100]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType
from spark_read import broker, create_topic, spark_kafka_jars

import odradek.spark


class _CountingWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return WriterCommitMessage()


class DiscardSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek_bench_discard"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _CountingWriter()


def rows(spark: SparkSession, count: int, value_bytes: int, partitions: int) -> DataFrame:
    pad = max(value_bytes - 20, 0)
    return spark.range(count, numPartitions=partitions).selectExpr(
        "CAST(concat('key-', lpad(CAST(id % 100000 AS STRING), 8, '0')) AS BINARY) AS key",
        f"CAST(concat(lpad(CAST(id AS STRING), 20, '0'), repeat('x', {pad})) AS BINARY) AS value",
    )


def timed(label: str, runs: int, count: int, write: Any) -> float:
    results = []
    for _ in range(runs + 1):  # the first warms up
        started = time.perf_counter()
        write()
        results.append(time.perf_counter() - started)
    took = min(results[1:])
    rate = count / took
    print(f"{label:<30} {count:>10,} rows {took:7.2f}s {rate:>12,.0f} rows/s")
    return rate


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--bootstrap")
    parser.add_argument(
        "--spark-kafka", action="store_true", help="also Spark's Kafka connector, same rows"
    )
    args = parser.parse_args(argv)

    builder = (
        SparkSession.builder.master(f"local[{args.cores}]")
        .appName("odradek-spark-write-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
    )
    if args.spark_kafka:
        builder = builder.config("spark.jars", spark_kafka_jars())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    spark.dataSource.register(DiscardSink)
    print(
        f"local[{args.cores}], {args.records:,} rows of {args.value_bytes}-byte values, "
        f"{args.partitions} Spark and topic partitions"
    )
    df = rows(spark, args.records, args.value_bytes, args.partitions)
    with broker(args.bootstrap, None) as (bootstrap, _registry):
        topic = f"bench-write-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, args.partitions)

        def write(**options: str) -> None:
            writer = df.write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            for name, value in {"topic": topic, **options}.items():
                writer = writer.option(name, value)
            writer.mode("append").save()

        ours = timed("odradek sink (acks=all)", args.runs, args.records, write)
        exactly_once = timed(
            "odradek sink (exactlyOnce)",
            args.runs,
            args.records,
            lambda: write(exactlyOnce="true"),
        )
        ceiling = timed(
            "discarding Arrow sink",
            args.runs,
            args.records,
            lambda: df.write.format("odradek_bench_discard").mode("append").save(),
        )
        print(f"the odradek sink writes at {ours / ceiling:.0%} of the ceiling")
        print(f"exactly-once writes at {exactly_once / ours:.0%} of at-least-once")
        if args.spark_kafka:
            theirs = timed(
                "Spark Kafka sink (defaults)",
                args.runs,
                args.records,
                lambda: (
                    df.write.format("kafka")
                    .option("kafka.bootstrap.servers", bootstrap)
                    .option("topic", topic)
                    .mode("append")
                    .save()
                ),
            )
            print(f"the odradek sink writes at {ours / theirs:.2f}x Spark's connector")
    spark.stop()


if __name__ == "__main__":
    main()
