"""key_value mode end to end: a real broker process, confluent-kafka, the table's files."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer

from odradek.testing import free_port, wait_until
from tests.e2e.metrics_support import scrape
from tests.iceberg.support import (
    consume_all,
    create_topic,
    set_mode,
    start_broker,
    table_of,
    table_offsets,
    table_rows,
)

RECORDS = 10_000
PARTITIONS = 3


def _produce(bootstrap: str, topic: str, count: int, first: int = 0) -> dict[int, int]:
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
    return {}


def _rows_equal_consumed(data_dir: Path, bootstrap: str, topic: str, expected: int) -> None:
    offsets = wait_until(
        lambda: (o := table_offsets(data_dir, topic)) and sum(o.values()) >= expected and o,
        what="the table's offsets",
    )
    rows = table_rows(data_dir, topic)
    assert rows is not None
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
        for m in consume_all(bootstrap, topic, PARTITIONS, offsets)
    )
    assert len(table) == expected
    assert table == consumed


def test_every_record_is_a_row_once(tmp_path: Path) -> None:
    metrics = f"127.0.0.1:{free_port()}"
    broker = start_broker(tmp_path, 0, f"metrics.listener={metrics}")
    try:
        create_topic(broker.bootstrap, "events", PARTITIONS)
        _produce(broker.bootstrap, "events", RECORDS)
        _rows_equal_consumed(tmp_path, broker.bootstrap, "events", RECORDS)
        # DuckDB reads the same table through pyiceberg, as the README shows.
        table = table_of(tmp_path, "events")
        assert table is not None
        duck = table.scan().to_duckdb("events")
        counted = duck.execute(
            "SELECT count(*), count(DISTINCT (kafka.partition, kafka.offset)) FROM events"
        ).fetchone()
        assert counted == (RECORDS, RECORDS)

        def translated() -> bool:
            figures = scrape(metrics)
            lags = [
                figures.value(
                    "odradek_iceberg_translation_lag_records", topic="events", partition=str(p)
                )
                for p in range(PARTITIONS)
            ]
            done = figures.total("odradek_iceberg_translated_records_total", topic="events")
            return lags == [0, 0, 0] and done == RECORDS

        wait_until(translated, what="no lag on /metrics")
        # The console's topic page shows the same figures (GET /api/tables).
        with urllib.request.urlopen(f"http://{metrics}/api/tables", timeout=10) as answer:
            tables = json.loads(answer.read())
        rows = {t["partition"]: t for t in tables if t["topic"] == "events"}
        assert sorted(rows) == list(range(PARTITIONS))
        assert all(t["lag_records"] == 0 for t in rows.values())
        assert sum(t["translated"] for t in rows.values()) == RECORDS
    finally:
        broker.terminate()


def test_enabling_the_mode_backfills_the_topic(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "old", PARTITIONS, mode=None)
        _produce(broker.bootstrap, "old", 1000)
        assert table_rows(tmp_path, "old") is None
        set_mode(broker.bootstrap, "old", "key_value")
        _produce(broker.bootstrap, "old", 500, first=1000)
        _rows_equal_consumed(tmp_path, broker.bootstrap, "old", 1500)
    finally:
        broker.terminate()
