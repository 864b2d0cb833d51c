"""Protobuf values end to end: values written with Confluent's Protobuf serializer against the
broker's schema registry become typed columns; a field added in a new schema version adds a
column; a value that does not decode goes to the dead-letter table."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from odradek.testing import wait_until
from tests.iceberg.support import (
    FIRST_COMMIT_TIMEOUT_S,
    create_topic,
    registry_client,
    start_broker,
    table_offsets,
    table_rows,
)

_FDP = descriptor_pb2.FieldDescriptorProto


def _order_class(with_coupon: bool) -> Any:
    """shop.Order as protoc would describe it: an id, an item, a price, a nested Shipping, a
    repeated tag, an enum, a map and a Timestamp (and, in version 2, a coupon)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto",
        package="shop",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    order = file.message_type.add(name="Order")
    shipping = order.nested_type.add(name="Shipping")
    shipping.field.add(name="city", number=1, type=_FDP.TYPE_STRING, label=_FDP.LABEL_OPTIONAL)
    shipping.field.add(name="express", number=2, type=_FDP.TYPE_BOOL, label=_FDP.LABEL_OPTIONAL)
    status = order.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_FDP.TYPE_STRING, label=_FDP.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_FDP.TYPE_INT32, label=_FDP.LABEL_OPTIONAL)
    fields = [
        ("id", 1, _FDP.TYPE_INT64, _FDP.LABEL_OPTIONAL, ""),
        ("item", 2, _FDP.TYPE_STRING, _FDP.LABEL_OPTIONAL, ""),
        ("price", 3, _FDP.TYPE_DOUBLE, _FDP.LABEL_OPTIONAL, ""),
        ("shipping", 4, _FDP.TYPE_MESSAGE, _FDP.LABEL_OPTIONAL, ".shop.Order.Shipping"),
        ("tags", 5, _FDP.TYPE_STRING, _FDP.LABEL_REPEATED, ""),
        ("status", 6, _FDP.TYPE_ENUM, _FDP.LABEL_OPTIONAL, ".shop.Order.Status"),
        ("counts", 7, _FDP.TYPE_MESSAGE, _FDP.LABEL_REPEATED, ".shop.Order.CountsEntry"),
        ("at", 8, _FDP.TYPE_MESSAGE, _FDP.LABEL_OPTIONAL, ".google.protobuf.Timestamp"),
    ]
    if with_coupon:
        fields.append(("coupon", 9, _FDP.TYPE_STRING, _FDP.LABEL_OPTIONAL, ""))
    for name, number, kind, label, type_name in fields:
        field = order.field.add(name=name, number=number, type=kind, label=label)
        if type_name:
            field.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def _orders(first: int, count: int, coupon: bool) -> list[dict[str, Any]]:
    orders: list[dict[str, Any]] = [
        {
            "id": i,
            "item": f"item {i}",
            "price": i / 8,
            "shipping": {"city": f"city {i % 5}", "express": i % 2 == 0} if i % 7 else None,
            "tags": [f"t{i % 3}"] * (i % 3),
            "status": "PAID" if i % 2 else "NEW",
            "counts": {"a": i, "b": -i} if i % 4 else {},
            "at": datetime.fromtimestamp(1_700_000_000 + i, UTC),
        }
        for i in range(first, first + count)
    ]
    if coupon:
        for order in orders:
            order["coupon"] = f"C{order['id']}"
    return orders


def _message(order_class: Any, order: dict[str, Any]) -> Any:
    fields = {k: v for k, v in order.items() if k not in ("shipping", "counts", "at", "status")}
    message = order_class(**fields, status=1 if order["status"] == "PAID" else 0)
    if order["shipping"] is not None:
        message.shipping.city = order["shipping"]["city"]
        message.shipping.express = order["shipping"]["express"]
    message.counts.update(order["counts"])
    message.at.FromDatetime(order["at"])
    return message


def _rows(table: Any) -> list[dict[str, Any]]:
    rows = table.drop_columns(["kafka"]).to_pylist(maps_as_pydicts="strict")
    return sorted(rows, key=lambda r: r["id"])


