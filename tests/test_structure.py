"""The package's shape, checked: the middle layers stay readable and keep their seams.

- No function in ``server/``, ``coordinator/`` or ``cluster/`` is above a cyclomatic complexity
  of 25 (radon's count, which adds a branch for each boolean operator).
- No API handler imports storage: handlers decode, authorize, delegate and encode, and what they
  delegate to (the partition, the replica manager) hides the log.
- kazoo is imported only by the ZooKeeper engine of the metadata store.
- security, quotas, protocol and storage import nothing of the middle layers, and neither they
  nor the settings (config.py) import the client.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from radon.complexity import cc_visit

import odradek

PACKAGE = Path(odradek.__file__).parent
MAX_COMPLEXITY = 25
# The ZooKeeper engine: the one place that may hold kazoo objects. Membership (broker
# registration and the controller election) still calls kazoo itself, on kazoo's threads; it is
# to move behind named store methods as the controller runtime did.
KAZOO_HOME = "cluster/metadata/zookeeper/"


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (PACKAGE / folder).rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def imported_modules(path: Path) -> set[str]:
    """Every absolute module ``path`` imports, at any level (``TYPE_CHECKING`` blocks and
    function bodies included); ``from a import b`` counts ``a`` and ``a.b``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("folder", ["server", "coordinator", "cluster"])
def test_no_function_of_the_middle_layers_is_too_complex(folder: str) -> None:
    too_complex = [
        f"{_name(path)}:{block.lineno} {block.fullname} ({block.complexity})"
        for path in _sources(folder)
        for block in cc_visit(path.read_text())
        if block.complexity > MAX_COMPLEXITY
    ]
    assert too_complex == [], f"above {MAX_COMPLEXITY}: split them"


def test_no_handler_imports_storage() -> None:
    importers = [
        _name(path)
        for path in _sources("server/handlers")
        if any(
            m == "odradek.storage" or m.startswith("odradek.storage.")
            for m in imported_modules(path)
        )
    ]
    assert importers == []


def test_only_the_zookeeper_engine_imports_kazoo() -> None:
    importers = [
        _name(path)
        for path in _sources(".")
        if not _name(path).startswith(KAZOO_HOME)
        and any(m.split(".")[0] == "kazoo" for m in imported_modules(path))
    ]
    assert importers == []


@pytest.mark.parametrize("folder", ["security", "quotas", "protocol", "storage"])
def test_the_bottom_layers_import_nothing_of_the_middle(folder: str) -> None:
    middle = ("odradek.cluster", "odradek.coordinator", "odradek.server", "odradek.console")
    importers = [
        f"{_name(path)} imports {m}"
        for path in _sources(folder)
        for m in sorted(imported_modules(path))
        if m.startswith(middle)
    ]
    assert importers == []


def test_the_settings_and_the_bottom_layers_import_nothing_of_the_client() -> None:
    # config.py checks client properties files (console.client.config) with the settings
    # parser of security/, which the client uses in turn: the client sits above both.
    importers = [
        f"{_name(path)} imports {m}"
        for path in [*_sources("security", "quotas", "protocol", "storage"), PACKAGE / "config.py"]
        for m in sorted(imported_modules(path))
        if m.startswith("odradek.client")
    ]
    assert importers == []
