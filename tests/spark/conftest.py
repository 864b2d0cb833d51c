"""One Spark session for the whole run (local[2], no UI, two shuffle partitions), one broker per
module, unique topics per test, and helpers to produce known records and to administer topics.

The tests are skipped when PySpark or Java is missing (``scripts/setup.sh --test`` installs
both); the pure tests of this package (Arrow decoding, offsets, options) need only pyarrow.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from odradek.client.data import DataClient, TopicPartition
from odradek.protocol.records import Header, NewRecord, encode_batch
from odradek.testing import RunningBroker, running_broker

ADMIN_TIMEOUT_S = 15


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+ (scripts/setup.sh --test installs it)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import odradek.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        # Many small queries: compiling generated code and JIT-optimising cost more than they
        # save here.
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("spark-broker")) as running:
        yield running


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:50].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)  # kept alive until the futures resolve
    futures = client.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(configs))],
        operation_timeout=ADMIN_TIMEOUT_S,
    )
    for future in futures.values():
        future.result(timeout=ADMIN_TIMEOUT_S)


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    client = admin(bootstrap)
    futures = client.create_partitions([NewPartitions(name, total)])
    for future in futures.values():
        future.result(timeout=ADMIN_TIMEOUT_S)


def delete_records_before(bootstrap: str, name: str, partition: int, offset: int) -> None:
    """Move the log start offset, as retention would (DeleteRecords)."""
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    client = admin(bootstrap)
    futures = client.delete_records([KafkaTopicPartition(name, partition, offset)])
    for future in futures.values():
        future.result(timeout=ADMIN_TIMEOUT_S)


@dataclass(frozen=True)
class Sent:
    """A record as produced, with the offset the broker gave it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[Header, ...] = ()


def produce(
    bootstrap: str,
    topic: str,
    partition: int,
    records: Sequence[NewRecord],
    *,
    per_batch: int = 1000,
    compression: int = 0,
) -> list[Sent]:
    """Produce ``records`` (in batches of ``per_batch``) and return them with their offsets."""
    sent = []
    with DataClient(bootstrap) as client:
        for first in range(0, len(records), per_batch):
            chunk = records[first : first + per_batch]
            batch = encode_batch(chunk, now_ms=1_700_000_000_000, compression=compression)
            base = client.produce({TopicPartition(topic, partition): batch})[
                TopicPartition(topic, partition)
            ]
            for i, r in enumerate(chunk):
                assert r.timestamp is not None
                sent.append(
                    Sent(topic, partition, base + i, r.key, r.value, r.timestamp, tuple(r.headers))
                )
    return sent


def values(
    topic: str, partition: int, start: int, count: int, ts: int = 1_700_000_000_000
) -> list[NewRecord]:
    """``count`` records whose value names their topic, partition and position."""
    return [
        NewRecord(None, f"{topic}/{partition}/{start + i}".encode(), timestamp=ts + start + i)
        for i in range(count)
    ]
