"""``odradek bench`` end to end at tiny sizes: every scenario runs and reports sane figures.

Behaviour, not speed: nothing here compares a figure with a target. The run starts its own broker
child processes, load workers and (for recovery) kills brokers with SIGKILL, as a full run does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from odradek.bench.options import SCENARIOS

pytestmark = pytest.mark.slow

RECORDS = 5000
RATE = 2000
DURATION_S = 1.0


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    directory = tmp_path_factory.mktemp("bench")
    results = directory / "results" / "run.json"
    command = [
        sys.executable,
        "-m",
        "odradek",
        "bench",
        "--quick",
        "--records", str(RECORDS),
        "--record-size", "100",
        "--duration", str(DURATION_S),
        "--rate", str(RATE),
        "--groups", "2",
        "--partition-counts", "1,100",
        "--recovery-mb", "1,2",
        "--json", str(results),
        "--work-dir", str(directory / "work"),
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    return completed, results


@pytest.fixture(scope="module")
def report(run: tuple[subprocess.CompletedProcess[str], Path]) -> dict[str, Any]:
    completed, results = run
    assert completed.returncode == 0, completed.stdout + completed.stderr
    loaded: dict[str, Any] = json.loads(results.read_text())
    return loaded


def rows(report: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = report["scenarios"][scenario]["rows"]
    return found


def assert_percentiles(row: dict[str, Any]) -> None:
    assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["p999_ms"] <= row["max_ms"]
    curve = row["curve"]
    assert [p for p, _ in curve] == sorted(p for p, _ in curve)
    assert [v for _, v in curve] == sorted(v for _, v in curve)


def test_every_scenario_ran(report: dict[str, Any]) -> None:
    assert list(report["scenarios"]) == list(SCENARIOS)
    for name, scenario in report["scenarios"].items():
        assert scenario["status"] == "ok", (name, scenario["error"])
        assert scenario["rows"], name
        assert scenario["targets"], name
        for target in scenario["targets"]:
            assert target["met"] in (True, False, None)
    assert report["broker"]["started_by_harness"] is True
    assert report["environment"]["cpus"] >= 1


def test_produce_each_api(report: dict[str, Any]) -> None:
    found = rows(report, "produce")
    assert [r["api"] for r in found] == ["batch", "record"]
    for row in found:
        assert row["record_size"] == 100
        # records are what the log's end offsets say arrived
        assert row["records"] == row["sent"] == RECORDS
        assert row["records_per_s"] > 0
        assert row["mb_per_s"] == pytest.approx(row["records_per_s"] * 100 / 1e6)
        assert 0 < row["client_cpu"] < report["environment"]["cpus"] + 0.5
        assert_percentiles(row)


def test_consume_reads_everything_loaded(report: dict[str, Any]) -> None:
    (row,) = rows(report, "consume")
    assert row["complete"] and row["records"] >= RECORDS
    assert row["records_per_s"] > 0 and row["mb_per_s"] > 0
    assert row["client_cpu"] > 0


def test_latency(report: dict[str, Any]) -> None:
    (row,) = rows(report, "latency")
    assert row["sent"] == int(RATE * DURATION_S)
    assert row["received"] == row["sent"]
    assert 0 < row["measured"] <= row["received"]
    assert_percentiles(row)
    assert 0 <= row["host_p99_ms"] <= row["host_max_ms"]
    assert row["host_stalls_per_s"] >= 0


def test_fanout_every_consumer_reads_the_whole_topic(report: dict[str, Any]) -> None:
    found = rows(report, "fanout")
    assert [(r["client"], r["consumers"]) for r in found] == [
        ("librdkafka", 1), ("librdkafka", 2), ("raw", 1), ("raw", 2),
    ]  # fmt: skip
    librdkafka_one, librdkafka_two, raw_one, raw_two = found
    topic = librdkafka_one["records"]  # one consumer, one pass over the topic
    assert topic >= RECORDS and librdkafka_two["records"] == 2 * topic
    for one, two in ((librdkafka_one, librdkafka_two), (raw_one, raw_two)):
        assert one["incomplete"] == 0 and two["incomplete"] == 0
        assert one["speedup"] == 1.0 and two["speedup"] > 0
    # A raw fetcher reads the topic again, whole passes, until a quarter of --duration is up.
    for row, consumers in ((raw_one, 1), (raw_two, 2)):
        assert row["records"] % topic == 0 and row["records"] >= consumers * topic
        assert row["slowest_s"] >= DURATION_S / 4


def test_partitions_report_rate_and_rss(report: dict[str, Any]) -> None:
    found = rows(report, "partitions")
    assert [r["partitions"] for r in found] == [1, 100]
    for row in found:
        assert row["records"] == RECORDS and row["records_per_s"] > 0
        assert row["rss_mb"] > 1 and row["rss_idle_mb"] > 1


def test_recovery_times_each_size(report: dict[str, Any]) -> None:
    empty, *sized = rows(report, "recovery")
    assert empty["log_mb"] == 0 and empty["crash_listen_s"] > 0
    assert len(sized) == 2
    for row in sized:
        assert row["log_mb"] > 0.5
        keys = ("crash_listen_s", "crash_ready_s", "clean_listen_s", "tail_ready_s")
        for key in (*keys, "running_ready_s"):
            assert 0 < row[key] < 120, key


def test_raw(report: dict[str, Any]) -> None:
    (row,) = rows(report, "raw")
    assert row["errors"] == 0 and row["records"] > 0
    assert row["records"] % row["batch_records"] == 0
    assert_percentiles(row)


def test_table_and_charts(run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    completed, results = run
    for name in SCENARIOS:
        assert f"== {name}:" in completed.stdout
    assert "targets (reported, not asserted)" in completed.stdout
    for chart in ("latency", "partitions", "recovery"):
        path = results.with_name(f"{results.stem}-{chart}.png")
        assert path.read_bytes().startswith(b"\x89PNG"), path


def test_progress_names_each_scenario_on_stderr(
    run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    completed, _ = run
    # Not a terminal: one line per scenario, none of them on stdout (the report's).
    lines = [line for line in completed.stderr.splitlines() if line.startswith("bench: ")]
    assert lines == [
        f"bench: {i}/{len(SCENARIOS)} running {name}" for i, name in enumerate(SCENARIOS)
    ]
    assert not [line for line in completed.stdout.splitlines() if line.startswith("running ")]
