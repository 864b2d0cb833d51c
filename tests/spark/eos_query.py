"""The driver of test_exactly_once_kill.py, run as its own process so the test can kill -9 it:
a streaming query from topic SOURCE to topic OUTPUT through the exactly-once sink, checkpoint
in CHECKPOINT, until it is killed.

    python eos_query.py BOOTSTRAP SOURCE OUTPUT CHECKPOINT

Slow on purpose: a pass-through step hands rows on 40 at a time with a pause before each
slice (standing for real per-row work), and the sink sends a Produce request per ~16 KiB
(``kafka.max.request.size``), so each task sends data into its open transaction for a good
fraction of a second before it commits: the window the test kills in.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import pyarrow as pa

SLICE_ROWS = 40
PAUSE_S = 0.02


def slow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for start in range(0, batch.num_rows, SLICE_ROWS):
            time.sleep(PAUSE_S)
            yield batch.slice(start, SLICE_ROWS)


def main(bootstrap: str, source: str, output: str, checkpoint: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import odradek.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-eos-kill")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.codegen.wholeStage", "false")
        # The sink's input comes in Arrow batches of this many rows, as the slow step makes them.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(SLICE_ROWS))
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    df = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "2000")
        .load()
        .selectExpr("key", "value")
    )
    query = (
        df.mapInArrow(slow, df.schema)
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output)
        .option("exactlyOnce", "true")
        .option("kafka.max.request.size", "16384")
        .option("kafka.transaction.timeout.ms", "30000")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
