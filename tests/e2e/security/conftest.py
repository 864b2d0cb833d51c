"""One broker per module with every kind of listener, and a test CA for its certificates.

Listeners: ``PLAINTEXT``, ``SSL`` (client certificates requested, so mutual TLS and plain TLS
clients both connect), ``SASL_SSL`` (PLAIN and SCRAM-SHA-512, PLAIN users from Kafka's JAAS
syntax), ``SASL_PLAINTEXT`` (SCRAM-SHA-256 only), and ``MTLS`` (an SSL listener under a custom
name that requires client certificates). Every port is picked by the OS.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.security.scram import make_credential
from odradek.testing import (
    IssuedCertificate,
    RunningBroker,
    TestCertificateAuthority,
    tls_broker_settings,
)

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USERS = {"carol": "carol-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{name}="{password}"' for name, password in PLAIN_USERS.items())
    + ";"
)


@dataclass(frozen=True)
class SecureBroker:
    broker: RunningBroker
    ca: TestCertificateAuthority
    client: IssuedCertificate  # CN=alice,OU=eng,O=odradek
    expired: IssuedCertificate
    stranger: IssuedCertificate  # signed by another CA

    def bootstrap(self, listener: str) -> str:
        return self.broker.listener_bootstrap(listener)


def secure_settings(ca: TestCertificateAuthority, server: IssuedCertificate) -> dict[str, str]:
    return {
        "listeners": (
            "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
            "SASL_PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,MTLS:SSL"
        ),
        **tls_broker_settings(ca, server),
        "listener.name.ssl.ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        # Unused (the listener's own entry wins) but set, so that DescribeConfigs has a secret
        # to hide.
        "sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "connection.failed.authentication.delay.ms": "50",
        "num.partitions": "1",
    }


def add_scram_users(broker: RunningBroker) -> None:
    """SCRAM credentials written straight into the broker's metadata store (the handler and
    CLI tests go through AlterUserScramCredentials instead)."""
    assert broker.broker is not None
    store = broker.broker.store
    assert store is not None
    for user, password in SCRAM_USERS.items():
        broker.call(
            store.set_user_configs(
                user,
                {
                    mechanism: make_credential(mechanism, password).to_kafka()
                    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                },
            )
        )


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    certs: Path = tmp_path_factory.mktemp("certs")
    ca = TestCertificateAuthority(certs)
    server = ca.issue("broker", {"O": "odradek", "CN": "localhost"}, server=True)
    client = ca.issue("alice", {"O": "odradek", "OU": "eng", "CN": "alice"})
    expired = ca.issue("expired", {"CN": "old"}, expired=True)
    stranger = TestCertificateAuthority(certs / "other", "another CA").issue(
        "stranger", {"CN": "mallory"}
    )
    data = tmp_path_factory.mktemp("secure-broker")
    broker = RunningBroker(data, secure_settings(ca, server)).start()
    try:
        add_scram_users(broker)
        yield SecureBroker(broker, ca, client, expired, stranger)
    finally:
        broker.stop()


@contextlib.contextmanager
def two_brokers(
    tmp_path: Path, zookeeper_connect: str, **settings: str
) -> Iterator[list[RunningBroker]]:
    """Brokers 1 and 2 of a ZooKeeper cluster in this process, each with ``settings`` (the
    keys' underscores are dots), stopped when done."""
    brokers: list[RunningBroker] = []
    try:
        for broker_id in (1, 2):
            config = {
                "broker.id": str(broker_id),
                "zookeeper.connect": zookeeper_connect,
                **{key.replace("_", "."): value for key, value in settings.items()},
            }
            brokers.append(RunningBroker(tmp_path / f"b{broker_id}", config).start())
        yield brokers
    finally:
        for broker in brokers:
            broker.stop()
