"""The client's TLS/SASL settings (Kafka's names) and its SASL mechanisms without a broker:
SCRAM-SHA-256 against RFC 7677's example exchange, PLAIN's one message, and the settings Spark
passes through as ``kafka.*`` options."""

from __future__ import annotations

import pytest

from odradek.client.core import ClientError
from odradek.client.security import PlainClient, ScramClient, sasl_client
from odradek.security.client_settings import ClientSecurity, ClientSettingsError
from odradek.spark.options import OptionError, WriteOptions


def test_scram_sha_256_follows_rfc_7677() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    client._nonce = "rOprNGfwEbeRWgbNEkqO"
    client._first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.step(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert client.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None


def test_scram_refuses_a_wrong_server_signature_or_nonce() -> None:
    client = ScramClient("SCRAM-SHA-512", "alice", "secret")
    first = client.first().decode()
    nonce = first.split("r=")[1]
    client.step(f"r={nonce}xyz,s=c2FsdA==,i=4096".encode())
    with pytest.raises(ClientError, match="signature"):
        client.step(b"v=AAAA")
    other = ScramClient("SCRAM-SHA-512", "alice", "secret")
    other.first()
    with pytest.raises(ClientError, match="nonce"):
        other.step(b"r=somebody-else,s=c2FsdA==,i=4096")


def test_plain_is_one_message() -> None:
    client = PlainClient("alice", "secret")
    assert client.first() == b"\0alice\0secret"
    assert client.step(b"") is None


def test_settings_by_kafkas_names() -> None:
    security = ClientSecurity.from_config(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="s3cr\\"et";',
            "ssl.truststore.location": "/tmp/ca.pem",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert (security.protocol, security.tls, security.sasl) == ("SASL_SSL", True, True)
    assert (security.username, security.password) == ("alice", 's3cr"et')
    assert (security.ca_file, security.check_hostname) == ("/tmp/ca.pem", False)
    assert isinstance(sasl_client(security), ScramClient)
    assert not ClientSecurity.from_config({}).tls
    with pytest.raises(ClientSettingsError, match="username"):
        ClientSecurity.from_config({"security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(ClientSettingsError, match=r"security\.protocol"):
        ClientSecurity.from_config({"security.protocol": "TLS"})
    with pytest.raises(ClientSettingsError, match=r"sasl\.jaas\.config"):
        ClientSecurity.from_config({"sasl.jaas.config": 'username="u" password="p";'})


def test_a_delegation_token_login_sends_tokenauth() -> None:
    security = ClientSecurity.from_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="tokenid" password="aG1hYw==" tokenauth="true";',
        }
    )
    assert security.token
    first = sasl_client(security).first().decode()
    assert first.startswith("n,,n=tokenid,r=") and first.endswith(",tokenauth=true")
    plain = ClientSecurity.from_config(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": "p"}
    )
    assert not plain.token


def test_spark_options_pass_security_through() -> None:
    options = WriteOptions.parse(
        {
            "kafka.bootstrap.servers": "h:9093",
            "topic": "t",
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.jaas.config": 'x required username="u" password="p";',
        }
    )
    assert (options.security.protocol, options.security.username) == ("SASL_PLAINTEXT", "u")
    with pytest.raises(OptionError):
        WriteOptions.parse(
            {"kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "SASL_SSL"}
        )
