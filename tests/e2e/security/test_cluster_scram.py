"""SCRAM credentials in a ZooKeeper cluster: altered through one broker, they let the user log in
on the other once its change notification arrives, and deleted through the other, they stop
doing so on both; the logins read the brokers' credential caches, not ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.testing import RunningBroker, wait_until

TIMEOUT_S = 20
MECHANISM = ScramMechanism.SCRAM_SHA_256


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_connect: str) -> Iterator[list[RunningBroker]]:
    brokers: list[RunningBroker] = []
    try:
        for broker_id in (1, 2):
            settings = {
                "broker.id": str(broker_id),
                "zookeeper.connect": zookeeper_connect,
                "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "inter.broker.listener.name": "PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            }
            brokers.append(RunningBroker(tmp_path / f"b{broker_id}", settings).start())
        yield brokers
    finally:
        for broker in brokers:
            broker.stop()


def logs_in(broker: RunningBroker, user: str, password: str) -> bool:
    errors: list[KafkaError] = []
    config: dict[str, Any] = {
        "bootstrap.servers": broker.listener_bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
        "error_cb": errors.append,
    }
    admin = AdminClient(config)
    try:
        admin.list_topics(timeout=3)
    except KafkaException:
        admin.poll(1)  # the errors reach error_cb here
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        return False
    return True


def test_a_credential_altered_on_one_broker_logs_in_on_the_other(
    cluster: list[RunningBroker],
) -> None:
    first, second = cluster
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "frank", ScramCredentialInfo(MECHANISM, 4096), b"frank-pass-1"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT_S)
    assert wait_until(lambda: logs_in(second, "frank", "frank-pass-1"), TIMEOUT_S)
    assert logs_in(first, "frank", "frank-pass-1")
    assert not logs_in(second, "frank", "wrong-pass")

    other = AdminClient({"bootstrap.servers": second.bootstrap})
    deletion = UserScramCredentialDeletion("frank", MECHANISM)
    for future in other.alter_user_scram_credentials([deletion]).values():
        future.result(TIMEOUT_S)
    assert wait_until(lambda: not logs_in(first, "frank", "frank-pass-1"), TIMEOUT_S)
    assert not logs_in(second, "frank", "frank-pass-1")
