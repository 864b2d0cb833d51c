"""SCRAM credentials in a ZooKeeper cluster: altered through one broker, they let the user log in
on the other once its change notification arrives, and deleted through the other, they stop
doing so on both; the logins read the brokers' credential caches, not ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from odradek.testing import RunningBroker, wait_until
from tests.e2e.security.conftest import two_brokers
from tests.e2e.security.test_scram_credentials import login_works

TIMEOUT_S = 20
MECHANISM = ScramMechanism.SCRAM_SHA_256


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_connect: str) -> Iterator[list[RunningBroker]]:
    with two_brokers(
        tmp_path,
        zookeeper_connect,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        inter_broker_listener_name="PLAINTEXT",
        sasl_enabled_mechanisms="SCRAM-SHA-256",
    ) as brokers:
        yield brokers


def logs_in(broker: RunningBroker, user: str, password: str) -> bool:
    return login_works(broker, user, password, "SCRAM-SHA-256", "SASL_PLAINTEXT")


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
