"""Authentication meets authorisation: the principals TLS and SASL give a connection are the ones
Kafka's authorizer checks. A super user (SASL PLAIN ``admin``) grants ACLs through confluent-kafka's
admin client; a SCRAM user and a mutual-TLS client are allowed exactly what their ACLs say."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from odradek.security.scram import make_credential
from odradek.testing import (
    IssuedCertificate,
    RunningBroker,
    TestCertificateAuthority,
    tls_broker_settings,
)

from .conftest import JAAS

TIMEOUT_S = 15
MTLS_PRINCIPAL = "User:CN=alice,OU=eng,O=odradek"


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RunningBroker, Path, IssuedCertificate]]:
    certs = tmp_path_factory.mktemp("certs")
    ca = TestCertificateAuthority(certs)
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    client = ca.issue("alice", {"O": "odradek", "OU": "eng", "CN": "alice"})
    settings = {
        "listeners": "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        **tls_broker_settings(ca, server),
    }
    broker = RunningBroker(tmp_path_factory.mktemp("authz"), settings).start()
    assert broker.broker is not None and broker.broker.store is not None
    broker.call(
        broker.broker.store.set_user_configs(
            "carol",
            {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "carol-secret").to_kafka()},
        )
    )
    try:
        yield broker, ca.ca_file, client
    finally:
        broker.stop()


def sasl(
    setup: tuple[RunningBroker, Path, IssuedCertificate], mechanism: str, user: str, password: str
) -> dict[str, Any]:
    broker, ca_file, _ = setup
    return {
        "bootstrap.servers": broker.listener_bootstrap("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(ca_file),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def mtls(setup: tuple[RunningBroker, Path, IssuedCertificate]) -> dict[str, Any]:
    broker, ca_file, client = setup
    return {
        "bootstrap.servers": broker.listener_bootstrap("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(ca_file),
        "ssl.certificate.location": str(client.cert_file),
        "ssl.key.location": str(client.key_file),
    }


def produce_one(config: dict[str, Any], topic: str) -> KafkaError | None:
    producer = Producer({**config, "message.timeout.ms": 5000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert len(outcome) == 1
    return outcome[0]


def test_principals_from_scram_and_mutual_tls_are_authorized(
    setup: tuple[RunningBroker, Path, IssuedCertificate],
) -> None:
    admin = AdminClient(sasl(setup, "PLAIN", "admin", "admin-secret"))
    allowed, other = f"ok-{uuid.uuid4().hex[:6]}", f"no-{uuid.uuid4().hex[:6]}"
    for future in admin.create_topics([NewTopic(allowed, 1, 1), NewTopic(other, 1, 1)]).values():
        future.result(TIMEOUT_S)
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            allowed,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for principal in ("User:carol", MTLS_PRINCIPAL)
        for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    for future in admin.create_acls(bindings).values():
        future.result(TIMEOUT_S)
    for config in (sasl(setup, "SCRAM-SHA-512", "carol", "carol-secret"), mtls(setup)):
        assert produce_one(config, allowed) is None
        refused = produce_one(config, other)
        assert refused is not None
        assert refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker = setup[0]
    assert broker.broker is not None
    log = broker.broker.topics.partition(other, 0)
    assert log is not None and log.log.log_end_offset == 0
