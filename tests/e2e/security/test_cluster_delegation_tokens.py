"""Delegation tokens in a ZooKeeper cluster: a token made through one broker logs its owner in on
the other once the token change notification reaches it; expired through that other broker, it
stops logging in on the first. A connection logged in with a token may not ask for tokens."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.client.core import ConnectionFailed
from odradek.client.security import ScramClient
from odradek.protocol.errors import ErrorCode
from odradek.security.scram import SCRAM_SHA_256, make_credential
from odradek.testing import RunningBroker, wait_until
from tests.e2e.security.conftest import two_brokers
from tests.server.conftest import KafkaConnection

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
CREATE, EXPIRE, DESCRIBE = 38, 40, 41


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_connect: str) -> Iterator[list[RunningBroker]]:
    with two_brokers(
        tmp_path,
        zookeeper_connect,
        listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        inter_broker_listener_name="PLAINTEXT",
        sasl_enabled_mechanisms=SCRAM_SHA_256,
        delegation_token_secret_key="cluster-secret",
    ) as brokers:
        first = brokers[0]
        assert first.broker is not None and first.broker.store is not None
        credential = make_credential(SCRAM_SHA_256, "alice-secret").to_kafka()
        first.call(first.broker.store.set_user_configs("alice", {SCRAM_SHA_256: credential}))
        yield brokers


def login(connection: KafkaConnection, user: str, password: str, token: bool = False) -> bool:
    handshake = connection.request(SASL_HANDSHAKE, 1, mechanism=SCRAM_SHA_256)
    assert handshake.error_code == ErrorCode.none
    client = ScramClient(SCRAM_SHA_256, user, password, token=token)
    first = connection.request(SASL_AUTHENTICATE, 2, auth_bytes=client.first())
    if first.error_code != ErrorCode.none:
        return False
    final = connection.request(SASL_AUTHENTICATE, 2, auth_bytes=client.step(first.auth_bytes))
    return bool(final.error_code == ErrorCode.none)


def logs_in(broker: RunningBroker, user: str, password: str, token: bool = False) -> bool:
    """A login on a connection of its own (a refused one is closed by the broker)."""
    try:
        with KafkaConnection(broker.listener_bootstrap("SASL_PLAINTEXT")) as connection:
            return login(connection, user, password, token)
    except ConnectionFailed:
        return False


def test_a_token_made_on_one_broker_logs_in_on_the_other(cluster: list[RunningBroker]) -> None:
    first, second = cluster
    # Credentials reach the brokers' caches through a change notification too.
    for broker in cluster:
        wait_until(lambda b=broker: logs_in(b, "alice", "alice-secret"), what="alice logs in")
    with KafkaConnection(first.listener_bootstrap("SASL_PLAINTEXT")) as alice:
        assert login(alice, "alice", "alice-secret")
        made = alice.request(
            CREATE,
            3,
            owner_principal_type=None,
            owner_principal_name=None,
            renewers=[],
            max_lifetime=-1,
        )
    assert made.error_code == ErrorCode.none
    password = base64.b64encode(made.hmac).decode()
    wait_until(
        lambda: logs_in(second, made.token_id, password, token=True), what="token on broker 2"
    )
    assert second.broker is not None
    with KafkaConnection(second.listener_bootstrap("SASL_PLAINTEXT")) as by_token:
        assert login(by_token, made.token_id, password, token=True)
        principals = {s.principal for s in second.broker.sessions() if s.sasl is not None}
        assert "User:alice" in principals
        # (Describe: its refusal carries no -1 timestamps, which kio's reader refuses.)
        refused = by_token.request(DESCRIBE, 3, owners=None)
        assert refused.error_code == ErrorCode.delegation_token_request_not_allowed

    with KafkaConnection(second.listener_bootstrap("SASL_PLAINTEXT")) as alice:
        assert login(alice, "alice", "alice-secret")
        expired = alice.request(EXPIRE, 2, hmac=made.hmac, expiry_time_period=-1)
    assert expired.error_code == ErrorCode.none
    wait_until(
        lambda: not logs_in(first, made.token_id, password, token=True),
        what="token gone on broker 1",
    )
