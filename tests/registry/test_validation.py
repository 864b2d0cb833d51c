"""Broker-side schema id validation (confluent.key/value.schema.validation) with real clients:
confluent-kafka's AvroSerializer against the broker's own registry, and a raw producer."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
)
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
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


Serialize = Callable[..., bytes]


@pytest.fixture
def avro(registry_broker: RunningBroker) -> Serialize:
    """``avro(topic, celsius, field=MessageField.VALUE)``: a reading as confluent-kafka's
    serializer writes it, its schema registered under ``<topic>-value`` (``-key``)."""
    serializer = AvroSerializer(
        SchemaRegistryClient({"url": registry_url(registry_broker)}), SCHEMA
    )

    def serialize(topic: str, celsius: float, field: str = MessageField.VALUE) -> bytes:
        value = serializer({"celsius": celsius}, SerializationContext(topic, field))
        assert value is not None
        return value

    return serialize


def unknown_id(value: bytes) -> bytes:
    """``value`` with a schema id no one registered."""
    return b"\x00" + (999_999).to_bytes(4, "big") + value[5:]


def test_records_with_a_registered_id_are_kept_and_others_refused(
    registry_broker: RunningBroker, avro: Serialize
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


def test_keys_are_validated_when_asked(registry_broker: RunningBroker, avro: Serialize) -> None:
    create(registry_broker, "keyed", **{"confluent.key.schema.validation": "true"})
    key = avro("keyed", 1.0, MessageField.KEY)
    deliveries = send(registry_broker, "keyed", (key, b"raw value"), (b"raw key", b"raw value"))
    assert deliveries.errors == [KafkaError.INVALID_RECORD]
    assert read_all(registry_broker, "keyed") == [b"raw value"]


def test_a_topic_without_validation_takes_anything(registry_broker: RunningBroker) -> None:
    create(registry_broker, "anything")
    deliveries = send(registry_broker, "anything", (None, b"raw"), (b"k", b"\x00\x00\x00\x0f\xff"))
    assert deliveries.errors == []
    assert read_all(registry_broker, "anything") == [b"raw", b"\x00\x00\x00\x0f\xff"]


def test_altering_the_config_turns_validation_on_and_off(
    registry_broker: RunningBroker, avro: Serialize
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


def test_an_id_registered_for_another_topic_is_refused(
    registry_broker: RunningBroker, avro: Serialize
) -> None:
    """Confluent Server's subject check: the id is registered, but under other-value, not
    under the subject the topic's TopicNameStrategy gives."""
    create(registry_broker, "strict", **{"confluent.value.schema.validation": "true"})
    mine, theirs = avro("strict", 1.0), avro("other", 2.0)
    assert mine[1:5] == theirs[1:5]  # one schema, one id, under both subjects
    # Registered under strict-value too: the same bytes pass.
    assert send(registry_broker, "strict", (None, mine), (None, theirs)).errors == []
    reading = json.dumps(
        {"type": "record", "name": "Other", "fields": [{"name": "kelvin", "type": "double"}]}
    )
    client = SchemaRegistryClient({"url": registry_url(registry_broker)})
    other = AvroSerializer(client, reading)(
        {"kelvin": 3.0}, SerializationContext("elsewhere", MessageField.VALUE)
    )
    assert other is not None
    assert send(registry_broker, "strict", (None, other)).errors == [KafkaError.INVALID_RECORD]
    assert read_all(registry_broker, "strict") == [mine, theirs]


@pytest.mark.parametrize(
    ("strategy", "client_strategy"),
    [
        ("io.confluent.kafka.serializers.subject.RecordNameStrategy", record_subject_name_strategy),
        ("TopicRecordNameStrategy", topic_record_subject_name_strategy),
    ],
)
def test_a_record_name_strategy_topic_takes_what_that_strategys_serializer_writes(
    registry_broker: RunningBroker,
    strategy: str,
    client_strategy: Callable[[SerializationContext, str], str],
) -> None:
    topic = f"by-{client_strategy.__name__.replace('_', '-')}"
    client = SchemaRegistryClient({"url": registry_url(registry_broker)})
    schema = json.dumps(
        {
            "type": "record",
            "name": "Reading",
            "namespace": "sensors",
            "fields": [{"name": "lux", "type": "double"}],
        }
    )
    by_record = AvroSerializer(client, schema, conf={"subject.name.strategy": client_strategy})
    value = by_record({"lux": 9.5}, SerializationContext(topic, MessageField.VALUE))
    assert value is not None
    create(
        registry_broker,
        topic,
        **{
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": strategy,
        },
    )
    create(registry_broker, f"{topic}-default", **{"confluent.value.schema.validation": "true"})
    assert send(registry_broker, topic, (None, value)).errors == []
    # The default strategy wants <topic>-value, which this serializer never registered.
    refused = send(registry_broker, f"{topic}-default", (None, value))
    assert refused.errors == [KafkaError.INVALID_RECORD]
    assert read_all(registry_broker, topic) == [value]


def test_an_unknown_subject_name_strategy_is_refused(registry_broker: RunningBroker) -> None:
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap})
    configs = {"confluent.value.subject.name.strategy": "com.example.MyStrategy"}
    (future,) = admin.create_topics([NewTopic("odd-strategy", 1, 1, config=configs)]).values()
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT_S)
    assert caught.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_protobufs_record_name_is_the_message_the_serializer_writes(
    registry_broker: RunningBroker,
) -> None:
    """A file of two messages, the second one written: confluent-kafka's serializer registers
    the file under that message's full name, which the topic's RecordNameStrategy accepts."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field_type = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="validation/lights.proto", package="iot.lights", syntax="proto3"
    )
    file.message_type.add(name="Switch").field.add(
        name="on", number=1, type=field_type.TYPE_BOOL, label=1
    )
    file.message_type.add(name="Dimmer").field.add(
        name="level", number=1, type=field_type.TYPE_INT32, label=1
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    dimmer = message_factory.GetMessageClass(pool.FindMessageTypeByName("iot.lights.Dimmer"))
    client = SchemaRegistryClient({"url": registry_url(registry_broker)})
    serializer = ProtobufSerializer(
        dimmer,
        client,
        {"use.deprecated.format": False, "subject.name.strategy": record_subject_name_strategy},
    )
    value = serializer(dimmer(level=40), SerializationContext("lights", MessageField.VALUE))
    assert value is not None
    assert client.get_latest_version("iot.lights.Dimmer").schema_id == int.from_bytes(value[1:5])
    create(
        registry_broker,
        "lights",
        **{
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": "RecordNameStrategy",
        },
    )
    assert send(registry_broker, "lights", (None, value)).errors == []
    assert read_all(registry_broker, "lights") == [value]
