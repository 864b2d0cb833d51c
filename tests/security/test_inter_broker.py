"""The client security a broker uses towards the others: its inter-broker listener's TLS
settings and SASL login, under Kafka's config names."""

from __future__ import annotations

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.security.inter_broker import inter_broker_security

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="b-secret";'
)


def test_plaintext_needs_nothing() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://:1,SSL://:2"})
    assert inter_broker_security(config) is None


def test_sasl_ssl_inter_broker_listener() -> None:
    config = BrokerConfig(
        {
            "listeners": "CLIENT://:1,INTERNAL://:2",
            "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.truststore.location": "/etc/ca.pem",
            "listener.name.internal.ssl.keystore.location": "/etc/broker.pem",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS,
        }
    )
    security = inter_broker_security(config)
    assert security is not None
    assert (security.protocol, security.mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (security.username, security.password) == ("broker", "b-secret")
    assert security.ca_file == "/etc/ca.pem"
    assert security.cert_file == security.key_file == "/etc/broker.pem"
    assert security.check_hostname


def test_sasl_without_a_login_is_refused() -> None:
    config = BrokerConfig(
        {
            "listeners": "INTERNAL://:2",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.jaas.config": 'PlainLoginModule required user_broker="x";',
        }
    )
    with pytest.raises(ConfigError, match="needs username"):
        inter_broker_security(config)
