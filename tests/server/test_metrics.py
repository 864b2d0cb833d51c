"""The metric families a scrape reports, from a snapshot built by hand (no broker, no sockets);
tests/e2e/test_metrics.py and tests/e2e/cluster/test_metrics.py scrape real brokers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from prometheus_client.core import Metric

from odradek.counters import (
    FETCH_CONSUMER_SLOT,
    FETCH_FOLLOWER_SLOT,
    FLUSH_BUCKETS_S,
    Histogram,
    RequestCounters,
    TopicCounters,
)
from odradek.server.metrics import (
    CleanerFigures,
    GroupFigures,
    PartitionFigures,
    Snapshot,
    api_name,
    cleaner_figures,
    families,
)
from odradek.storage.cleaner import CleanResult, LogCleaner

ROOT = Path(__file__).resolve().parents[2]


def _snapshot(**changes: object) -> Snapshot:
    requests = RequestCounters()
    fields: dict[str, object] = {
        "topics": {},
        "requests": list(requests.requests),
        "times": list(requests.times),
        "errors": {},
        "replication_bytes_out": 0,
        "connections": {"PLAINTEXT": 0},
        "connections_created": {},
        "connections_closed": {},
        "parked": 0,
        "partitions": [],
        "isr_shrinks": 0,
        "isr_expands": 0,
        "is_controller": True,
        "offline_partitions": 0,
        "flush_time": Histogram(FLUSH_BUCKETS_S),
        "groups": [],
    }
    fields.update(changes)
    return Snapshot(**fields)  # type: ignore[arg-type]


def _samples(snapshot: Snapshot) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    metric: Metric
    for metric in families(snapshot):
        for sample in metric.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _partition(
    topic: str, index: int, *, leader: bool, isr: int, min_isr: int = 1
) -> PartitionFigures:
    return PartitionFigures(topic, index, leader, 3, isr, min_isr, 1000, 2, 0, 10)


def test_api_names_are_kafkas() -> None:
    assert api_name(0) == "Produce"
    assert api_name(1) == "Fetch"
    assert api_name(18) == "ApiVersions"


def test_topic_counters_become_counters_with_a_topic_label() -> None:
    counters = TopicCounters()
    counters.bytes_in = 1234
    counters.messages_in = 10
    samples = _samples(_snapshot(topics={"clicks": counters}))
    labels = (("topic", "clicks"),)
    assert samples[("kafka_server_brokertopicmetrics_bytesin_total", labels)] == 1234
    assert samples[("kafka_server_brokertopicmetrics_messagesin_total", labels)] == 10
    assert samples[("kafka_server_brokertopicmetrics_bytesout_total", labels)] == 0


def test_latency_buckets_are_cumulative_and_agree_with_the_count() -> None:
    requests = RequestCounters()
    for elapsed_ns in (50_000, 200_000, 200_000, 60_000_000_000):
        requests.handled(0, queue_ns=0, local_ns=elapsed_ns)
    requests.error(0, 6)  # NOT_LEADER_OR_FOLLOWER
    samples = _samples(
        _snapshot(
            requests=requests.requests,
            times=requests.times,
            errors=requests.errors,
        )
    )
    produce = (("request", "Produce"),)
    name = "kafka_network_requestmetrics_totaltime_seconds"
    assert samples[(name + "_bucket", (("le", "0.0001"), *produce))] == 1
    assert samples[(name + "_bucket", (("le", "0.00025"), *produce))] == 3
    assert samples[(name + "_bucket", (("le", "30.0"), *produce))] == 3
    assert samples[(name + "_bucket", (("le", "+Inf"), *produce))] == 4
    assert samples[(name + "_count", produce)] == 4
    assert samples[("kafka_network_requestmetrics_requests_total", produce)] == 4
    errors = (("error", "NOT_LEADER_OR_FOLLOWER"), ("request", "Produce"))
    assert samples[("kafka_network_requestmetrics_errors_total", errors)] == 1


def test_request_time_is_split_as_kafkas_request_metrics_split_it() -> None:
    requests = RequestCounters()
    requests.handled(1, queue_ns=20_000, local_ns=30_000, remote_ns=400_000_000, send_ns=5_000)
    samples = _samples(_snapshot(requests=requests.requests, times=requests.times))
    fetch = (("request", "Fetch"),)
    prefix = "kafka_network_requestmetrics_"
    sums = {
        name: samples[(prefix + name + "_seconds_sum", fetch)]
        for name in ("requestqueuetime", "localtime", "remotetime", "responsesendtime", "totaltime")
    }
    assert sums == {
        "requestqueuetime": 20e-6,
        "localtime": 30e-6,
        "remotetime": 0.4,
        "responsesendtime": 5e-6,
        "totaltime": 0.400055,
    }
    assert samples[(prefix + "remotetime_seconds_bucket", (("le", "0.25"), *fetch))] == 0
    assert samples[(prefix + "remotetime_seconds_bucket", (("le", "0.5"), *fetch))] == 1


def test_a_fetch_counts_again_under_the_side_it_came_from() -> None:
    requests = RequestCounters()
    requests.handled(1, queue_ns=0, local_ns=1_000, also=FETCH_FOLLOWER_SLOT)
    requests.handled(1, queue_ns=0, local_ns=2_000, also=FETCH_FOLLOWER_SLOT)
    requests.handled(1, queue_ns=0, local_ns=4_000, also=FETCH_CONSUMER_SLOT)
    samples = _samples(_snapshot(requests=requests.requests, times=requests.times))
    name = "kafka_network_requestmetrics_requests_total"
    assert samples[(name, (("request", "Fetch"),))] == 3
    assert samples[(name, (("request", "FetchFollower"),))] == 2
    assert samples[(name, (("request", "FetchConsumer"),))] == 1
    local = "kafka_network_requestmetrics_localtime_seconds_sum"
    assert samples[(local, (("request", "FetchFollower"),))] == 3e-6
    assert samples[(local, (("request", "FetchConsumer"),))] == 4e-6


def test_cleaner_figures_are_reported_only_while_a_cleaner_runs() -> None:
    assert not any("cleaner" in name for name, _ in _samples(_snapshot()))
    cleaner = CleanerFigures(
        passes=3,
        recopy_percent=42,
        last_pass_seconds=1.5,
        max_dirty_percent=67,
        since_last_run_ms=2_000,
        uncleanable=1,
    )
    samples = _samples(_snapshot(cleaner=cleaner))
    assert samples[("kafka_log_logcleaner_cleaner_recopy_percent", ())] == 42
    assert samples[("kafka_log_logcleaner_max_clean_time_secs", ())] == 1.5
    assert samples[("kafka_log_logcleanermanager_max_dirty_percent", ())] == 67
    assert samples[("kafka_log_logcleanermanager_time_since_last_run_ms", ())] == 2_000
    assert samples[("kafka_log_logcleanermanager_uncleanable_partitions_count", ())] == 1
    assert samples[("odradek_log_cleaner_passes_total", ())] == 3


def test_cleaner_figures_are_kafkas_percentages_of_the_last_pass_and_choice() -> None:
    last = CleanResult(
        "t", 0, 0, 100, dirty_bytes=900, bytes_read=1000, bytes_written=333, records_read=10,
        records_kept=3, tombstones_removed=0, segments_before=3, segments_after=1, seconds=0.25,
    )  # fmt: skip
    cleaner = SimpleNamespace(
        passes=2,
        last_result=last,
        max_dirty_ratio=0.678,
        last_run_ms=10_000,
        uncleanable_count=lambda: 1,
    )
    figures = cleaner_figures(cast(LogCleaner, cleaner), now_ms=12_500)
    assert figures == CleanerFigures(
        passes=2,
        recopy_percent=33,
        last_pass_seconds=0.25,
        max_dirty_percent=67,
        since_last_run_ms=2_500,
        uncleanable=1,
    )
    assert cleaner_figures(None, 0) is None


def test_connections_are_labelled_by_listener() -> None:
    samples = _samples(
        _snapshot(
            connections={"PLAINTEXT": 2, "SASL_SSL": 0},
            connections_created={"PLAINTEXT": 5, "SASL_SSL": 1},
            connections_closed={"PLAINTEXT": 3, "SASL_SSL": 1},
        )
    )
    prefix = "kafka_server_socket_server_metrics_"
    assert samples[(prefix + "connection_count", (("listener", "PLAINTEXT"),))] == 2
    assert samples[(prefix + "connection_count", (("listener", "SASL_SSL"),))] == 0
    assert samples[(prefix + "connection_creation_total", (("listener", "SASL_SSL"),))] == 1
    assert samples[(prefix + "connection_close_total", (("listener", "PLAINTEXT"),))] == 3


def test_replica_counts_are_of_led_partitions() -> None:
    partitions = [
        _partition("a", 0, leader=True, isr=3, min_isr=2),
        _partition("a", 1, leader=True, isr=2, min_isr=2),  # under-replicated, at min ISR
        _partition("a", 2, leader=True, isr=1, min_isr=2),  # under min ISR
        _partition("a", 3, leader=False, isr=1, min_isr=2),  # followed: its leader counts it
    ]
    samples = _samples(_snapshot(partitions=partitions, isr_shrinks=2))
    prefix = "kafka_server_replicamanager_"
    assert samples[(prefix + "underreplicatedpartitions", ())] == 2
    assert samples[(prefix + "underminisrpartitioncount", ())] == 1
    assert samples[(prefix + "atminisrpartitioncount", ())] == 1
    assert samples[(prefix + "leadercount", ())] == 3
    assert samples[(prefix + "partitioncount", ())] == 4
    assert samples[(prefix + "isrshrinks_total", ())] == 2
    under = "kafka_cluster_partition_underreplicated"
    assert samples[(under, (("partition", "1"), ("topic", "a")))] == 1
    assert samples[(under, (("partition", "0"), ("topic", "a")))] == 0
    assert (under, (("partition", "3"), ("topic", "a"))) not in samples
    size = samples[("kafka_log_log_size", (("partition", "3"), ("topic", "a")))]
    assert size == 1000


def test_fetch_sessions_are_counted_as_kafkas_fetch_session_cache_counts_them() -> None:
    samples = _samples(
        _snapshot(fetch_sessions=2, fetch_session_partitions=7, fetch_session_evictions=1)
    )
    prefix = "kafka_server_fetchsessioncache_"
    assert samples[(prefix + "numincrementalfetchsessions", ())] == 2
    assert samples[(prefix + "numincrementalfetchpartitionscached", ())] == 7
    assert samples[(prefix + "incrementalfetchsessionevictions_total", ())] == 1


def test_group_lag_is_the_high_watermark_minus_the_commit_where_it_is_known() -> None:
    group = GroupFigures(
        "readers", "Stable", 2, (("a", 0, 40, 100), ("a", 1, 7, None), ("a", 2, 9, 5))
    )
    samples = _samples(_snapshot(groups=[group]))

    def labels(partition: int) -> tuple[tuple[str, str], ...]:
        return (("consumergroup", "readers"), ("partition", str(partition)), ("topic", "a"))

    assert samples[("kafka_consumergroup_lag", labels(0))] == 60
    assert ("kafka_consumergroup_lag", labels(1)) not in samples  # not hosted here
    assert samples[("kafka_consumergroup_current_offset", labels(1))] == 7
    assert samples[("kafka_consumergroup_lag", labels(2))] == 0  # a follower's stale watermark
    state = (("consumergroup", "readers"), ("state", "Stable"))
    assert samples[("kafka_consumergroup_state", state)] == 1
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    assert samples[(prefix + "numgroupsstable", ())] == 1
    assert samples[(prefix + "numgroupsempty", ())] == 0


def test_offline_log_dirs_are_counted_and_flagged_as_kafkas_log_manager_does() -> None:
    samples = _samples(_snapshot(log_dirs=(("/data/a", False), ("/data/b", True))))
    assert samples[("kafka_log_logmanager_offlinelogdirectorycount", ())] == 1
    flag = "kafka_log_logmanager_logdirectoryoffline"
    assert samples[(flag, (("logdirectory", "/data/a"),))] == 0
    assert samples[(flag, (("logdirectory", "/data/b"),))] == 1


def test_the_grafana_dashboard_asks_only_for_metrics_the_broker_exports() -> None:
    exported: set[str] = set()
    cleaner = CleanerFigures(0, 0, 0.0, 0, -1, 0)
    for metric in families(_snapshot(cleaner=cleaner)):
        suffixes = {
            "counter": ("_total",),
            "histogram": ("_bucket", "_count", "_sum"),
        }.get(metric.type, ("",))
        exported.update(metric.name + suffix for suffix in suffixes)
    dashboard = json.loads((ROOT / "contrib" / "grafana" / "odradek.json").read_text())
    asked = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"\b(?:kafka|odradek)_[a-z_]+", target["expr"])
    }
    asked.update(
        name
        for variable in dashboard["templating"]["list"]
        for name in re.findall(r"\b(?:kafka|odradek)_[a-z_]+", variable.get("definition", ""))
    )
    assert asked, "the dashboard asks for nothing"
    assert asked <= exported, sorted(asked - exported)
