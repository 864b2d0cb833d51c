"""JSON Schema values end to end: values written with Confluent's JSON Schema serializer
against the broker's schema registry become typed columns; a new optional property adds a
column; a value that does not fit its schema goes to the dead-letter table."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.testing import wait_until
from tests.iceberg.support import (
    FIRST_COMMIT_TIMEOUT_S,
    create_topic,
    registry_client,
    start_broker,
    table_offsets,
    table_rows,
)

V1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "item": {"type": "string"},
        "price": {"type": "number"},
        "shipping": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "express": {"type": "boolean"}},
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "item", "price"],
    # Closed: a property added later is then a compatible change (the registry's check).
    "additionalProperties": False,
}
V2 = {**V1, "properties": {**V1["properties"], "coupon": {"type": ["string", "null"]}}}


def _orders(first: int, count: int, coupon: bool) -> list[dict[str, object]]:
    orders: list[dict[str, object]] = [
        {
            "id": i,
            "item": f"item {i}",
            "price": i / 8,
            "shipping": {"city": f"city {i % 5}", "express": i % 2 == 0},
            "tags": [f"t{i % 3}"] * (i % 3),
        }
        for i in range(first, first + count)
    ]
    if coupon:
        for order in orders:
            order["coupon"] = f"C{order['id']}" if order["id"] % 4 else None
    return orders


def test_json_values_become_typed_columns_and_a_new_property_a_column(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "orders", 1, mode="value_schema_id_prefix")
        registry = registry_client(broker)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        context = SerializationContext("orders", MessageField.VALUE)
        first = _orders(0, 150, coupon=False)
        v1 = JSONSerializer(Schema(json.dumps(V1), "JSON"), registry)
        for order in first:
            producer.produce("orders", value=v1(order, context))
        assert producer.flush(30) == 0
        wait_until(
            lambda: table_offsets(tmp_path, "orders") == {0: 150},
            what="v1 rows",
            timeout_s=FIRST_COMMIT_TIMEOUT_S,
        )
        rows = table_rows(tmp_path, "orders")
        assert rows is not None
        assert rows.column_names == ["kafka", "id", "item", "price", "shipping", "tags"]
        got = sorted(rows.drop_columns(["kafka"]).to_pylist(), key=lambda r: r["id"])
        assert got == first

        second = _orders(150, 50, coupon=True)
        v2 = JSONSerializer(Schema(json.dumps(V2), "JSON"), registry)
        for order in second:
            producer.produce("orders", value=v2(order, context))
        # Valid JSON under a registered id, but not the schema's types: a dead letter.
        v2_id = registry.lookup_schema("orders-value", Schema(json.dumps(V2), "JSON")).schema_id
        unfit = struct.pack(">bI", 0, v2_id) + json.dumps({"id": "seven", "item": 1}).encode()
        producer.produce("orders", value=unfit)
        assert producer.flush(30) == 0
        wait_until(lambda: table_offsets(tmp_path, "orders") == {0: 201}, what="v2 rows")
        rows = table_rows(tmp_path, "orders")
        assert rows is not None
        assert rows.column_names[-1] == "coupon"
        got = sorted(rows.drop_columns(["kafka"]).to_pylist(), key=lambda r: r["id"])
        assert got == [{**o, "coupon": None} for o in first] + second
        dead = table_rows(tmp_path, "orders~dlq")
        assert dead is not None
        assert dead.column("value").to_pylist() == [unfit]
    finally:
        broker.terminate()
