"""SASL settings from Kafka's config names and JAAS syntax, and a connection's SASL state."""

from __future__ import annotations

import pytest

from odradek.client.security import ScramClient
from odradek.config import BrokerConfig, ConfigError
from odradek.security.sasl import SaslFailure, SaslSession, SaslSettings, parse_jaas
from odradek.security.scram import SCRAM_SHA_256, make_credential

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
    '  username="admin" password="admin-secret"\n'
    '  user_admin="admin-secret" user_alice="a \\"quoted\\" secret" unquoted=value;'
)


def test_parse_jaas() -> None:
    module, options = parse_jaas(JAAS)
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": 'a "quoted" secret',
        "unquoted": "value",
    }
    with pytest.raises(ConfigError):
        parse_jaas("PlainLoginModule maybe;")


def settings(**props: str) -> SaslSettings:
    credential = make_credential(SCRAM_SHA_256, "carol-secret")
    lookup = {("carol", SCRAM_SHA_256): credential}
    return SaslSettings.from_config(
        BrokerConfig(props), "SASL_SSL", lambda user, mechanism: lookup.get((user, mechanism))
    )


def test_settings_per_listener_with_fallback() -> None:
    found = settings(
        **{
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        }
    )
    assert found.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert found.plain_users == {"admin": "admin-secret", "alice": 'a "quoted" secret'}
    assert settings(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512"}).mechanisms == ("SCRAM-SHA-512",)
    # Kafka's default, GSSAPI, is not served: a SASL listener must name a mechanism it can use.
    with pytest.raises(ConfigError, match="no supported mechanism"):
        settings()


def test_plain_session() -> None:
    session = SaslSession(
        settings(**{"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": JAAS})
    )
    assert not session.handshake("SCRAM-SHA-256")
    assert session.handshake("PLAIN")
    with pytest.raises(SaslFailure, match="Invalid username or password"):
        session.authenticate(b"\0admin\0wrong", 0)
    assert session.failure is not None and not session.authenticated
    session = SaslSession(session.settings)
    session.handshake("PLAIN")
    for bad in (b"\0nobody\0admin-secret", b"other\0admin\0admin-secret", b"admin-secret"):
        with pytest.raises(SaslFailure):
            session.authenticate(bad, 0)
    session = SaslSession(session.settings)
    session.handshake("PLAIN")
    assert session.authenticate(b"\0admin\0admin-secret", 0) == (b"", True)
    assert session.principal == "User:admin" and session.expires_at_ms is None


def test_scram_session_and_reauthentication() -> None:
    session = SaslSession(
        settings(
            **{
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.sasl_ssl.connections.max.reauth.ms": "1000",
            }
        )
    )
    for now in (5_000, 5_900):
        assert session.handshake(SCRAM_SHA_256)
        client = ScramClient(SCRAM_SHA_256, "carol", "carol-secret")
        first, done = session.authenticate(client.first(), now)
        assert not done
        final, done = session.authenticate(client.step(first), now)
        assert done
        assert client.step(final) is None
        assert session.principal == "User:carol"
        assert session.expires_at_ms == now + 1000
        assert not session.expired(now + 999) and session.expired(now + 1000)
