"""A topic's Iceberg table (``iceberg.mode``) read by PySpark: Iceberg's Spark runtime is not
built for this Spark, so Spark reads the Parquet data files of the table's current snapshot, as
pyiceberg plans them (the table is append-only: no delete files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from odradek.testing import wait_until
from tests.iceberg.support import create_topic, start_broker, table_of, table_offsets

RECORDS = 3000
PARTITIONS = 3


def test_spark_counts_exactly_the_topics_records(spark: Any, tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "clicks", PARTITIONS)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce("clicks", key=str(i).encode(), value=f"click {i}".encode())
        assert producer.flush(30) == 0
        wait_until(
            lambda: sum(table_offsets(tmp_path, "clicks").values()) == RECORDS,
            what="the table",
        )
    finally:
        broker.terminate()
    table = table_of(tmp_path, "clicks")
    files = [task.file.file_path for task in table.scan().plan_files()]
    assert files and all(not task.delete_files for task in table.scan().plan_files())
    frame = spark.read.parquet(*files)
    assert frame.count() == RECORDS
    assert frame.select("kafka.partition", "kafka.offset").distinct().count() == RECORDS
    values = {row.value for row in frame.select("value").collect()}
    assert values == {f"click {i}".encode() for i in range(RECORDS)}
    by_partition = {
        row.partition: row["count"] for row in frame.groupBy("kafka.partition").count().collect()
    }
    assert sum(by_partition.values()) == RECORDS and len(by_partition) == PARTITIONS
