"""The server package's modules import each other without a cycle, and none but the broker's own
reaches for the broker: handlers get the services object, not the Broker."""

from __future__ import annotations

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
