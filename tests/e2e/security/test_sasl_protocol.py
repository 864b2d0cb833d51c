"""SaslHandshake and SaslAuthenticate on the wire (KIP-152, KIP-368), over a SASL_PLAINTEXT
listener that enables SCRAM-SHA-256 only: what is served before authentication, refusals and the
delayed close, the principal a connection gets, and re-authentication on a manual clock."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from odradek.client.security import ScramClient
from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.security.scram import SCRAM_SHA_256
from odradek.testing import RunningBroker
from tests.server.conftest import KafkaConnection, assert_broker_serves

from .conftest import SecureBroker, add_scram_users

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, API_VERSIONS = 17, 36, 3, 18


def scram_login(
    connection: KafkaConnection, password: str = "carol-secret", version: int = 2
) -> tuple[int, int]:
    """Handshake and SCRAM-SHA-256 as carol; (error code of the last round, session lifetime)."""
    handshake = connection.request(SASL_HANDSHAKE, 1, mechanism=SCRAM_SHA_256)
    assert handshake.error_code == ErrorCode.none
    assert list(handshake.mechanisms) == [SCRAM_SHA_256]
    client = ScramClient(SCRAM_SHA_256, "carol", password)
    first = connection.request(SASL_AUTHENTICATE, version, auth_bytes=client.first())
    assert first.error_code == ErrorCode.none
    final = connection.request(SASL_AUTHENTICATE, version, auth_bytes=client.step(first.auth_bytes))
    if final.error_code == ErrorCode.none:
        assert client.step(final.auth_bytes) is None
    lifetime = final.session_lifetime if version >= 1 else None
    return final.error_code, int(lifetime.total_seconds() * 1000) if lifetime is not None else 0


def test_scram_login_sets_the_principal(secure: SecureBroker) -> None:
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        versions = connection.request(
            API_VERSIONS, 3, client_software_name="t", client_software_version="1"
        )
        assert versions.error_code == ErrorCode.none
        assert scram_login(connection) == (ErrorCode.none, 0)
        metadata = connection.request(METADATA, 12, topics=None)
        [broker] = metadata.brokers
        assert f"{broker.host}:{broker.port}" == secure.bootstrap("SASL_PLAINTEXT")
        assert secure.broker.broker is not None
        sessions = {s.listener: s.principal for s in secure.broker.broker.sessions()}
        assert sessions["SASL_PLAINTEXT"] == "User:carol"


@pytest.mark.parametrize("version", [0, 2])
def test_sasl_authenticate_at_both_ends_of_its_range(secure: SecureBroker, version: int) -> None:
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        assert scram_login(connection, version=version) == (ErrorCode.none, 0)
        assert connection.request(METADATA, 12, topics=None).brokers


def test_requests_before_authentication_close_the_connection(secure: SecureBroker) -> None:
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        connection.send(METADATA, 12, topics=None)
        connection.assert_closed_by_broker()
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        answer = connection.request(SASL_AUTHENTICATE, 2, auth_bytes=b"n,,n=carol,r=abc")
        assert answer.error_code == ErrorCode.illegal_sasl_state
        connection.assert_closed_by_broker()


def test_mechanism_not_enabled(secure: SecureBroker, caplog: pytest.LogCaptureFixture) -> None:
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        answer = connection.request(SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(answer.mechanisms) == [SCRAM_SHA_256]
        connection.assert_closed_by_broker()
    assert "unsupported SASL mechanism 'PLAIN'" in caplog.text


def test_wrong_password_closes_after_the_delay(
    secure: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    bystander = KafkaConnection(secure.bootstrap("PLAINTEXT"))
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        code, _ = scram_login(connection, password="guess")
        answered = time.monotonic()
        assert code == ErrorCode.sasl_authentication_failed
        connection.assert_closed_by_broker()
        # connection.failed.authentication.delay.ms is 50 on this broker.
        assert time.monotonic() - answered >= 0.045
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in caplog.text
    with bystander:
        assert_broker_serves(secure.broker, bystander)


def test_sasl_handshake_on_a_plaintext_listener(secure: SecureBroker) -> None:
    with KafkaConnection(secure.bootstrap("PLAINTEXT")) as connection:
        answer = connection.request(SASL_HANDSHAKE, 1, mechanism="PLAIN")
        assert answer.error_code == ErrorCode.illegal_sasl_state
        # Nothing else changed: the connection still serves.
        assert connection.request(METADATA, 12, topics=None).brokers


@pytest.fixture
def reauth_broker(tmp_path: Path) -> RunningBroker:
    clock = ManualClock(1_000_000)
    broker = RunningBroker(
        tmp_path,
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": SCRAM_SHA_256,
            "connections.max.reauth.ms": "60000",
        },
        clock,
    ).start()
    add_scram_users(broker)
    return broker


def test_reauthentication(reauth_broker: RunningBroker) -> None:
    clock = reauth_broker.clock
    assert isinstance(clock, ManualClock)
    try:
        with KafkaConnection(reauth_broker.bootstrap) as connection:
            assert scram_login(connection) == (ErrorCode.none, 60_000)
            clock.advance(59_000)
            assert connection.request(METADATA, 12, topics=None).brokers
            # KIP-368: a client re-authenticates on the same connection before expiry...
            assert scram_login(connection) == (ErrorCode.none, 60_000)
            clock.advance(59_000)
            assert connection.request(METADATA, 12, topics=None).brokers
            # ...and one that does not is closed at its next request.
            clock.advance(1_000)
            connection.send(METADATA, 12, topics=None)
            connection.assert_closed_by_broker()
    finally:
        reauth_broker.stop()


def test_legacy_tokens_after_handshake_v0(secure: SecureBroker) -> None:
    """Kafka before 1.0: after SaslHandshake v0 the SCRAM messages are bare size-prefixed
    frames, answered the same way."""
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        handshake = connection.request(SASL_HANDSHAKE, 0, mechanism=SCRAM_SHA_256)
        assert handshake.error_code == ErrorCode.none
        client = ScramClient(SCRAM_SHA_256, "carol", "carol-secret")
        connection.send_raw(struct.pack(">i", len(client.first())) + client.first())
        server_first = bytes(connection.read_frame())
        final = client.step(server_first)
        connection.send_raw(struct.pack(">i", len(final)) + final)
        assert client.step(bytes(connection.read_frame())) is None
        assert connection.request(METADATA, 12, topics=None).brokers
    with KafkaConnection(secure.bootstrap("SASL_PLAINTEXT")) as connection:
        connection.request(SASL_HANDSHAKE, 0, mechanism=SCRAM_SHA_256)
        client = ScramClient(SCRAM_SHA_256, "carol", "wrong")
        connection.send_raw(struct.pack(">i", len(client.first())) + client.first())
        final = client.step(bytes(connection.read_frame()))
        connection.send_raw(struct.pack(">i", len(final)) + final)
        connection.assert_closed_by_broker()
