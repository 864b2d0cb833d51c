"""``odradek tables`` on a data directory whose catalog holds a topic's table."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.iceberg.support import SPEC
from tests.iceberg.support import rows_of as _rows
from tests.iceberg.support import table_store as _store

from .support import odradek, table_after


def test_list_and_describe(tmp_path: Path) -> None:
    store = _store(tmp_path)
    spec = replace(SPEC, topic_id="Zs7ZzzLnRTqxJnXGuB3XYA")
    assert store.commit(spec, 0, None, 10, _rows(0, range(10)), None)
    assert store.commit(spec, 2, None, 4, _rows(2, range(4)), None)

    listed = odradek("tables", "--data-dir", str(tmp_path), "list").stdout
    rows = table_after(listed, "TABLE")
    assert [(r["TABLE"], r["ROWS"], r["SNAPSHOTS"]) for r in rows] == [("odradek.t", "14", "2")]

    described = odradek("tables", "--data-dir", str(tmp_path), "describe", "t").stdout
    assert "committed offsets: 0=10, 2=4\n" in described
    assert "topic-id: Zs7ZzzLnRTqxJnXGuB3XYA\n" in described
    assert "partitioning: hour(kafka.timestamp)\n" in described
    as_json = json.loads(
        odradek(
            "tables", "--data-dir", str(tmp_path), "describe", "odradek.t", "--output", "json"
        ).stdout
    )
    assert as_json["offsets"] == {"0": 10, "2": 4}
    assert as_json["topic_id"] == "Zs7ZzzLnRTqxJnXGuB3XYA"
    assert [c["name"] for c in as_json["columns"]] == ["kafka", "key", "value"]

    missing = odradek("tables", "--data-dir", str(tmp_path), "describe", "nope", check=False)
    assert missing.returncode == 1 and "no table nope" in missing.stderr
