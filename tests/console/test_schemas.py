"""The console's schema page and its API (odradek.console.schemas), against a real broker serving
the console (``metrics.listener``) and the schema registry (``schema.registry.listener``):
versions registered with confluent-kafka's SchemaRegistryClient, then seen through ``/api/schemas``
and in a real browser (Debian's chromium), subjects, versions, a version's text and a diff."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from odradek.console.api import ApiError
from odradek.console.schemas import RestRegistry, SchemaView, over_rest
from odradek.registry.client import RegistryClient
from odradek.testing import RunningBroker, TestCertificateAuthority, tls_broker_settings

from .support import browser_missing, drive, http, require_browser

SUBJECT = "orders-value"
V1 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "quantity", "type": "int", "default": 1},
    ],
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    running = RunningBroker(
        tmp_path_factory.mktemp("console-schemas"),
        {
            "metrics.listener": "127.0.0.1:0",
            "schema.registry.listener": "127.0.0.1:0",
            "num.partitions": "1",
        },
    ).start()
    try:
        assert running.broker is not None and running.broker.schema_registry is not None
        host, port = running.broker.schema_registry.bound
        registry = SchemaRegistryClient({"url": f"http://{host}:{port}"})
        ids = [registry.register_schema(SUBJECT, Schema(json.dumps(v), "AVRO")) for v in (V1, V2)]
        assert ids[0] != ids[1]
        registry.set_compatibility(SUBJECT, "FULL")
        registry.register_schema("other-value", Schema(json.dumps(V1), "AVRO"))
        yield running
    finally:
        running.stop()


def console_base(broker: RunningBroker) -> str:
    assert broker.broker is not None and broker.broker.metrics is not None
    return f"http://127.0.0.1:{broker.broker.metrics.bound[1]}"


def registry_url(broker: RunningBroker, scheme: str = "http") -> str:
    assert broker.broker is not None and broker.broker.schema_registry is not None
    return f"{scheme}://127.0.0.1:{broker.broker.schema_registry.bound[1]}"


def test_subjects_versions_and_levels(broker: RunningBroker) -> None:
    base = console_base(broker)
    registry = http(base, "GET", "/api/schemas").body
    assert registry["compatibility"] == "BACKWARD"
    subjects = {s["subject"]: s for s in registry["subjects"]}
    assert sorted(subjects) == ["orders-value", "other-value"]
    assert subjects[SUBJECT]["versions"] == [1, 2]
    assert subjects[SUBJECT]["compatibility"] == "FULL"
    assert subjects["other-value"]["compatibility"] == "BACKWARD"
    assert subjects[SUBJECT]["schema_type"] == "AVRO"
    # other-value registered the text of version 1: the same global id.
    first = http(base, "GET", f"/api/schemas/{SUBJECT}/versions/1").body
    assert subjects["other-value"]["id"] == first["id"]
    subject = http(base, "GET", f"/api/schemas/{SUBJECT}").body
    assert [v["version"] for v in subject["versions"]] == [1, 2]
    assert (subject["compatibility"], subject["subject_compatibility"]) == ("FULL", "FULL")
    assert json.loads(first["schema"]) == V1
    assert "\n" in first["schema"]  # indented, one member a line
    latest = http(base, "GET", f"/api/schemas/{SUBJECT}/versions/latest").body
    assert latest["version"] == 2
    assert json.loads(latest["schema"]) == V2


def test_a_diff_between_two_versions(broker: RunningBroker) -> None:
    base = console_base(broker)
    diff = http(base, "GET", f"/api/schemas/{SUBJECT}/diff?from=1&to=2").body["diff"]
    assert diff[:2] == [f"--- {SUBJECT} version 1", f"+++ {SUBJECT} version 2"]
    added = [line for line in diff[2:] if line.startswith("+")]
    removed = [line for line in diff[2:] if line.startswith("-")]
    assert any('"quantity"' in line for line in added)
    assert not any('"quantity"' in line for line in removed)
    same = http(base, "GET", f"/api/schemas/{SUBJECT}/diff?from=2&to=latest").body
    assert same["diff"] == []


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/api/schemas/no-such-subject", 404, "Subject 'no-such-subject' not found"),
        (f"/api/schemas/{SUBJECT}/versions/9", 404, "Version 9 not found"),
        (f"/api/schemas/{SUBJECT}/versions/x", 422, "x"),
        (f"/api/schemas/{SUBJECT}/diff?from=1", 400, "?from=VERSION&to=VERSION"),
        (f"/api/schemas/{SUBJECT}/nothing", 404, "no such API"),
    ],
)
def test_what_is_not_there(broker: RunningBroker, path: str, status: int, message: str) -> None:
    answer = http(console_base(broker), "GET", path)
    assert answer.status == status, answer.body
    assert message in answer.body["error"]


@pytest.mark.parametrize(
    "path",
    [
        [],
        [SUBJECT],
        ["other-value"],
        [SUBJECT, "versions", "1"],
        [SUBJECT, "versions", "latest"],
        [SUBJECT, "diff"],
    ],
)
def test_the_rest_api_gives_the_same_pages(broker: RunningBroker, path: list[str]) -> None:
    # What odradek console --schema-registry shows: the same as the broker's own console.
    query = {"from": "1", "to": "2"} if path[-1:] == ["diff"] else {}
    over_http = SchemaView(over_rest(RestRegistry(RegistryClient(registry_url(broker)))))
    in_process = http(
        console_base(broker),
        "GET",
        "/".join(["/api/schemas", *path]) + ("?from=1&to=2" if query else ""),
    )
    assert over_http.route("GET", path, query) == in_process.body


def test_the_rest_api_with_tls_and_credentials(tmp_path: Path) -> None:
    ca = TestCertificateAuthority(tmp_path / "certs")
    server = ca.issue("broker", {"CN": "localhost"}, server=True)
    settings = {
        "schema.registry.listener": "https://127.0.0.1:0",
        "schema.registry.authentication.method": "BASIC",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
        'required user_alice="alice secret";',
        **tls_broker_settings(ca, server),
    }
    running = RunningBroker(tmp_path / "data", settings).start()
    try:
        url, ca_file = registry_url(running, "https"), str(ca.ca_file)

        def ask(client: RegistryClient) -> dict[str, object]:
            answer: dict[str, object] = SchemaView(over_rest(RestRegistry(client))).route(
                "GET", [], {}
            )
            return answer

        alice = RegistryClient(url, basic_auth="alice:alice secret", ca_file=ca_file)
        assert ask(alice)["subjects"] == []
        with pytest.raises(ApiError) as refused:
            ask(RegistryClient(url, basic_auth="alice:wrong", ca_file=ca_file))
        assert refused.value.status == 401
        with pytest.raises(ApiError) as unverified:
            ask(RegistryClient(url, basic_auth="alice:alice secret"))
        assert unverified.value.status == 503
        assert "CERTIFICATE_VERIFY_FAILED" in unverified.value.message
    finally:
        running.stop()


def test_the_page_only_reads(broker: RunningBroker) -> None:
    answer = http(console_base(broker), "DELETE", f"/api/schemas/{SUBJECT}")
    assert answer.status == 405


def test_no_registry_beside_the_console(tmp_path: Path) -> None:
    running = RunningBroker(
        tmp_path, {"metrics.listener": "127.0.0.1:0", "schema.registry.listener": ""}
    ).start()
    try:
        answer = http(console_base(running), "GET", "/api/schemas")
        assert answer.status == 404
        assert "no schema registry" in answer.body["error"]
        if browser_missing() is None:
            seen = drive("noSchemas", console_base(running), tmp_path / "no-schemas")
            assert "--schema-registry" in seen["no_registry"]
            assert not seen["error_shown"]
    finally:
        running.stop()


def test_the_schema_page_in_a_browser(broker: RunningBroker, tmp_path: Path) -> None:
    require_browser()
    seen = drive("schemas", console_base(broker), tmp_path / "schemas", subject=SUBJECT)
    assert [row[0] for row in seen["subjects"]] == ["orders-value", "other-value"]
    assert seen["subjects"][0][1:3] == ["2", "2"]  # two versions, the latest 2
    assert seen["subjects"][0][5] == "FULL"
    assert seen["global_compatibility"] == "BACKWARD"
    assert [row[0] for row in seen["versions"]] == ["1", "2"]
    assert seen["subject_compatibility"] == "FULL"
    assert json.loads(seen["latest_text"]) == V2
    assert json.loads(seen["first_text"]) == V1
    diff = seen["diff"].splitlines()
    assert diff[:2] == [f"--- {SUBJECT} version 1", f"+++ {SUBJECT} version 2"]
    assert any(line.startswith("+") and '"quantity"' in line for line in diff[2:])
    assert seen["same_diff"] == "The two versions have the same text."