def test_protobuf_values_become_typed_columns_and_a_new_field_a_column(tmp_path: Path) -> None:
    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "orders", 1, mode="value_schema_id_prefix")
        registry = registry_client(broker)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        context = SerializationContext("orders", MessageField.VALUE)
        v1_class = _order_class(with_coupon=False)
        v1 = ProtobufSerializer(v1_class, registry)
        first = _orders(0, 150, coupon=False)
        for order in first:
            producer.produce("orders", value=v1(_message(v1_class, order), context))
        assert producer.flush(30) == 0
        wait_until(
            lambda: table_offsets(tmp_path, "orders") == {0: 150},
            what="v1 rows",
            timeout_s=FIRST_COMMIT_TIMEOUT_S,
        )
        rows = table_rows(tmp_path, "orders")
        assert rows is not None
        assert rows.column_names == [
            "kafka",
            *("id", "item", "price", "shipping", "tags", "status", "counts", "at"),
        ]
        assert _rows(rows) == first

        v2_class = _order_class(with_coupon=True)
        v2 = ProtobufSerializer(v2_class, registry)
        second = _orders(150, 50, coupon=True)
        for order in second:
            producer.produce("orders", value=v2(_message(v2_class, order), context))
        # A registered id and the first message, but bytes that are no message: a dead letter.
        v2_id = registry.get_latest_version("orders-value").schema_id
        assert registry.get_latest_version("orders-value").version == 2
        undecodable = struct.pack(">bI", 0, v2_id) + b"\0" + b"\xff\xff\xff"
        producer.produce("orders", value=undecodable)
        assert producer.flush(30) == 0
        wait_until(lambda: table_offsets(tmp_path, "orders") == {0: 201}, what="v2 rows")
        rows = table_rows(tmp_path, "orders")
        assert rows is not None
        assert rows.column_names[-1] == "coupon"
        assert _rows(rows) == [{**o, "coupon": None} for o in first] + second
        dead = table_rows(tmp_path, "orders~dlq")
        assert dead is not None
        assert dead.column("value").to_pylist() == [undecodable]
        assert "does not decode" in dead.column("error")[0].as_py()
    finally:
        broker.terminate()


def test_a_message_with_a_type_from_a_referenced_file(tmp_path: Path) -> None:
    """The serializer registers the imported file under a subject of its own and references
    it: the columns take the imported message's fields."""
    money = descriptor_pb2.FileDescriptorProto(
        name="shop/money.proto", package="shop", syntax="proto3"
    )
    money.message_type.add(name="Money").field.add(
        name="cents", number=1, type=_FDP.TYPE_SINT64, label=_FDP.LABEL_OPTIONAL
    )
    price = descriptor_pb2.FileDescriptorProto(
        name="shop/price.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"]
    )
    message = price.message_type.add(name="Price")
    message.field.add(name="item", number=1, type=_FDP.TYPE_STRING, label=_FDP.LABEL_OPTIONAL)
    message.field.add(
        name="amount",
        number=2,
        type=_FDP.TYPE_MESSAGE,
        label=_FDP.LABEL_OPTIONAL,
        type_name=".shop.Money",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(price)
    price_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Price"))

    broker = start_broker(tmp_path)
    try:
        create_topic(broker.bootstrap, "prices", 1, mode="value_schema_id_prefix")
        serializer = ProtobufSerializer(price_class, registry_client(broker))
        context = SerializationContext("prices", MessageField.VALUE)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
        for i in range(20):
            sent = price_class(item=f"tea {i}")
            sent.amount.cents = -i
            producer.produce("prices", value=serializer(sent, context))
        assert producer.flush(30) == 0
        wait_until(
            lambda: table_offsets(tmp_path, "prices") == {0: 20},
            what="the rows",
            timeout_s=FIRST_COMMIT_TIMEOUT_S,
        )
        rows = table_rows(tmp_path, "prices")
        assert rows is not None
        assert sorted(
            rows.drop_columns(["kafka"]).to_pylist(), key=lambda r: -r["amount"]["cents"]
        ) == [{"item": f"tea {i}", "amount": {"cents": -i}} for i in range(20)]
        assert table_rows(tmp_path, "prices~dlq") is None
    finally:
        broker.terminate()
