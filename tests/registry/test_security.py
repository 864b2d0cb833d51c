"""The registry over TLS with HTTP basic authentication against the broker's users: PLAIN
users of sasl.jaas.config, SCRAM credentials of the metadata store, super.users for settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from odradek.security.scram import SCRAM_SHA_256, make_credential
from odradek.testing import RunningBroker, TestCertificateAuthority, tls_broker_settings
from tests.cli.support import odradek

from .conftest import registry_url

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningBroker, str]]:
    ca = TestCertificateAuthority(tmp_path_factory.mktemp("certs"))
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    settings = {
        "schema.registry.listener": "https://127.0.0.1:0",
        "schema.registry.authentication.method": "BASIC",
        "sasl.jaas.config": JAAS,
        "super.users": "User:admin",
        **tls_broker_settings(ca, server),
    }
    broker = RunningBroker(tmp_path_factory.mktemp("odradek"), settings).start()
    try:
        assert broker.broker is not None and broker.broker.store is not None
        credential = make_credential(SCRAM_SHA_256, "carol-secret", iterations=4096)
        store = broker.broker.store
        broker.call(store.set_user_configs("carol", {SCRAM_SHA_256: credential.to_kafka()}))
        yield broker, str(ca.ca_file)
    finally:
        broker.stop()


def test_tls_and_basic_authentication(secured: tuple[RunningBroker, str]) -> None:
    broker, ca_file = secured
    url = registry_url(broker).replace("http://", "https://")

    def get(path: str, auth: tuple[str, str] | None) -> requests.Response:
        return requests.get(url + path, auth=auth, verify=ca_file, timeout=30)

    missing = get("/subjects", None)
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"].startswith("Basic")
    assert get("/subjects", ("alice", "wrong")).status_code == 401
    assert get("/subjects", ("carol", "wrong")).status_code == 401
    assert get("/subjects", ("nobody", "x")).status_code == 401

    alice = SchemaRegistryClient(
        {"url": url, "basic.auth.user.info": "alice:alice-secret", "ssl.ca.location": ca_file}
    )
    schema_id = alice.register_schema("s", Schema('"int"', "AVRO"))
    carol = SchemaRegistryClient(
        {"url": url, "basic.auth.user.info": "carol:carol-secret", "ssl.ca.location": ca_file}
    )
    assert carol.get_schema(schema_id).schema_str == '"int"'

    # Only super users change compatibility levels and modes.
    with pytest.raises(SchemaRegistryError) as denied:
        alice.set_compatibility(level="NONE")
    assert denied.value.http_status_code == 403 and denied.value.error_code == 40301
    admin = SchemaRegistryClient(
        {"url": url, "basic.auth.user.info": "admin:admin-secret", "ssl.ca.location": ca_file}
    )
    admin.set_compatibility(level="NONE")
    assert carol.get_compatibility() == "NONE"


def test_the_command_line_with_tls_and_credentials(secured: tuple[RunningBroker, str]) -> None:
    broker, ca_file = secured
    url = registry_url(broker).replace("http://", "https://")
    common = ("--registry", url, "--ca-file", ca_file)
    denied = odradek("schemas", "list", *common, check=False)
    assert denied.returncode == 1 and "Unauthorized (error 401)" in denied.stderr
    registered = odradek(
        "schemas", "register", "--subject", "t", "--schema", '"int"', *common,
        "--basic-auth", "carol:carol-secret",
    )  # fmt: skip
    assert registered.stdout == "t: version 1, id 1\n"
