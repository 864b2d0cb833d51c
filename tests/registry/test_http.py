"""The registry served by a real broker, driven by real clients over real sockets:
confluent-kafka's SchemaRegistryClient and Avro serializers, and plain HTTP for the error
bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.testing import RunningBroker

from .conftest import registry_url

TIMEOUT_S = 30


def user_schema(*extra_fields: dict[str, Any]) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "User",
            "namespace": "example",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "name", "type": "string"},
                *extra_fields,
            ],
        }
    )


def test_avro_round_trip_of_1000_records(registry_broker: RunningBroker) -> None:
    registry = SchemaRegistryClient({"url": registry_url(registry_broker)})
    serializer = AvroSerializer(registry, user_schema())
    deserializer = AvroDeserializer(registry)
    topic = "users"
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "linger.ms": 5})
    sent = [{"id": i, "name": f"user {i}"} for i in range(1000)]
    context = SerializationContext(topic, MessageField.VALUE)
    for user in sent:
        producer.produce(topic, value=serializer(user, context))
    assert producer.flush(TIMEOUT_S) == 0

    # A client with an empty cache, so that every id is looked up at the broker.
    fresh = AvroDeserializer(SchemaRegistryClient({"url": registry_url(registry_broker)}))
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
            assert message is not None, f"only {len(received)} records arrived"
            assert message.error() is None, message.error()
            value = message.value()
            assert value is not None and value[0] == 0  # Confluent's wire format: magic, id
            decoder = deserializer if len(received) % 2 else fresh
            received.append(decoder(value, context))
    finally:
        consumer.close()
    assert received == sent
    assert registry.get_subjects() == ["users-value"]


def test_json_schema_round_trip(registry_broker: RunningBroker) -> None:
    url = registry_url(registry_broker)
    registry = SchemaRegistryClient({"url": url})
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    serializer = JSONSerializer(json.dumps(schema), registry)
    deserializer = JSONDeserializer(None, schema_registry_client=registry)
    topic = "orders"
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap, "linger.ms": 5})
    sent = [{"id": i, "item": f"thing {i}"} for i in range(1000)]
    for order in sent:
        producer.produce(topic, value=serializer(order, context))
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
    latest = registry.get_latest_version("orders-value")
    assert latest.schema.schema_type == "JSON"

    # BACKWARD on a closed model: an optional property may come, a required one may not.
    optional = {**schema, "properties": {**schema["properties"], "note": {"type": "string"}}}
    assert registry.test_compatibility("orders-value", Schema(json.dumps(optional), "JSON"))
    required = {**optional, "required": ["id", "note"]}
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema("orders-value", Schema(json.dumps(required), "JSON"))
    assert refused.value.http_status_code == 409


def test_json_schema_with_a_reference(registry_broker: RunningBroker) -> None:
    registry = SchemaRegistryClient({"url": registry_url(registry_broker)})
    address = {
        "$id": "address.json",
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }
    registry.register_schema("address.json", Schema(json.dumps(address), "JSON"))
    customer = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "home": {"$ref": "address.json"}},
    }
    schema = Schema(
        json.dumps(customer), "JSON", [SchemaReference("address.json", "address.json", 1)]
    )
    serializer = JSONSerializer(schema, registry)
    context = SerializationContext("customers", MessageField.VALUE)
    sent = {"name": "ann", "home": {"city": "Lyon"}}
    encoded = serializer(sent, context)
    fresh = SchemaRegistryClient({"url": registry_url(registry_broker)})
    assert JSONDeserializer(None, schema_registry_client=fresh)(encoded, context) == sent
    latest = registry.get_latest_version("customers-value")
    assert [r.subject for r in latest.schema.references] == ["address.json"]


def test_backward_evolution_and_compatibility_levels(registry_broker: RunningBroker) -> None:
    registry = SchemaRegistryClient({"url": registry_url(registry_broker)})
    subject = "people-value"
    first = registry.register_schema(subject, Schema(user_schema(), "AVRO"))
    assert registry.get_compatibility() == "BACKWARD"

    with_default = Schema(user_schema({"name": "email", "type": "string", "default": ""}), "AVRO")
    assert registry.test_compatibility(subject, with_default) is True
    second = registry.register_schema(subject, with_default)
    assert second != first
    assert registry.get_latest_version(subject).version == 2

    # BACKWARD (Confluent's rule: the new schema reads data the latest wrote) refuses a new
    # required field; removing a field is FORWARD's concern (below).
    required = Schema(
        user_schema({"name": "email", "type": "string"}, {"name": "age", "type": "int"}), "AVRO"
    )
    assert registry.test_compatibility(subject, required) is False
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(subject, required)
    assert refused.value.http_status_code == 409
    assert refused.value.error_code == 409

    # Under FORWARD the old schemas must read the new one's data: removing the required "name"
    # is refused, adding a required field is not.
    without_name = Schema(
        json.dumps(
            {
                "type": "record",
                "name": "User",
                "namespace": "example",
                "fields": [
                    {"name": "id", "type": "long"},
                    {"name": "email", "type": "string", "default": ""},
                ],
            }
        ),
        "AVRO",
    )
    assert registry.test_compatibility(subject, without_name) is True  # BACKWARD: allowed
    registry.set_compatibility(subject, "FORWARD")
    assert registry.get_compatibility(subject) == "FORWARD"
    assert registry.test_compatibility(subject, without_name) is False
    assert registry.test_compatibility(subject, required) is True
    registry.set_compatibility(subject, "NONE")
    assert registry.register_schema(subject, without_name) > second
    assert registry.get_versions(subject) == [1, 2, 3]


def test_full_transitive_checks_every_version(registry_broker: RunningBroker) -> None:
    url = registry_url(registry_broker)
    registry = SchemaRegistryClient({"url": url})
    subject = "t-value"
    registry.set_compatibility(subject, "NONE")
    registry.register_schema(subject, Schema(user_schema(), "AVRO"))
    registry.register_schema(
        subject, Schema(user_schema({"name": "age", "type": "int", "default": 0}), "AVRO")
    )
    # v3 makes age required: against v2 alone each reads the other's data, but v1's data has no
    # age for v3 to read, so the transitive levels refuse it.
    v3 = Schema(user_schema({"name": "age", "type": "int"}), "AVRO")
    for level, allowed in (
        ("FULL", True),
        ("FULL_TRANSITIVE", False),
        ("BACKWARD", True),
        ("BACKWARD_TRANSITIVE", False),
        ("FORWARD_TRANSITIVE", True),
    ):
        registry.set_compatibility(subject, level)
        assert registry.test_compatibility_all_versions(subject, v3) is allowed, level
    registry.set_compatibility(subject, "FULL_TRANSITIVE")
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema(subject, v3)
    assert refused.value.http_status_code == 409
    body = {"schema": v3.schema_str}
    answer = requests.post(
        f"{url}/compatibility/subjects/{subject}/versions?verbose=true", json=body, timeout=30
    ).json()
    assert answer["is_compatible"] is False and answer["messages"]


def test_error_bodies(registry_broker: RunningBroker) -> None:
    url = registry_url(registry_broker)

    def call(method: str, path: str, body: object = None) -> tuple[int, Any]:
        response = requests.request(method, url + path, json=body, timeout=30)
        assert response.headers["Content-Type"].startswith("application/vnd.schemaregistry")
        return response.status_code, response.json()

    assert call("GET", "/subjects/none/versions") == (
        404,
        {"error_code": 40401, "message": "Subject 'none' not found."},
    )
    assert call("GET", "/schemas/ids/77")[1]["error_code"] == 40403
    assert call("POST", "/subjects/s/versions", {"schema": "{bad"})[1]["error_code"] == 42201
    assert call("POST", "/subjects/s/versions", {"schema": '"int"'}) == (200, {"id": 1})
    assert call("GET", "/subjects/s/versions/2")[1]["error_code"] == 40402
    assert call("GET", "/subjects/s/versions/zero")[1]["error_code"] == 42202
    assert call("GET", "/config/s")[1]["error_code"] == 40408
    assert call("PUT", "/config", {"compatibility": "SIDEWAYS"})[1]["error_code"] == 42203
    assert call("PUT", "/mode", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    assert call("GET", "/nothing/here")[0] == 404
    status, _ = call("POST", "/subjects/s", {"schema": '"string"'})
    assert status == 404
    assert call("POST", "/subjects/s", {"schema": '"int"'})[1]["version"] == 1
    assert call("GET", "/schemas/types")[1] == ["JSON", "PROTOBUF", "AVRO"]
    bad_json = requests.post(f"{url}/subjects/s/versions", data=b"{", timeout=30)
    assert bad_json.status_code == 400


def test_deletes_modes_and_references(registry_broker: RunningBroker) -> None:
    registry = SchemaRegistryClient({"url": registry_url(registry_broker)})
    registry.set_compatibility(level="NONE")
    registry.register_schema("a", Schema('"int"', "AVRO"))
    registry.register_schema("a", Schema('"long"', "AVRO"))
    assert registry.delete_version("a", 1) == 1
    assert registry.get_versions("a") == [2]
    with pytest.raises(SchemaRegistryError) as caught:
        registry.delete_subject("a", permanent=True)
    assert caught.value.error_code == 40405
    assert registry.delete_subject("a") == [2]
    assert registry.get_subjects() == []
    assert registry.delete_subject("a", permanent=True) == [1, 2]

    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "x",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    registry.register_schema("address", Schema(address, "AVRO"))
    person = Schema(
        json.dumps(
            {"type": "record", "name": "Person", "fields": [{"name": "home", "type": "x.Address"}]}
        ),
        "AVRO",
        [SchemaReference("x.Address", "address", 1)],
    )
    person_id = registry.register_schema("person", person)
    fetched = registry.get_schema(person_id)
    assert [r.subject for r in fetched.references] == ["address"]
    with pytest.raises(SchemaRegistryError) as caught:
        registry.delete_subject("address")
    assert caught.value.error_code == 42206

    assert registry.update_mode("person", "READONLY") == "READONLY"
    assert registry.get_mode("person") == "READONLY"
    with pytest.raises(SchemaRegistryError) as caught:
        registry.register_schema("person", Schema('"string"', "AVRO"))
    assert caught.value.error_code == 42205


def test_schemas_survive_a_restart(registry_broker: RunningBroker) -> None:
    registry = SchemaRegistryClient({"url": registry_url(registry_broker)})
    first = registry.register_schema("kept-value", Schema(user_schema(), "AVRO"))
    registry.set_compatibility("kept-value", "FULL")
    registry_broker.restart()
    again = SchemaRegistryClient({"url": registry_url(registry_broker)})
    assert again.get_schema(first).schema_str == json.dumps(
        json.loads(user_schema()), separators=(",", ":")
    )
    assert again.get_compatibility("kept-value") == "FULL"
    # Ids go on from those replayed.
    second = again.register_schema("other-value", Schema('"string"', "AVRO"))
    assert second == first + 1


def test_schema_contexts(registry_broker: RunningBroker) -> None:
    """Subjects qualified with a context (``:.team:...``) number their ids apart from the
    default context's; an id is looked up in the context of the subject asked about, as
    confluent-kafka's deserializer asks; ``/contexts`` lists the contexts."""
    url = registry_url(registry_broker)
    client = SchemaRegistryClient({"url": url})
    assert client.get_contexts() == ["."]
    plain = client.register_schema("orders-value", Schema('"string"', "AVRO"))
    team_subject = ":.team:orders-value"
    teamed = client.register_schema(team_subject, Schema(user_schema(), "AVRO"))
    assert plain == teamed == 1  # one id each, in two contexts
    assert client.get_contexts() == [".", ".team"]
    assert json.loads(client.get_schema(1, subject_name=team_subject).schema_str) == json.loads(
        user_schema()
    )
    assert SchemaRegistryClient({"url": url}).get_schema(1).schema_str == '"string"'
    assert client.get_latest_version(team_subject).schema_id == 1
    assert set(client.get_subjects()) == {"orders-value", team_subject}
    # The default context said plainly or qualified is one subject.
    assert client.get_latest_version(":.:orders-value").schema_id == 1
    # Ids only within their context: the team's second schema is its id 2.
    second = client.register_schema(":.team:other-value", Schema('"long"', "AVRO"))
    assert second == 2
    with pytest.raises(SchemaRegistryError) as caught:
        SchemaRegistryClient({"url": url}).get_schema(2)
    assert caught.value.http_status_code == 404
    answer = requests.get(f"{url}/schemas/ids/2/versions?subject=:.team:", timeout=TIMEOUT_S)
    assert answer.json() == [{"subject": ":.team:other-value", "version": 1}]

    def in_team(ctx: SerializationContext | None, record_name: str | None) -> str:
        assert ctx is not None
        return f":.team:{ctx.topic}-value"

    serializer = AvroSerializer(client, user_schema(), conf={"subject.name.strategy": in_team})
    deserializer = AvroDeserializer(
        SchemaRegistryClient({"url": url}), conf={"subject.name.strategy": in_team}
    )
    context = SerializationContext("orders", MessageField.VALUE)
    value = {"id": 7, "name": "seven"}
    framed = serializer(value, context)
    assert framed is not None and framed[1:5] == (1).to_bytes(4, "big")
    assert deserializer(framed, context) == value
