"""Typed columns (``valueFormat``): Spark reads values that confluent-kafka's registry
serializers wrote into columns of the schema's types, and writes typed rows back as Avro, JSON
and Protobuf that confluent-kafka's deserializers read; against the broker's own schema
registry."""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.testing import RunningBroker, running_broker

from .conftest import create_topic

TIMEOUT_S = 60

ADDRESS = {
    "type": "record",
    "name": "Address",
    "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "int"}],
}
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "items", "type": {"type": "array", "items": "string"}},
        {"name": "prices", "type": {"type": "map", "values": "double"}},
        {"name": "ship_to", "type": ADDRESS},
        {"name": "paid", "type": "boolean"},
    ],
}


def order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "customer": f"customer {i}",
        "note": None if i % 3 else f"note {i}",
        "items": [f"item {j}" for j in range(i % 4)],
        "prices": {f"item {j}": j + i / 4 for j in range(i % 4)},
        "ship_to": {"street": f"{i} High St", "zip": 1000 + i},
        "paid": i % 2 == 0,
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """A broker serving its schema registry on a free port (see :func:`registry_url`)."""
    with running_broker(
        tmp_path_factory.mktemp("spark-registry"), schema_registry_listener="127.0.0.1:0"
    ) as running:
        yield running


def registry_url(broker: RunningBroker) -> str:
    assert broker.broker is not None and broker.broker.schema_registry is not None
    host, port = broker.broker.schema_registry.bound
    return f"http://{host}:{port}"


