"""The click-stream example (examples/clickstream): its counts are right on a known input."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream"


def test_page_views_per_minute_reach_the_topic_and_parquet(spark: Any, tmp_path: Path) -> None:
    sys.path.insert(0, str(EXAMPLE))
    try:
        run_embedded = importlib.import_module("run_embedded")
        counts = run_embedded.run(clicks=600, out=tmp_path, partitions=2)
    finally:
        sys.path.remove(str(EXAMPLE))
    expected = counts["expected"]
    assert sum(expected.values()) == 600
    assert len({minute for minute, _ in expected}) == 5  # five finished minutes
    assert counts["topic"] == expected
    assert counts["parquet"] == expected
