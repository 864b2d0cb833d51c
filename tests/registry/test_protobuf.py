"""Protobuf schemas: parsing both forms, compatibility verdicts, and confluent-kafka's
ProtobufSerializer and ProtobufDeserializer through a broker."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from odradek.registry.errors import RegistryError
from odradek.registry.protobuf import ProtobufSchema
from odradek.testing import RunningBroker

from .conftest import registry_url

TIMEOUT_S = 30


def proto(body: str) -> ProtobufSchema:
    return ProtobufSchema('syntax = "proto3";\npackage shop;\n' + body)


def test_text_and_descriptor_forms() -> None:
    text = proto("message Order { int64 id = 1;   string item = 2; }  // the order")
    assert text.shape == {"Order": {1: ("varint", "single"), 2: ("length-delimited", "single")}}
    # Layout does not matter to the canonical text.
    assert proto(
        "message Order {\n  int64 id = 1;\n  string item = 2;\n} // the order"
    ).canonical == (text.canonical)
    descriptor = descriptor_pb2.FileDescriptorProto(name="o.proto", package="shop", syntax="proto3")
    order = descriptor.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=3, label=1)
    order.field.add(name="item", number=2, type=9, label=1)
    encoded = base64.standard_b64encode(descriptor.SerializeToString()).decode()
    assert ProtobufSchema(encoded).shape == text.shape
    for bad in ("message {", 'syntax = "proto3";', "message A { int32 x = 1 }", "hello"):
        with pytest.raises(RegistryError) as caught:
            ProtobufSchema(bad)
        assert caught.value.code == 42201


@pytest.mark.parametrize(
    ("reader", "compatible"),
    [
        ("message Order { int64 id = 1; string item = 2; }", True),
        ("message Order { int64 id = 1; }", True),  # a field removed
        ("message Order { int64 id = 1; string item = 2; int32 n = 3; }", True),  # added
        ("message Order { int64 ident = 1; string what = 2; }", True),  # renamed
        ("message Order { int32 id = 1; bytes item = 2; }", True),  # same wire kinds
        ("message Order { string id = 1; string item = 2; }", False),  # kind changed
        ("message Order { repeated int64 id = 1; string item = 2; }", False),
        ("message Other { int64 id = 1; }", False),  # Order removed
    ],
)
def test_verdicts(reader: str, compatible: bool) -> None:
    writer = proto("message Order { int64 id = 1; string item = 2; }")
    errors = proto(reader).read_errors(writer)
    assert (errors == []) is compatible, errors


def order_class() -> Any:
    descriptor = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3"
    )
    order = descriptor.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=3, label=1)
    order.field.add(name="item", number=2, type=9, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_round_trip(registry_broker: RunningBroker) -> None:
    registry = SchemaRegistryClient({"url": registry_url(registry_broker)})
    order = order_class()
    serializer = ProtobufSerializer(order, registry)
    deserializer = ProtobufDeserializer(
        order, schema_registry_client=SchemaRegistryClient({"url": registry_url(registry_broker)})
    )
    topic = "orders"
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "linger.ms": 5})
    sent = [order(id=i, item=f"thing {i}") for i in range(1000)]
    for message in sent:
        producer.produce(topic, value=serializer(message, context))
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": registry_broker.bootstrap,
            "group.id": "g",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    received = []
    try:
        while len(received) < len(sent):
            message = consumer.poll(TIMEOUT_S)
            assert message is not None and message.error() is None
            received.append(deserializer(message.value(), context))
    finally:
        consumer.close()
    assert received == sent
    assert registry.get_latest_version("orders-value").schema.schema_type == "PROTOBUF"

    # A .proto text that changes a field's wire kind is refused.
    changed = 'syntax = "proto3";\npackage shop;\nmessage Order { string id = 1; string item = 2; }'
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema("orders-value", Schema(changed, "PROTOBUF"))
    assert refused.value.http_status_code == 409


def test_protobuf_with_a_referenced_file(registry_broker: RunningBroker) -> None:
    """The serializer registers the imported file under its own subject and references it; the
    deserializer reads both back."""
    common = descriptor_pb2.FileDescriptorProto(
        name="shop/money.proto", package="shop", syntax="proto3"
    )
    money = common.message_type.add(name="Money")
    money.field.add(name="cents", number=1, type=3, label=1)
    main = descriptor_pb2.FileDescriptorProto(
        name="shop/price.proto", package="shop", syntax="proto3", dependency=["shop/money.proto"]
    )
    price = main.message_type.add(name="Price")
    price.field.add(name="item", number=1, type=9, label=1)
    price.field.add(name="amount", number=2, type=11, label=1, type_name=".shop.Money")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(main)
    price_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Price"))
    money_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Money"))

    url = registry_url(registry_broker)
    registry = SchemaRegistryClient({"url": url})
    serializer = ProtobufSerializer(price_class, registry)
    context = SerializationContext("prices", MessageField.VALUE)
    sent = price_class(item="tea", amount=money_class(cents=250))
    encoded = serializer(sent, context)
    assert sorted(registry.get_subjects()) == ["prices-value", "shop/money.proto"]
    latest = registry.get_latest_version("prices-value")
    assert [(r.name, r.subject) for r in latest.schema.references] == [
        ("shop/money.proto", "shop/money.proto")
    ]
    fresh = SchemaRegistryClient({"url": url})
    deserializer = ProtobufDeserializer(price_class, schema_registry_client=fresh)
    assert deserializer(encoded, context) == sent