def produce(broker: RunningBroker, topic: str, serializer: Any, values: list[Any]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    context = SerializationContext(topic, MessageField.VALUE)
    for value in values:
        producer.produce(topic, value=serializer(value, context))
    assert producer.flush(TIMEOUT_S) == 0


def consume(broker: RunningBroker, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    received: list[bytes] = []
    try:
        while len(received) < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"only {len(received)} records arrived"
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None
            received.append(value)
    finally:
        consumer.close()
    return received


def typed_read(spark: Any, broker: RunningBroker, topic: str, **options: str) -> Any:
    reader = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("schema.registry.url", registry_url(broker))
        .option("subscribe", topic)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.orderBy("offset").select("value.*").collect()]


def test_a_streaming_query_reads_avro_into_typed_columns_and_writes_them_back_exactly(
    spark: Any, broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topic(broker.bootstrap, source, 1)
    create_topic(broker.bootstrap, sink, 1)
    url = registry_url(broker)
    registry = SchemaRegistryClient({"url": url})
    registry.register_schema(f"{sink}-value", Schema(json.dumps(ORDER), "AVRO"))
    sent = [order(i) for i in range(300)]
    produce(broker, source, AvroSerializer(registry, json.dumps(ORDER)), sent)

    df = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("schema.registry.url", url)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("valueFormat", "avro")
        .load()
    )
    value_type = df.schema["value"].dataType
    fields: list[dict[str, Any]] = ORDER["fields"]  # type: ignore[assignment]
    assert [f.name for f in value_type.fields] == [f["name"] for f in fields]
    assert value_type["ship_to"].dataType.simpleString() == "struct<street:string,zip:int>"
    query = (
        df.select("key", "value")
        .writeStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("schema.registry.url", url)
        .option("topic", sink)
        .option("valueFormat", "avro")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with contextlib.suppress(Exception):
        query.awaitTermination(120)
    assert not query.isActive, "the query did not finish in time"
    assert query.exception() is None, query.exception()

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": url}))
    context = SerializationContext(sink, MessageField.VALUE)
    written = consume(broker, sink, len(sent))
    schema_id = registry.get_latest_version(f"{sink}-value").schema_id
    assert schema_id is not None
    assert {v[1:5] for v in written} == {schema_id.to_bytes(4, "big")}
    assert [deserializer(v, context) for v in written] == sent


def test_records_of_older_versions_are_read_with_the_reader_schema(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    v1 = {"type": "record", "name": "U", "fields": [{"name": "id", "type": "long"}]}
    v2 = {
        "type": "record",
        "name": "U",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string", "default": "anonymous"},
        ],
    }
    produce(broker, topic, AvroSerializer(registry, json.dumps(v1)), [{"id": 1}, {"id": 2}])
    produce(broker, topic, AvroSerializer(registry, json.dumps(v2)), [{"id": 3, "name": "c"}])

    latest = typed_read(spark, broker, topic, valueFormat="avro")
    assert latest.schema["value"].dataType.simpleString() == "struct<id:bigint,name:string>"
    assert rows(latest) == [
        {"id": 1, "name": "anonymous"},
        {"id": 2, "name": "anonymous"},
        {"id": 3, "name": "c"},
    ]
    pinned = typed_read(spark, broker, topic, valueFormat="avro", valueSchemaVersion="1")
    assert rows(pinned) == [{"id": 1}, {"id": 2}, {"id": 3}]


def test_json_schema_values_become_typed_columns(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    schema = {
        "type": "object",
        "title": "Reading",
        "properties": {
            "sensor": {"type": "string"},
            "value": {"type": "number"},
            "count": {"type": "integer"},
            "ok": {"type": "boolean"},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            },
            "labels": {"type": "array", "items": {"type": "string"}},
        },
    }
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    sent = [
        {
            "sensor": f"s{i}",
            "value": i / 3,
            "count": i,
            "ok": i % 2 == 0,
            "where": {"lat": 1.5, "lon": -i / 2},
            "labels": ["a\nb"] * (i % 3),
        }
        for i in range(40)
    ]
    produce(broker, topic, JSONSerializer(json.dumps(schema), registry), sent)
    df = typed_read(spark, broker, topic, valueFormat="json")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<sensor:string,value:double,count:bigint,ok:boolean,"
        "where:struct<lat:double,lon:double>,labels:array<string>>"
    )
    assert rows(df) == sent


def _protobuf_class() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="reading_test.proto", package="test.typed")
    fdp.syntax = "proto3"
    where = fdp.message_type.add(name="Where")
    where.field.add(name="lat", number=1, type=1, label=1)  # double
    reading = fdp.message_type.add(name="Reading")
    field_type = descriptor_pb2.FieldDescriptorProto
    reading.field.add(name="sensor", number=1, type=field_type.TYPE_STRING, label=1)
    reading.field.add(name="count", number=2, type=field_type.TYPE_INT64, label=1)
    reading.field.add(name="ok", number=3, type=field_type.TYPE_BOOL, label=1)
    reading.field.add(
        name="where", number=4, type=field_type.TYPE_MESSAGE, label=1, type_name=".test.typed.Where"
    )
    reading.field.add(name="tags", number=5, type=field_type.TYPE_STRING, label=3)
    pool = descriptor_pool.Default()
    with contextlib.suppress(TypeError):  # added by an earlier run in this process
        pool.AddSerializedFile(fdp.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("test.typed.Reading"))


