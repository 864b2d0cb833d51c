"""``odradek schemas`` against a broker serving the registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing import RunningBroker, running_broker

from .support import odradek, table_after


@pytest.fixture
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_broker(
        tmp_path_factory.mktemp("odradek"), schema_registry_listener="127.0.0.1:0"
    ) as broker:
        yield _url(broker)


def _url(broker: RunningBroker) -> str:
    assert broker.broker is not None and broker.broker.schema_registry is not None
    host, port = broker.broker.schema_registry.bound
    return f"http://{host}:{port}"


def schemas(registry: str, *args: str, check: bool = True) -> str:
    return odradek("schemas", *args, "--registry", registry, check=check).stdout


def test_register_list_get_compat_config_delete(registry: str, tmp_path: Path) -> None:
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    v2 = {**v1, "fields": [*v1["fields"], {"name": "b", "type": "int", "default": 0}]}
    bad = {**v1, "fields": [*v1["fields"], {"name": "c", "type": "int"}]}
    file = tmp_path / "v2.avsc"
    file.write_text(json.dumps(v2))

    assert schemas(registry, "register", "--subject", "r", "--schema", json.dumps(v1)) == (
        "r: version 1, id 1\n"
    )
    assert schemas(registry, "register", "--subject", "r", "--schema-file", str(file)) == (
        "r: version 2, id 2\n"
    )
    rows = table_after(schemas(registry, "list"), "SUBJECT")
    assert rows == [{"SUBJECT": "r", "VERSION": "2", "ID": "2", "TYPE": "AVRO"}]
    assert json.loads(schemas(registry, "get", "--subject", "r", "--version", "1")) == v1
    assert json.loads(schemas(registry, "get", "--id", "2")) == v2

    refused = odradek(
        "schemas", "compat", "--subject", "r", "--schema", json.dumps(bad),
        "--registry", registry, check=False,
    )  # fmt: skip
    assert refused.returncode == 1 and refused.stdout.startswith("incompatible")
    assert schemas(registry, "config") == "(global): BACKWARD\n"
    assert schemas(registry, "config", "--subject", "r", "--set", "none") == "r: NONE\n"
    assert schemas(registry, "compat", "--subject", "r", "--schema", json.dumps(bad)) == (
        "compatible\n"
    )
    assert schemas(registry, "config", "--subject", "r", "--delete") == "r: BACKWARD\n"

    assert schemas(registry, "delete", "--subject", "r", "--version", "1") == (
        "r: soft-deleted version(s) 1\n"
    )
    gone = odradek(
        "schemas", "get", "--subject", "r", "--version", "1", "--registry", registry, check=False
    )
    assert gone.returncode == 1 and "error 40402" in gone.stderr
    answer = json.loads(schemas(registry, "delete", "--subject", "r", "--output", "json"))
    assert answer == {"subject": "r", "versions": [2], "permanent": False}
    assert schemas(registry, "list") == "no subjects\n"
