"""key_value mode end to end: a real broker process, confluent-kafka, the table's files."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from odradek.testing import free_port, wait_until
from tests.e2e.metrics_support import scrape
from tests.iceberg.support import (
    assert_rows_are_the_records,
    create_topic,
    produce_keyed,
    set_mode,
    start_broker,
    table_of,
    table_offsets,
    table_rows,
)

RECORDS = 10_000
PARTITIONS = 3


def _rows_equal_consumed(data_dir: Path, bootstrap: str, topic: str, expected: int) -> None:
    offsets = wait_until(
        lambda: (o := table_offsets(data_dir, topic)) and sum(o.values()) >= expected and o,
        what="the table's offsets",
    )
    rows = table_rows(data_dir, topic)
    assert rows is not None
    assert_rows_are_the_records(rows, bootstrap, topic, PARTITIONS, offsets)
    assert rows.num_rows == expected


def test_every_record_is_a_row_once(tmp_path: Path) -> None:
    metrics = f"127.0.0.1:{free_port()}"
    broker = start_broker(tmp_path, 0, f"metrics.listener={metrics}")
    try:
        create_topic(broker.bootstrap, "events", PARTITIONS)
        produce_keyed(broker.bootstrap, "events", RECORDS)
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
        produce_keyed(broker.bootstrap, "old", 1000)
        assert table_rows(tmp_path, "old") is None
        set_mode(broker.bootstrap, "old", "key_value")
        produce_keyed(broker.bootstrap, "old", 500, first=1000)
        _rows_equal_consumed(tmp_path, broker.bootstrap, "old", 1500)
    finally:
        broker.terminate()


def test_a_topic_deleted_and_made_again_fills_a_new_table(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "reborn", PARTITIONS)
        produce_keyed(broker.bootstrap, "reborn", 900)
        _rows_equal_consumed(tmp_path, broker.bootstrap, "reborn", 900)
        first = table_of(tmp_path, "reborn")
        first_id = first.properties["odradek.topic-id"]
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["reborn"])["reborn"].result(30)

        def made_again() -> bool:
            try:
                create_topic(broker.bootstrap, "reborn", 1)
            except KafkaException as e:  # the deletion is still under way
                if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
                return False
            return True

        wait_until(made_again, what="the topic made again")
        produce_keyed(broker.bootstrap, "reborn", 100, first=900)
        # Its offsets start at 0 again: the table of the earlier topic is no guide to them.
        wait_until(lambda: table_offsets(tmp_path, "reborn") == {0: 100}, what="a new table")
        table = table_of(tmp_path, "reborn")
        assert table.properties["odradek.topic-id"] != first_id
        rows = table.scan().to_arrow()
        assert_rows_are_the_records(rows, broker.bootstrap, "reborn", 1, {0: 100})
        assert rows.num_rows == 100
        # The earlier topic's rows are all kept, under its id.
        aside = table_of(tmp_path, f"reborn~{first_id}")
        assert aside.scan().to_arrow().num_rows == 900
    finally:
        broker.terminate()
