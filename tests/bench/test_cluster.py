"""The cluster scenarios: their flags and figures' arithmetic, and a run of all four at a tiny size
on a real ZooKeeper and three broker processes (as ``odradek bench --cluster`` runs them).

Behaviour, not speed: nothing compares a figure with its target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from odradek.bench import options as bench_options
from odradek.bench.cluster import _cpu_fields, _first_ack_after, _longest_gap, topic_config
from odradek.bench.scenarios import CpuSampler
from odradek.bench.workers import AckTimesResult
from odradek.testing import ZOOKEEPER_SERVER_SH

from .support import parse

RECORDS = 3000
RATE = 1000
DURATION_S = 1.0
CATCHUP_MB = 4
SESSION_TIMEOUT_MS = 3000


def test_cluster_scenarios_run_only_when_asked() -> None:
    assert not set(parse().scenarios) & set(bench_options.CLUSTER_SCENARIOS)
    assert parse("--cluster").scenarios == bench_options.CLUSTER_SCENARIOS
    assert parse("--scenarios", "cluster").scenarios == bench_options.CLUSTER_SCENARIOS
    chosen = parse("--scenarios", "raw,cluster-failover", "--quick", "--catchup-mb", "9")
    assert chosen.scenarios == ("raw", "cluster-failover")
    assert chosen.sizes.catchup_mb == 9
    assert parse("--quick").sizes.catchup_mb == bench_options.QUICK.catchup_mb
    with pytest.raises(SystemExit):
        parse("--cluster", "--scenarios", "raw")
    with pytest.raises(SystemExit):
        parse("--catchup-mb", "0")


def test_replicated_topics_need_two_in_sync_copies() -> None:
    assert topic_config(3) == {"min.insync.replicas": "2"}
    assert topic_config(1) == {}


def sampler(*samples: tuple[float, float]) -> CpuSampler:
    """A sampler holding the given (moment, CPU seconds) samples, as a sampling thread leaves
    them."""
    made = CpuSampler(None)
    made.samples = list(samples)
    return made


def test_cpu_per_million_records_for_each_broker() -> None:
    samplers = {
        1: sampler((10.0, 1.0), (12.0, 3.0)),
        2: sampler((10.0, 0.0), (11.0, 0.5), (12.0, 0.5)),
        3: sampler((10.0, 5.0)),  # one sample: nothing to tell
    }
    fields = _cpu_fields(samplers, 10.0, 12.0, records=500_000)
    assert fields["broker_cpu_s"] == {1: 2.0, 2: 0.5, 3: None}
    assert fields["broker_cpu_s_per_m"] == {1: 4.0, 2: 1.0, 3: None}
    assert fields["broker_cpu_text"] == "4.0/1.0/-"
    assert fields["broker_cores"] == pytest.approx(1.25)
    # half the window: the samples are interpolated
    assert _cpu_fields(samplers, 10.0, 11.0, 1_000_000)["broker_cpu_s"][1] == pytest.approx(1.0)


def test_the_first_ack_after_the_election_and_the_longest_wait() -> None:
    load = AckTimesResult(
        sent=6,
        acked=6,
        failed=0,
        first_error=None,
        acks={0: [(1.0, 4), (2.0, 4), (2.1, 4), (9.0, 5), (9.5, 5)], 1: [(3.0, -1)]},
        client_log=[],
    )
    assert _first_ack_after(load, 0, 2.05) == 2.1
    assert _first_ack_after(load, 0, 8.0) == 9.0
    assert _first_ack_after(load, 0, 9.6) is None
    assert _first_ack_after(load, 2, 0.0) is None
    assert _longest_gap(load, 0, 0.0, 100.0) == pytest.approx(6.9)
    assert _longest_gap(load, 0, 0.0, 2.05) == pytest.approx(1.0)
    assert _longest_gap(load, 1, 0.0, 100.0) is None


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not ZOOKEEPER_SERVER_SH.exists():
        pytest.skip("Debian's zookeeper package is not installed")
    directory = tmp_path_factory.mktemp("bench-cluster")
    results = directory / "run.json"
    command = [
        sys.executable, "-m", "odradek", "bench", "--cluster", "--quick",
        "--records", str(RECORDS),
        "--record-size", "100",
        "--duration", str(DURATION_S),
        "--rate", str(RATE),
        "--catchup-mb", str(CATCHUP_MB),
        "--broker-option", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
        "--json", str(results),
        "--work-dir", str(directory / "work"),
        "--no-charts",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    for name in bench_options.CLUSTER_SCENARIOS:
        assert f"== {name}:" in completed.stdout
    loaded: dict[str, Any] = json.loads(Path(results).read_text())
    return loaded


def rows(report: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    assert report["scenarios"][scenario]["status"] == "ok", report["scenarios"][scenario]["error"]
    found: list[dict[str, Any]] = report["scenarios"][scenario]["rows"]
    return found


def assert_cpu_of_three_brokers(row: dict[str, Any]) -> None:
    assert sorted(row["broker_cpu_s"]) == ["1", "2", "3"]  # JSON keys
    # /proc counts in 10 ms ticks: a tiny run's window may show none
    assert all(v is not None and v >= 0 for v in row["broker_cpu_s_per_m"].values())
    assert row["broker_cores"] >= 0


@pytest.mark.slow
def test_cluster_scenarios_at_a_tiny_size(report: dict[str, Any]) -> None:
    assert list(report["scenarios"]) == list(bench_options.CLUSTER_SCENARIOS)
    for scenario in report["scenarios"].values():
        assert scenario["targets"]

    produce = rows(report, "cluster-produce")
    assert [(r["load"], r["replication_factor"], r["acks"]) for r in produce] == [
        ("librdkafka", 1, 1), ("librdkafka", 3, -1), ("raw", 1, 1), ("raw", 3, -1),
    ]  # fmt: skip
    for row in produce:
        assert row["lost"] is None
        assert row["records"] >= RECORDS and row["records_per_s"] > 0
        assert_cpu_of_three_brokers(row)
    assert produce[0]["ratio"] == 1.0 and produce[1]["ratio"] > 0
    # after each RF=3 run the harness waited for every follower to be in sync again
    assert [r["settle_s"] is None for r in produce] == [True, False, True, False]
    assert all(r["settle_s"] >= 0 for r in produce if r["replication_factor"] == 3)

    latency = rows(report, "cluster-latency")
    assert [r["acks"] for r in latency] == [1, -1]
    for row in latency:
        assert row["sent"] == int(RATE * DURATION_S) == row["received"]
        assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
        assert_cpu_of_three_brokers(row)

    kill, shutdown = rows(report, "cluster-failover")
    assert kill["event"] == "kill -9" and not kill["was_controller"]
    assert kill["partitions_led"] >= 1
    # no new leader before the killed broker's session expired; one within a bounded time
    session_s = SESSION_TIMEOUT_MS / 1000
    assert 0 < kill["metadata_s"] <= kill["first_ack_s"] < session_s + 30
    assert kill["client_first_ack_s"] is not None and kill["client_first_ack_s"] > 0
    assert 0 < kill["back_in_isr_s"] < 60
    assert shutdown["event"] == "SIGTERM" and shutdown["partitions_led"] >= 1
    assert shutdown["exit_code"] == 0
    assert 0 < shutdown["metadata_s"] <= shutdown["exit_s"] + 1

    (catchup,) = rows(report, "cluster-catchup")
    assert catchup["copied_mb"] >= CATCHUP_MB * 0.9
    assert catchup["out_of_isr_s"] > 0
    assert catchup["caught_up_s"] > 0 and catchup["back_in_isr_s"] > 0
    assert catchup["mb_per_s"] > 0
    assert 0 < catchup["copying_s"] <= catchup["caught_up_s"]
    assert catchup["copy_mb_per_s"] >= catchup["mb_per_s"]
    assert_cpu_of_three_brokers(catchup)
