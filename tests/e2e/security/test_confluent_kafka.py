"""confluent-kafka (librdkafka) over SSL, mutual TLS, SASL_SSL with PLAIN and SCRAM-SHA-512, and
SASL_PLAINTEXT with SCRAM-SHA-256, against one broker with all those listeners."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from .conftest import SecureBroker

TIMEOUT_S = 15


def ssl_config(secure: SecureBroker, listener: str = "SSL", **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": secure.bootstrap(listener),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.ca.ca_file),
        **extra,
    }


def sasl_config(
    secure: SecureBroker, mechanism: str, user: str, password: str, listener: str = "SASL_SSL"
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": secure.bootstrap(listener),
        "security.protocol": listener,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if listener == "SASL_SSL":
        config["ssl.ca.location"] = str(secure.ca.ca_file)
    return config


def round_trip(config: dict[str, Any], count: int = 50, size: int = 100) -> None:
    """Produce ``count`` records to a new topic and read them back, both over ``config``."""
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "linger.ms": 5, "message.timeout.ms": TIMEOUT_S * 1000})
    errors: list[Any] = []
    for i in range(count):
        producer.produce(
            topic,
            value=f"{i:08d}".encode().ljust(size, b"x"),
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    try:
        for message in iter(lambda: consumer.poll(TIMEOUT_S), None):
            assert message.error() is None, message.error()
            values.append(message.value())
            if len(values) == count:
                break
    finally:
        consumer.close()
    assert [v[:8] for v in values] == [f"{i:08d}".encode() for i in range(count)]
    assert all(len(v) == size for v in values)


def test_produce_and_consume_over_ssl(secure: SecureBroker) -> None:
    # Large enough records that a Fetch response would use sendfile on a plaintext listener.
    round_trip(ssl_config(secure), count=200, size=1000)


def test_metadata_answers_with_the_listener_asked(secure: SecureBroker) -> None:
    for listener in ("PLAINTEXT", "SSL"):
        plain = {"bootstrap.servers": secure.bootstrap(listener)}
        config = ssl_config(secure) if listener == "SSL" else plain
        metadata = AdminClient(config).list_topics(timeout=TIMEOUT_S)
        [broker] = metadata.brokers.values()
        assert f"{broker.host}:{broker.port}" == secure.bootstrap(listener)


def test_mutual_tls(secure: SecureBroker) -> None:
    round_trip(
        ssl_config(
            secure,
            "MTLS",
            **{
                "ssl.certificate.location": str(secure.client.cert_file),
                "ssl.key.location": str(secure.client.key_file),
            },
        )
    )


def test_sasl_ssl_plain(secure: SecureBroker) -> None:
    round_trip(sasl_config(secure, "PLAIN", "alice", "alice-secret"))


def test_sasl_ssl_scram_sha_512(secure: SecureBroker) -> None:
    round_trip(sasl_config(secure, "SCRAM-SHA-512", "carol", "carol-secret"))


def test_sasl_plaintext_scram_sha_256(secure: SecureBroker) -> None:
    round_trip(sasl_config(secure, "SCRAM-SHA-256", "carol", "carol-secret", "SASL_PLAINTEXT"))


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("PLAIN", "alice", "wrong"), ("SCRAM-SHA-512", "carol", "wrong"), ("PLAIN", "nobody", "x")],
)
def test_wrong_password_is_refused(
    secure: SecureBroker, mechanism: str, user: str, password: str
) -> None:
    errors: list[KafkaError] = []
    config = sasl_config(secure, mechanism, user, password)
    admin = AdminClient({**config, "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(1)  # error_cb runs from poll
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("Authentication failed" in e.str() for e in errors), errors


def test_passwords_are_not_described(secure: SecureBroker) -> None:
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    resource = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert configs["ssl.keystore.location"].value is not None
    for name in ("ssl.key.password", "sasl.jaas.config", "ssl.keystore.key"):
        assert configs[name].is_sensitive and configs[name].value is None
    assert configs["sasl.jaas.config"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not any("alice-secret" in (c.value or "") for c in configs.values())
