"""The server package's modules import each other without a cycle, and none but the broker's own
reaches for the broker: handlers get the services object, not the Broker. A broker's start
imports no library of a feature it does not use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import odradek.server
from tests.test_structure import imported_modules

SERVER = Path(odradek.server.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(SERVER.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every odradek module ``path`` imports."""
    return {name for name in imported_modules(path) if name.startswith("odradek.")}


def _server_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SERVER.rglob("*.py")}
    return {name: _imports(path) & modules.keys() for name, path in modules.items()}


def test_only_the_broker_module_knows_the_broker() -> None:
    importers = {
        name for name, imported in _server_graph().items() if "odradek.server.broker" in imported
    }
    assert importers == set()


def test_the_server_package_has_no_import_cycle() -> None:
    graph = _server_graph()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(name) :], name]))
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


# Libraries of features a broker may not use, each a part of its start: imported only when the
# feature is (a schema of the type parsed, a signed OAUTHBEARER token checked, metrics served, a
# client's telemetry pushed, a certificate made). Brokers start by the hundred in the suites.
_FEATURE_LIBRARIES = (
    "avro",
    "jsonschema",
    "proto_schema_parser",
    "antlr4",
    "google.protobuf",
    "joserfc",
    "cryptography",
    "prometheus_client",
)

# The start of ``odradek serve`` (its command module, then a lone broker with its default
# schema registry), stopped again, in a process of its own; then what it imported.
_START = """
import asyncio, json, sys, tempfile
sys.modules["hypothesis"] = None  # as odradek.cli.entry does
import odradek.cli.main
from odradek.config import BrokerConfig
from odradek.server.broker import Broker

overrides = [f"log.dirs={tempfile.mkdtemp()}", "listeners=PLAINTEXT://127.0.0.1:0", *sys.argv[1:]]

async def run():
    broker = Broker(BrokerConfig.load(None, overrides), schema_registry_default=("127.0.0.1", 0))
    await broker.start()
    assert broker.bound[1] != 0
    await broker.stop()

asyncio.run(run())
print(json.dumps(sorted(sys.modules)))
"""


def _modules_of_a_broker_start(*overrides: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _START, *overrides],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _of(modules: set[str], libraries: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in libraries))


def test_a_broker_start_imports_no_library_of_a_feature_it_does_not_use() -> None:
    modules = _modules_of_a_broker_start()
    assert "odradek.registry.http" in modules  # the lone broker's registry is served
    assert _of(modules, _FEATURE_LIBRARIES) == []


def test_a_broker_that_serves_no_http_imports_no_web_server() -> None:
    modules = _modules_of_a_broker_start("schema.registry.listener=")
    assert _of(modules, ("aiohttp", *_FEATURE_LIBRARIES)) == []
