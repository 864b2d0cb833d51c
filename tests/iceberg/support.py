"""What the Iceberg tests share: a broker process, a topic with a mode, reading its table."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient

from odradek.config import BrokerConfig
from odradek.iceberg.columns import KAFKA_TYPE, KEY_VALUE_SCHEMA
from odradek.iceberg.tables import TableSpec, TableStore, committed_offsets, open_catalog
from odradek.testing import BrokerProcess, wait_until

# Small, so that a test sees commits without waiting: the interval is the broker's own timer.
COMMIT_INTERVAL_MS = 200
# A broker's first commit waits for its translation worker to start (a process importing
# pyarrow and pyiceberg) and, in the schema modes, to read the registry: on a loaded machine,
# longer than later commits.
FIRST_COMMIT_TIMEOUT_S = 60


def start_broker(data_dir: Path, port: int = 0, *settings: str) -> BrokerProcess:
    options = [arg for s in settings for arg in ("-o", s)]
    return BrokerProcess(
        data_dir, "-o", "schema.registry.listener=127.0.0.1:0", *options, port=port
    ).start()


def registry_client(broker: BrokerProcess) -> SchemaRegistryClient:
    """Confluent's client of the broker's schema registry (at the address its log names)."""
    url = wait_until(
        lambda: re.search(r"schema registry on (http://[^/\s]+)/", "".join(broker.output)),
        what="the registry's address",
    ).group(1)
    return SchemaRegistryClient({"url": url})


def create_topic(
    bootstrap: str, topic: str, partitions: int, mode: str | None = "key_value", **configs: str
) -> None:
    settings = {"iceberg.commit.interval.ms": str(COMMIT_INTERVAL_MS), **configs}
    if mode is not None:
        settings["iceberg.mode"] = mode
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=settings)])[topic].result(30)


def set_mode(bootstrap: str, topic: str, mode: str) -> None:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def table_of(data_dir: Path, topic: str) -> Any:
    catalog = open_catalog(BrokerConfig({"log.dirs": str(data_dir)}).iceberg_catalog())
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(("odradek", topic))
    except NoSuchTableError:
        return None


def table_rows(data_dir: Path, topic: str) -> pa.Table | None:
    table = table_of(data_dir, topic)
    return None if table is None else table.scan().to_arrow()


def table_offsets(data_dir: Path, topic: str) -> dict[int, int]:
    table = table_of(data_dir, topic)
    return {} if table is None else committed_offsets(table)


def produce_keyed(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    """``count`` records numbered from ``first``, with keys (97 of them) and two headers each,
    all acknowledged (acks=all)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(
            topic,
            key=f"key-{i % 97}".encode(),
            value=f"value-{i}".encode(),
            headers=[("n", str(i).encode()), ("even", b"1" if i % 2 == 0 else b"0")],
        )
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "iceberg-test-ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def consume_all(bootstrap: str, topic: str, partitions: int, ends: dict[int, int]) -> list[Any]:
    """Every record of the topic below ``ends`` (read_committed), as confluent-kafka reads it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "iceberg-test",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    remaining = {p: end for p, end in ends.items() if end > 0}
    try:
        while remaining:
            message = consumer.poll(10)
            assert message is not None, f"nothing more to read; still waiting for {remaining}"
            if message.error():
                continue
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            got.append(message)
            if offset + 1 >= remaining.get(partition, 0):
                remaining.pop(partition, None)
    finally:
        consumer.close()
    return got


def assert_rows_are_the_records(
    rows: pa.Table, bootstrap: str, topic: str, partitions: int, ends: dict[int, int]
) -> None:
    """The key_value table's ``rows`` are the topic's records below ``ends``, each once, equal
    to what a consumer reads: key, value, headers, timestamp."""
    table = sorted(
        (
            r["kafka"]["partition"],
            r["kafka"]["offset"],
            r["key"],
            r["value"],
            tuple((h["key"], h["value"]) for h in r["kafka"]["headers"]),
            int(r["kafka"]["timestamp"].timestamp() * 1000),
        )
        for r in rows.to_pylist()
    )
    duplicates = [k for k, n in Counter((p, o) for p, o, *_ in table).items() if n > 1]
    assert duplicates == []
    consumed = sorted(
        (
            m.partition(),
            m.offset(),
            m.key(),
            m.value(),
            tuple(m.headers() or ()),
            m.timestamp()[1],
        )
        for m in consume_all(bootstrap, topic, partitions, ends)
    )
    assert table == consumed


SPEC = TableSpec("odradek", "t", "key_value", "(hour(kafka.timestamp))")


def table_store(path: Path) -> TableStore:
    return TableStore(BrokerConfig({"log.dirs": str(path)}).iceberg_catalog())


def rows_of(partition: int, offsets: range, schema: pa.Schema = KEY_VALUE_SCHEMA) -> pa.Table:
    kafka = pa.array(
        [
            {"partition": partition, "offset": o, "timestamp": o * 1_000_000, "headers": []}
            for o in offsets
        ],
        KAFKA_TYPE,
    )
    columns = {
        "kafka": kafka,
        "key": pa.array([b"k"] * len(offsets)),
        "value": pa.array([b"v"] * len(offsets)),
    }
    if "error" in schema.names:
        columns["error"] = pa.array(["bad"] * len(offsets))
    return pa.table(columns, schema=schema)
