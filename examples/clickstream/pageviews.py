"""Page views per page per minute: a Spark Structured Streaming job on odradek.

Reads the ``clicks`` topic (see ``producer.py``), parses each click's JSON, and counts views per
page in one-minute event-time windows. A watermark of one minute lets Spark finish a window once
clicks a minute past its end have been seen; each finished window's counts are then written once
(append mode) to two sinks, each its own query with its own checkpoint:

- the topic ``pageviews``: key = page, value = ``{"minute": ..., "page": ..., "views": ...}``,
  through odradek's streaming sink (at least once);
- Parquet files under ``<out>/parquet`` through Spark's file sink (exactly once).

Run it against a broker (or a cluster: several comma-separated bootstrap addresses), on local
threads or on a Spark standalone cluster (``--master spark://HOST:7077``)::

    python examples/clickstream/pageviews.py --bootstrap 127.0.0.1:9092 --out /tmp/pageviews

It runs until stopped (Ctrl-C); ``--available-now`` processes what is there and stops.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

import odradek.spark

CLICK = StructType(
    [
        StructField("user", StringType()),
        StructField("page", StringType()),
        StructField("ts", TimestampType()),
    ]
)


def page_views(spark: SparkSession, bootstrap: str, topic: str = "clicks") -> DataFrame:
    """The streaming counts: columns minute (window start), page, views."""
    clicks = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    events = clicks.select(F.from_json(F.col("value").cast("string"), CLICK).alias("c")).select(
        "c.*"
    )
    return (
        events.withWatermark("ts", "1 minute")
        .groupBy(F.window("ts", "1 minute"), "page")
        .count()
        .select(F.col("window.start").alias("minute"), "page", F.col("count").alias("views"))
    )


def start(
    spark: SparkSession,
    bootstrap: str,
    out: Path,
    *,
    clicks_topic: str = "clicks",
    counts_topic: str = "pageviews",
    available_now: bool = False,
) -> list[StreamingQuery]:
    """Start the two queries (to the topic and to Parquet); the caller awaits or stops them."""
    counts = page_views(spark, bootstrap, clicks_topic)
    as_records = counts.select(
        F.col("page").alias("key"),
        F.to_json(
            F.struct(
                F.date_format("minute", "yyyy-MM-dd'T'HH:mm'Z'").alias("minute"), "page", "views"
            )
        ).alias("value"),
    )
    to_topic = (
        as_records.writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", counts_topic)
        .option("checkpointLocation", str(out / "checkpoints" / "topic"))
        .outputMode("append")
    )
    to_parquet = (
        counts.writeStream.format("parquet")
        .option("path", str(out / "parquet"))
        .option("checkpointLocation", str(out / "checkpoints" / "parquet"))
        .outputMode("append")
    )
    if available_now:
        to_topic = to_topic.trigger(availableNow=True)
        to_parquet = to_parquet.trigger(availableNow=True)
    return [to_topic.start(), to_parquet.start()]


def session(cores: int = 2, master: str | None = None) -> SparkSession:
    """A session on ``master`` (a ``spark://`` standalone cluster's URL), or local threads."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master or f"local[{cores}]")
        .appName("odradek-pageviews")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    odradek.spark.register(spark)
    return spark


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="count page views per page per minute")
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--out", type=Path, default=Path("pageviews-out"))
    parser.add_argument("--available-now", action="store_true", help="process what is there")
    parser.add_argument("--master", help="a Spark cluster (spark://HOST:PORT); default local")
    args = parser.parse_args(argv)
    spark = session(master=args.master)
    queries = start(spark, args.bootstrap, args.out, available_now=args.available_now)
    try:
        for query in queries:
            query.awaitTermination()
    except KeyboardInterrupt:
        for query in queries:
            query.stop()
    counts = spark.read.parquet(str(args.out / "parquet")).orderBy("minute", "page")
    counts.show(50, truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
