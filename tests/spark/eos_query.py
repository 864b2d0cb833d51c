"""The driver of test_exactly_once_kill.py, run as its own process so the test can kill -9 it:
a streaming query from topic SOURCE to topic OUTPUT through the exactly-once sink, checkpoint
in CHECKPOINT, until it is killed.

    python eos_query.py BOOTSTRAP SOURCE OUTPUT CHECKPOINT

Slow on purpose, so that each task sends data into its open transaction for a good fraction
of a second before it commits (the window the test kills in): the source topic holds batches
of a few records and the source fetches one at a time (``kafka.max.partition.fetch.bytes``),
the sink gets rows 40 at a time and sends a Produce request per ~16 KiB
(``kafka.max.request.size``).
"""

from __future__ import annotations

import os
import sys

SINK_BATCH_ROWS = 40


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
        # The sink's input comes in Arrow batches of this many rows, as the source reads them.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(SINK_BATCH_ROWS))
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
        .option("kafka.max.partition.fetch.bytes", "1024")
        .load()
        .selectExpr("key", "value")
    )
    query = (
        df.writeStream.format("odradek")
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
