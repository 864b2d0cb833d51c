"""The Avro modes end to end: values written with Confluent's serializer against the broker's
schema registry become typed columns; a new optional field adds a column; values that cannot
be decoded go to the dead-letter table."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.testing import BrokerProcess, wait_until
from tests.iceberg.support import (
    FIRST_COMMIT_TIMEOUT_S,
    create_topic,
    registry_client,
    start_broker,
    table_offsets,
    table_rows,
)

V1 = {
    "type": "record",
    "name": "User",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": "double"},
        {"name": "active", "type": "boolean"},
    ],
}
V2 = {
    **V1,
    "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}


def _produce(
    broker: BrokerProcess, topic: str, schema: dict[str, object], rows: list[dict[str, object]]
) -> None:
    serializer = AvroSerializer(registry_client(broker), json.dumps(schema))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    context = SerializationContext(topic, MessageField.VALUE)
    for row in rows:
        producer.produce(topic, value=serializer(row, context))
    assert producer.flush(30) == 0


def _users(first: int, count: int, email: bool) -> list[dict[str, object]]:
    users: list[dict[str, object]] = [
        {"id": i, "name": f"user {i}", "score": i / 4, "active": i % 2 == 0}
        for i in range(first, first + count)
    ]
    if email:
        for user in users:
            user["email"] = f"u{user['id']}@example.com" if user["id"] % 3 else None
    return users


def test_values_become_typed_columns_and_a_new_field_a_column(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "users", 1, mode="value_schema_id_prefix")
        first = _users(0, 200, email=False)
        _produce(broker, "users", V1, first)
        wait_until(
            lambda: table_offsets(tmp_path, "users") == {0: 200},
            what="v1 rows",
            timeout_s=FIRST_COMMIT_TIMEOUT_S,
        )
        rows = table_rows(tmp_path, "users")
        assert rows is not None
        assert rows.column_names == ["kafka", "id", "name", "score", "active"]
        assert sorted(rows.drop_columns(["kafka"]).to_pylist(), key=lambda r: r["id"]) == first

        second = _users(200, 100, email=True)
        _produce(broker, "users", V2, second)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("users", value=b"not avro")
        producer.produce("users", value=b"\x00\x00\x00\x00\x63garbage")
        assert producer.flush(30) == 0
        wait_until(lambda: table_offsets(tmp_path, "users") == {0: 302}, what="v2 rows")
        rows = table_rows(tmp_path, "users")
        assert rows is not None
        assert rows.column_names == ["kafka", "id", "name", "score", "active", "email"]
        expected = [{**u, "email": None} for u in first] + second
        assert sorted(rows.drop_columns(["kafka"]).to_pylist(), key=lambda r: r["id"]) == expected
        dead = table_rows(tmp_path, "users~dlq")
        assert dead is not None
        assert sorted(dead.column("value").to_pylist()) == [
            b"\x00\x00\x00\x00\x63garbage",
            b"not avro",
        ]
        assert all(dead.column("error").to_pylist())
    finally:
        broker.terminate()


def test_value_schema_latest_decodes_unprefixed_values(tmp_path: Path) -> None:
    import io

    import fastavro

    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "plain", 1, mode="value_schema_latest")
        registry_client(broker).register_schema("plain-value", Schema(json.dumps(V1), "AVRO"))
        users = _users(0, 50, email=False)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for user in users:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, fastavro.parse_schema(V1), user)
            producer.produce("plain", value=out.getvalue())
        assert producer.flush(30) == 0
        wait_until(
            lambda: table_offsets(tmp_path, "plain") == {0: 50},
            what="the rows",
            timeout_s=FIRST_COMMIT_TIMEOUT_S,
        )
        rows = table_rows(tmp_path, "plain")
        assert rows is not None
        assert sorted(rows.drop_columns(["kafka"]).to_pylist(), key=lambda r: r["id"]) == users
    finally:
        broker.terminate()
