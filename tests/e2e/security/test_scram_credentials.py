"""SCRAM credentials managed over the wire (confluent-kafka's admin client and ``odradek users``),
used to log in over SASL_SSL, surviving a restart, and stored salted: no password anywhere in the
data directory."""

from __future__ import annotations

import subprocess
import sys
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

from odradek.testing import RunningBroker, TestCertificateAuthority, tls_broker_settings

TIMEOUT_S = 15
PASSWORDS = {"dave": "dave-pass-1234", "erin": "erin-pass-5678"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    certs = tmp_path_factory.mktemp("certs")
    ca = TestCertificateAuthority(certs)
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        **tls_broker_settings(ca, server),
    }
    running = RunningBroker(tmp_path_factory.mktemp("scram"), settings).start()
    running.ca_file = ca.ca_file  # type: ignore[attr-defined]
    try:
        yield running
    finally:
        running.stop()


def login_works(
    broker: RunningBroker, user: str, password: str, mechanism: str, listener: str = "SASL_SSL"
) -> bool:
    """Whether ``user`` logs in to ``broker``'s ``listener`` (refused: an authentication error)."""
    errors: list[KafkaError] = []
    config: dict[str, Any] = {
        "bootstrap.servers": broker.listener_bootstrap(listener),
        "security.protocol": listener,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "error_cb": errors.append,
    }
    if listener == "SASL_SSL":
        config["ssl.ca.location"] = str(broker.ca_file)  # type: ignore[attr-defined]
    admin = AdminClient(config)
    try:
        admin.list_topics(timeout=3)
    except KafkaException:
        admin.poll(1)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        return False
    return True


def odradek_users(broker: RunningBroker, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "odradek", "users", *args, "--bootstrap-server", broker.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
        check=True,
    )
    return done.stdout


def test_admin_client_alters_and_describes(broker: RunningBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), PASSWORDS["dave"].encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT_S)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(TIMEOUT_S)
    [info] = described.scram_credential_infos
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)
    assert login_works(broker, "dave", PASSWORDS["dave"], "SCRAM-SHA-512")
    assert not login_works(broker, "dave", PASSWORDS["dave"], "SCRAM-SHA-256")
    assert not login_works(broker, "dave", "not-it", "SCRAM-SHA-512")
    with pytest.raises(KafkaException) as missing:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(TIMEOUT_S)
    assert "does not exist" in str(missing.value)
    delete = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)
    with pytest.raises(KafkaException):
        for future in admin.alter_user_scram_credentials([delete]).values():
            future.result(TIMEOUT_S)


def test_cli_add_list_delete(broker: RunningBroker) -> None:
    output = odradek_users(
        broker,
        "add",
        "--user",
        "erin",
        "--mechanism",
        "SCRAM-SHA-256",
        "--mechanism",
        "SCRAM-SHA-512",
        stdin=PASSWORDS["erin"] + "\n",
    )
    assert "Credentials of user erin set." in output
    listed = odradek_users(broker, "list", "--user", "erin").splitlines()
    assert listed[0].split() == ["User", "Mechanism", "Iterations"]
    assert sorted(line.split() for line in listed[1:]) == [
        ["erin", "SCRAM-SHA-256", "4096"],
        ["erin", "SCRAM-SHA-512", "4096"],
    ]
    assert login_works(broker, "erin", PASSWORDS["erin"], "SCRAM-SHA-256")
    odradek_users(broker, "delete", "--user", "erin", "--mechanism", "SCRAM-SHA-256")
    assert not login_works(broker, "erin", PASSWORDS["erin"], "SCRAM-SHA-256")
    assert login_works(broker, "erin", PASSWORDS["erin"], "SCRAM-SHA-512")


def test_credentials_survive_restart_and_are_salted(broker: RunningBroker) -> None:
    odradek_users(broker, "add", "--user", "frank", "--password", "frank-pass-9012")
    broker.restart()
    assert login_works(broker, "frank", "frank-pass-9012", "SCRAM-SHA-512")
    assert "frank" in odradek_users(broker, "list")
    passwords = [*PASSWORDS.values(), "frank-pass-9012"]
    for path in Path(broker.data_dir).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(p.encode() in data for p in passwords), path
