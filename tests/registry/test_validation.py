"""Broker-side schema id validation (confluent.key/value.schema.validation) with real clients:
confluent-kafka's AvroSerializer against the broker's own registry, and a raw producer."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.testing import RunningBroker

from .conftest import registry_url

TIMEOUT_S = 30
SCHEMA = json.dumps(
    {"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]}
)


class Deliveries:
    """What the broker answered each produced record."""

    def __init__(self) -> None:
        self.stored: list[bytes | None] = []
        self.errors: list[int] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.stored.append(message.value())
        else:
            self.errors.append(error.code())


def create(broker: RunningBroker, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=configs)]).values():
        future.result(TIMEOUT_S)


def send(
    broker: RunningBroker, topic: str, *records: tuple[bytes | None, bytes | None]
) -> Deliveries:
    """Each record in a request of its own, so that one refusal leaves the others alone."""
    deliveries = Deliveries()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "retries": 0})
    for key, value in records:
        producer.produce(topic, value=value, key=key, on_delivery=deliveries)
        assert producer.flush(TIMEOUT_S) == 0
    return deliveries


def read_all(broker: RunningBroker, topic: str) -> list[bytes | None]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        low, high = consumer.get_watermark_offsets(KafkaPartition(topic, 0), TIMEOUT_S)
        consumer.assign([KafkaPartition(topic, 0, OFFSET_BEGINNING)])
        found: list[bytes | None] = []
        while len(found) < high - low:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, "timed out reading"
            assert message.error() is None
            found.append(message.value())
        return found
    finally:
        consumer.close()


@pytest.fixture
def avro(registry_broker: RunningBroker) -> Callable[[str, float], bytes]:
    serializer = AvroSerializer(
        SchemaRegistryClient({"url": registry_url(registry_broker)}), SCHEMA
    )

    def serialize(topic: str, celsius: float) -> bytes:
        value = serializer({"celsius": celsius}, SerializationContext(topic, MessageField.VALUE))
        assert value is not None
        return value

    return serialize


def unknown_id(value: bytes) -> bytes:
    """``value`` with a schema id no one registered."""
    return b"\x00" + (999_999).to_bytes(4, "big") + value[5:]


def test_records_with_a_registered_id_are_kept_and_others_refused(
    registry_broker: RunningBroker, avro: Callable[[str, float], bytes]
) -> None:
    create(registry_broker, "readings", **{"confluent.value.schema.validation": "true"})
    good = avro("readings", 21.5)
    deliveries = send(
        registry_broker,
        "readings",
        (None, good),
        (None, b'{"celsius": 3}'),
        (None, unknown_id(good)),
        (b"any key", None),  # a tombstone passes, as Confluent's validation lets it
        (b"no id in the key is fine", avro("readings", -4.0)),
    )
    assert deliveries.errors == [KafkaError.INVALID_RECORD] * 2
    assert read_all(registry_broker, "readings") == [good, None, avro("readings", -4.0)]


def test_keys_are_validated_when_asked(
    registry_broker: RunningBroker, avro: Callable[[str, float], bytes]
) -> None:
    create(registry_broker, "keyed", **{"confluent.key.schema.validation": "true"})
    key = avro("keyed", 1.0)
    deliveries = send(registry_broker, "keyed", (key, b"raw value"), (b"raw key", b"raw value"))
    assert deliveries.errors == [KafkaError.INVALID_RECORD]
    assert read_all(registry_broker, "keyed") == [b"raw value"]


def test_a_topic_without_validation_takes_anything(registry_broker: RunningBroker) -> None:
    create(registry_broker, "anything")
    deliveries = send(registry_broker, "anything", (None, b"raw"), (b"k", b"\x00\x00\x00\x0f\xff"))
    assert deliveries.errors == []
    assert read_all(registry_broker, "anything") == [b"raw", b"\x00\x00\x00\x0f\xff"]


def test_altering_the_config_turns_validation_on_and_off(
    registry_broker: RunningBroker, avro: Callable[[str, float], bytes]
) -> None:
    create(registry_broker, "toggled")
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    name = "confluent.value.schema.validation"

    def alter(value: str) -> None:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "toggled", incremental_configs=[entry])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(TIMEOUT_S)

    def described() -> str:
        resource = ConfigResource(ConfigResource.Type.TOPIC, "toggled")
        (future,) = admin.describe_configs([resource]).values()
        return str(future.result(TIMEOUT_S)[name].value)

    assert described() == "false"
    assert send(registry_broker, "toggled", (None, b"raw 1")).errors == []
    alter("true")
    assert described() == "true"
    assert send(registry_broker, "toggled", (None, b"raw 2")).errors == [KafkaError.INVALID_RECORD]
    good = avro("toggled", 0.5)
    assert send(registry_broker, "toggled", (None, good)).errors == []
    alter("false")
    assert send(registry_broker, "toggled", (None, b"raw 3")).errors == []
    assert read_all(registry_broker, "toggled") == [b"raw 1", good, b"raw 3"]
