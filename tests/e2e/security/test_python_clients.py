"""kafka-python and aiokafka over SSL, mutual TLS, SASL_SSL with PLAIN and SCRAM-SHA-512."""

from __future__ import annotations

import asyncio
import ssl
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaConnectionError, SaslAuthenticationFailed
from aiokafka.helpers import create_ssl_context
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaError

from .conftest import SecureBroker

TIMEOUT_S = 15
COUNT = 30
# Mechanism, user and password of each SASL case (users of the module's broker).
LOGINS = {
    "plain": ("PLAIN", "alice", "alice-secret"),
    "scram": ("SCRAM-SHA-512", "carol", "carol-secret"),
}


def _values(topic: str) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(COUNT)]


# -- kafka-python ---------------------------------------------------------------------------------


def kafka_python_config(secure: SecureBroker, kind: str) -> dict[str, Any]:
    tls = {"ssl_cafile": str(secure.ca.ca_file), "ssl_check_hostname": True}
    if kind == "ssl":
        return {"bootstrap_servers": secure.bootstrap("SSL"), "security_protocol": "SSL", **tls}
    if kind == "mtls":
        return {
            "bootstrap_servers": secure.bootstrap("MTLS"),
            "security_protocol": "SSL",
            "ssl_certfile": str(secure.client.cert_file),
            "ssl_keyfile": str(secure.client.key_file),
            **tls,
        }
    mechanism, user, password = LOGINS[kind]
    return {
        "bootstrap_servers": secure.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        **tls,
    }


@pytest.mark.parametrize("kind", ["ssl", "mtls", "plain", "scram"])
def test_kafka_python(secure: SecureBroker, kind: str) -> None:
    config = kafka_python_config(secure, kind)
    topic = f"kp-{kind}-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**config, linger_ms=5)
    try:
        for value in _values(topic):
            producer.send(topic, value=value)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(**config, enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        consumer.assign([KafkaTopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = [message.value for _, message in zip(range(COUNT), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == _values(topic)


def test_kafka_python_wrong_password(
    secure: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    config = kafka_python_config(secure, "scram") | {"sasl_plain_password": "nope"}
    # kafka-python retries a failed login until its bootstrap timeout.
    with pytest.raises(KafkaError):
        KafkaProducer(**config, max_block_ms=3000, bootstrap_timeout_ms=3000)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text


# -- aiokafka -------------------------------------------------------------------------------------


def aiokafka_config(secure: SecureBroker, kind: str) -> dict[str, Any]:
    context: ssl.SSLContext = create_ssl_context(
        cafile=str(secure.ca.ca_file),
        certfile=str(secure.client.cert_file) if kind == "mtls" else None,
        keyfile=str(secure.client.key_file) if kind == "mtls" else None,
    )
    if kind in ("ssl", "mtls"):
        listener = "SSL" if kind == "ssl" else "MTLS"
        return {
            "bootstrap_servers": secure.bootstrap(listener),
            "security_protocol": "SSL",
            "ssl_context": context,
        }
    mechanism, user, password = LOGINS[kind]
    return {
        "bootstrap_servers": secure.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "ssl_context": context,
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


async def _aiokafka_round_trip(config: dict[str, Any], topic: str) -> list[bytes]:
    producer = AIOKafkaProducer(**config, linger_ms=5)
    await producer.start()
    try:
        for value in _values(topic):
            await producer.send(topic, value=value)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        **config, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.seek_to_beginning(TopicPartition(topic, 0))
        while len(got) < COUNT:
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), TIMEOUT_S)
            for records in batch.values():
                got.extend(r.value for r in records if r.value is not None)
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("kind", ["ssl", "mtls", "plain", "scram"])
def test_aiokafka(secure: SecureBroker, kind: str) -> None:
    topic = f"aio-{kind}-{uuid.uuid4().hex[:8]}"
    got = asyncio.run(_aiokafka_round_trip(aiokafka_config(secure, kind), topic))
    assert got == _values(topic)


def test_aiokafka_wrong_password(secure: SecureBroker) -> None:
    config = aiokafka_config(secure, "plain") | {"sasl_plain_password": "nope"}

    async def start() -> None:
        producer = AIOKafkaProducer(**config, request_timeout_ms=3000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises((SaslAuthenticationFailed, KafkaConnectionError)):
        asyncio.run(start())