def test_protobuf_values_become_typed_columns(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    reading = _protobuf_class()
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    serializer = ProtobufSerializer(reading, registry, {"use.deprecated.format": False})
    sent = [
        reading(sensor=f"s{i}", count=i * 1000, ok=i % 2 == 0, tags=["x"] * (i % 3))
        for i in range(30)
    ]
    for i, message in enumerate(sent):
        if i % 2:
            message.where.lat = i / 2
    produce(broker, topic, serializer, sent)
    df = typed_read(
        spark,
        broker,
        topic,
        valueFormat="protobuf",
        valueSubject=f"{topic}-value",
        valueMessageName="test.typed.Reading",
    )
    assert df.schema["value"].dataType.simpleString() == (
        "struct<sensor:string,count:bigint,ok:boolean,where:struct<lat:double>,tags:array<string>>"
    )
    got = rows(df)
    assert got[1] == {
        "sensor": "s1",
        "count": 1000,
        "ok": False,
        "where": {"lat": 0.5},
        "tags": ["x"],
    }
    assert got[2] == {"sensor": "s2", "count": 2000, "ok": True, "where": None, "tags": ["x", "x"]}
    assert len(got) == len(sent)


def test_the_sink_registers_the_schema_of_the_rows_when_asked(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    url = registry_url(broker)
    df = spark.createDataFrame(
        [(i, f"name {i}", None if i % 2 else [i, i + 1]) for i in range(25)],
        "id long, name string, numbers array<long>",
    )
    (
        df.write.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("schema.registry.url", url)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("autoRegister", "true")
        .mode("append")
        .save()
    )
    registry = SchemaRegistryClient({"url": url})
    registered = json.loads(registry.get_latest_version(f"{topic}-value").schema.schema_str or "")
    assert [f["name"] for f in registered["fields"]] == ["id", "name", "numbers"]
    deserializer = AvroDeserializer(registry)
    context = SerializationContext(topic, MessageField.VALUE)
    got = sorted(
        (deserializer(v, context) for v in consume(broker, topic, 25)), key=lambda r: r["id"]
    )
    assert got == [
        {"id": i, "name": f"name {i}", "numbers": None if i % 2 else [i, i + 1]} for i in range(25)
    ]
    back = typed_read(spark, broker, topic, valueFormat="avro")
    assert sorted(r["id"] for r in rows(back)) == list(range(25))


def _write(df: Any, broker: RunningBroker, topic: str, **options: str) -> None:
    writer = (
        df.write.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("schema.registry.url", registry_url(broker))
        .option("topic", topic)
    )
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.mode("append").save()


def test_the_sink_writes_json_that_confluents_json_deserializer_reads(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    df = spark.createDataFrame(
        [
            (
                i,
                f"name {i}",
                None if i % 2 else [i / 2],
                {"k": i},
                bytes([i]),
                (f"c{i}", i % 3 == 0),
            )
            for i in range(25)
        ],
        "id long, name string, scores array<double>, counts map<string,int>, raw binary, "
        "place struct<city:string,big:boolean>",
    )
    _write(df, broker, topic, valueFormat="json", autoRegister="true", keyFormat="bytes")
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    latest = registry.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON"
    registered = json.loads(latest.schema.schema_str or "")
    assert list(registered["properties"]) == ["id", "name", "scores", "counts", "raw", "place"]
    # The deserializer validates each value against the registered schema.
    deserializer = JSONDeserializer(None, schema_registry_client=registry)
    context = SerializationContext(topic, MessageField.VALUE)
    got = sorted(
        (deserializer(v, context) for v in consume(broker, topic, 25)), key=lambda r: r["id"]
    )
    assert got == [
        {
            "id": i,
            "name": f"name {i}",
            "scores": None if i % 2 else [i / 2],
            "counts": {"k": i},
            "raw": base64.b64encode(bytes([i])).decode(),
            "place": {"city": f"c{i}", "big": i % 3 == 0},
        }
        for i in range(25)
    ]

    # A pinned version of a registered schema: the rows are the JSON the schema describes.
    pinned = f"{topic}-pinned"
    create_topic(broker.bootstrap, pinned, 1)
    schema = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
        "required": ["id"],
    }
    registry.register_schema(f"{pinned}-value", Schema(json.dumps(schema), "JSON"))
    _write(df.select("id", "name"), broker, pinned, valueFormat="json", valueSchemaVersion="1")
    values = consume(broker, pinned, 25)
    assert {JSONDeserializer(json.dumps(schema))(v, context)["id"] for v in values} == set(
        range(25)
    )
    back = typed_read(spark, broker, pinned, valueFormat="json")
    assert sorted(r["id"] for r in rows(back)) == list(range(25))


def test_the_sink_writes_protobuf_that_confluents_protobuf_deserializer_reads(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    create_topic(broker.bootstrap, topic, 1)
    reading = _protobuf_class()
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    # The serializer registers the schema (its file's base64 descriptor) on first use; the
    # value it makes is not produced.
    ProtobufSerializer(reading, registry, {"use.deprecated.format": False})(
        reading(sensor="x"), SerializationContext(topic, MessageField.VALUE)
    )
    df = spark.createDataFrame(
        [
            (f"s{i}", i * 1000, i % 2 == 0, None if i % 3 else (i / 4,), ["t"] * (i % 3))
            for i in range(30)
        ],
        "sensor string, count long, ok boolean, where struct<lat:double>, tags array<string>",
    )
    _write(df, broker, topic, valueFormat="protobuf", valueMessageName="test.typed.Reading")
    deserializer = ProtobufDeserializer(reading, {"use.deprecated.format": False})
    context = SerializationContext(topic, MessageField.VALUE)
    got = sorted(
        (deserializer(v, context) for v in consume(broker, topic, 30)), key=lambda m: m.count
    )
    expected = []
    for i in range(30):
        message = reading(sensor=f"s{i}", count=i * 1000, ok=i % 2 == 0, tags=["t"] * (i % 3))
        if i % 3 == 0:
            message.where.lat = i / 4
        expected.append(message)
    assert got == expected
    back = typed_read(spark, broker, topic, valueFormat="protobuf", valueMessageName="Reading")
    assert sorted(r["count"] for r in rows(back)) == [i * 1000 for i in range(30)]

    # A column the message lacks fails the write, naming the field.
    with pytest.raises(Exception, match="no field extra"):
        _write(
            df.selectExpr("sensor", "1 AS extra"),
            broker,
            topic,
            valueFormat="protobuf",
            valueMessageName="test.typed.Reading",
        )
    with pytest.raises(Exception, match="autoRegister"):
        _write(df, broker, topic, valueFormat="protobuf", autoRegister="true")


def test_protobuf_with_a_referenced_file_is_read_and_written(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    """The serializer registers the imported file under a subject of its own: the source's
    type and the sink's messages take the imported message from it."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field_type = descriptor_pb2.FieldDescriptorProto
    money = descriptor_pb2.FileDescriptorProto(
        name="typed/money.proto", package="typed.ref", syntax="proto3"
    )
    money.message_type.add(name="Money").field.add(
        name="cents", number=1, type=field_type.TYPE_SINT64, label=1
    )
    price = descriptor_pb2.FileDescriptorProto(
        name="typed/price.proto",
        package="typed.ref",
        syntax="proto3",
        dependency=["typed/money.proto"],
    )
    message = price.message_type.add(name="Price")
    message.field.add(name="item", number=1, type=field_type.TYPE_STRING, label=1)
    message.field.add(
        name="amount",
        number=2,
        type=field_type.TYPE_MESSAGE,
        label=1,
        type_name=".typed.ref.Money",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(money)
    pool.Add(price)
    price_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("typed.ref.Price"))
    create_topic(broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    sent = []
    for i in range(20):
        value = price_class(item=f"tea {i}")
        value.amount.cents = -i
        sent.append(value)
    produce(broker, topic, ProtobufSerializer(price_class, registry), sent)
    df = typed_read(spark, broker, topic, valueFormat="protobuf")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<item:string,amount:struct<cents:bigint>>"
    )
    assert rows(df) == [{"item": f"tea {i}", "amount": {"cents": -i}} for i in range(20)]

    out = f"{topic}-out"
    create_topic(broker.bootstrap, out, 1)
    _write(df.select("value"), broker, out, valueFormat="protobuf", valueSubject=f"{topic}-value")
    deserializer = ProtobufDeserializer(price_class, {"use.deprecated.format": False})
    context = SerializationContext(out, MessageField.VALUE)
    got = sorted((deserializer(v, context) for v in consume(broker, out, 20)), key=str)
    assert got == sorted(sent, key=str)


def test_avro_with_references_to_other_subjects_is_read_and_written(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    """Named types from two other subjects (one referencing the other): the source's type and
    values, and the sink's records, as confluent-kafka's serializers read and write them."""
    create_topic(broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    kind = {"type": "enum", "name": "Kind", "namespace": "shop.ref", "symbols": ["HOME", "WORK"]}
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "shop.ref",
        "fields": [{"name": "street", "type": "string"}, {"name": "kind", "type": "Kind"}],
    }
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "shop.ref",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "home", "type": "shop.ref.Address"},
            {"name": "others", "type": {"type": "array", "items": "Address"}},
            {"name": "work", "type": ["null", "Address"], "default": None},
        ],
    }
    kind_subject, address_subject = f"{topic}-kind", f"{topic}-address"
    registry.register_schema(kind_subject, Schema(json.dumps(kind), "AVRO"))
    registry.register_schema(
        address_subject,
        Schema(json.dumps(address), "AVRO", [SchemaReference("shop.ref.Kind", kind_subject, 1)]),
    )
    schema = Schema(
        json.dumps(customer),
        "AVRO",
        [SchemaReference("shop.ref.Address", address_subject, 1)],
    )
    registry.register_schema(f"{topic}-value", schema)
    serializer = AvroSerializer(
        registry, schema, conf={"auto.register.schemas": False, "use.latest.version": True}
    )
    sent = [
        {
            "name": f"customer {i}",
            "home": {"street": f"{i} High St", "kind": "HOME"},
            "others": [{"street": f"{j} Low St", "kind": "WORK"} for j in range(i % 3)],
            "work": None if i % 2 else {"street": f"{i} Mill Rd", "kind": "WORK"},
        }
        for i in range(30)
    ]
    produce(broker, topic, serializer, sent)

    df = typed_read(spark, broker, topic, valueFormat="avro")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<name:string,home:struct<street:string,kind:string>,"
        "others:array<struct<street:string,kind:string>>,work:struct<street:string,kind:string>>"
    )
    assert rows(df) == sent

    out = f"{topic}-out"
    create_topic(broker.bootstrap, out, 1)
    _write(df.select("value"), broker, out, valueFormat="avro", valueSubject=f"{topic}-value")
    written = consume(broker, out, len(sent))
    schema_id = registry.get_latest_version(f"{topic}-value").schema_id
    assert schema_id is not None
    assert {v[1:5] for v in written} == {schema_id.to_bytes(4, "big")}
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_url(broker)}))
    context = SerializationContext(out, MessageField.VALUE)
    assert [deserializer(v, context) for v in written] == sent


def test_a_subject_in_a_schema_context_is_read_with_that_contexts_ids(
    spark: Any, broker: RunningBroker, topic: str
) -> None:
    """The values' ids are the context's own (id 1 of .typed is not the default context's
    id 1): the source reads each id in its reader subject's context."""
    create_topic(broker.bootstrap, topic, 1)
    registry = SchemaRegistryClient({"url": registry_url(broker)})
    registry.register_schema(f"{topic}-plain", Schema('"string"', "AVRO"))  # a default id
    context = ":.typed" + topic.replace("-", "").replace(".", "")[-20:]
    subject = f"{context}:{topic}-value"

    def in_context(ctx: SerializationContext | None, record_name: str | None) -> str:
        return subject

    v1 = {"type": "record", "name": "Ctx", "fields": [{"name": "n", "type": "long"}]}
    v2 = {
        "type": "record",
        "name": "Ctx",
        "fields": [
            {"name": "n", "type": "long"},
            {"name": "s", "type": "string", "default": "none"},
        ],
    }
    for schema, values in ((v1, [{"n": 1}, {"n": 2}]), (v2, [{"n": 3, "s": "three"}])):
        serializer = AvroSerializer(
            registry, json.dumps(schema), conf={"subject.name.strategy": in_context}
        )
        produce(broker, topic, serializer, values)
    assert registry.get_latest_version(subject).schema_id == 2
    # Read by v2: the values of id 1 are resolved from the context's id 1, the writer's.
    df = typed_read(spark, broker, topic, valueFormat="avro", valueSubject=subject)
    assert rows(df) == [{"n": 1, "s": "none"}, {"n": 2, "s": "none"}, {"n": 3, "s": "three"}]
