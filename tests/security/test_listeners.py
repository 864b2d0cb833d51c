"""Listener settings under Kafka's names: names, protocols, advertised addresses, per-listener
settings, and the TLS context they make."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from odradek.config import BrokerConfig, ConfigError, ListenerSpec
from odradek.security.listeners import Listener
from odradek.testing import TestCertificateAuthority, tls_broker_settings


def test_listener_names_protocols_and_advertised_addresses() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://0.0.0.0:9092,SSL://:9093,INTERNAL://10.0.0.1:9094",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SASL_SSL",
            "advertised.listeners": "SSL://kafka.example:443,INTERNAL://10.0.0.1:9094",
            "inter.broker.listener.name": "internal",
        }
    )
    assert config.listener_specs() == [
        ListenerSpec("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092),
        ListenerSpec("SSL", "SSL", "0.0.0.0", 9093),
        ListenerSpec("INTERNAL", "SASL_SSL", "10.0.0.1", 9094),
    ]
    assert config.advertised_specs() == {
        "SSL": ("kafka.example", 443),
        "INTERNAL": ("10.0.0.1", 9094),
    }
    assert config.inter_broker_listener() == "INTERNAL"
    # The old single-listener accessors still answer for the first listener.
    assert config.listener == ("0.0.0.0", 9092)


@pytest.mark.parametrize(
    ("props", "complaint"),
    [
        ({"listeners": "CUSTOM://:1"}, "no security protocol"),
        ({"listeners": "SSL://:1,SSL://:2"}, "appears twice"),
        ({"listener.security.protocol.map": "A:TLS"}, "is not NAME:"),
        ({"advertised.listeners": "SSL://h:1"}, "not a listener"),
        ({"inter.broker.listener.name": "SSL"}, "not a listener"),
    ],
)
def test_bad_listener_settings(props: dict[str, str], complaint: str) -> None:
    config = BrokerConfig(props)
    with pytest.raises(ConfigError, match=complaint):
        config.listener_specs()
        config.advertised_specs()
        config.inter_broker_listener()


def test_tls_context_from_pem_files(tmp_path: Path) -> None:
    ca = TestCertificateAuthority(tmp_path)
    server = ca.issue("broker", {"CN": "localhost"}, server=True, key_password="k3y")
    spec = ListenerSpec("SSL", "SSL", "127.0.0.1", 0)
    props = tls_broker_settings(ca, server, "SSL") | {
        "listener.name.ssl.ssl.key.password": "k3y",
        "listener.name.ssl.ssl.client.auth": "required",
    }
    listener = Listener.from_config(BrokerConfig(props), spec, lambda u, m: None)
    assert listener.ssl_context is not None
    assert listener.ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert listener.sasl is None
    wrong_password = props | {"listener.name.ssl.ssl.key.password": "nope"}
    with pytest.raises(ConfigError, match="TLS settings of listener SSL"):
        Listener.from_config(BrokerConfig(wrong_password), spec, lambda u, m: None)
    with pytest.raises(ConfigError, match="sets neither"):
        Listener.from_config(BrokerConfig({}), spec, lambda u, m: None)


def test_inline_pem_key_store(tmp_path: Path) -> None:
    ca = TestCertificateAuthority(tmp_path)
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    props = {
        "ssl.keystore.key": server.key_file.read_text(),
        "ssl.keystore.certificate.chain": server.cert_file.read_text(),
    }
    spec = ListenerSpec("SSL", "SSL", "127.0.0.1", 0)
    assert Listener.from_config(BrokerConfig(props), spec, lambda u, m: None).ssl_context
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["ca.pem", "broker.crt", "broker.key", "broker.keystore.pem"]
    )
