"""odradek's PySpark data source: ``format("odradek")`` with Spark's Kafka schema and options.

>>> import odradek.spark
>>> odradek.spark.register(spark)
>>> df = (spark.readStream.format("odradek")
...       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
...       .option("subscribe", "clicks").load())

Needs the ``spark`` extra (PySpark 4, pyarrow) and Java 17 or newer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT = "odradek"

__all__ = ["FORMAT", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("odradek")`` available in ``spark`` (once per session is enough)."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
