"""The harness's pieces on their own: options, percentiles, targets, the table, the raw client."""

from __future__ import annotations

import math
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.bench import options as bench_options
from odradek.bench.report import format_report, format_targets
from odradek.bench.scenarios import (
    BenchContext,
    Column,
    CpuSampler,
    HiccupMeter,
    ScenarioResult,
    TargetCheck,
    _median_run,
    _range_text,
)
from odradek.bench.stats import LatencySummary, percentile
from odradek.bench.wire import TopicLayout, _plan_connections, make_batch, raw_load, topic_layout
from odradek.bench.workers import (
    LATENCY_SAMPLE_EVERY,
    WorkerFailed,
    _produce_batches,
    consume_worker,
    run_workers,
)
from odradek.protocol.records import decode_batch
from odradek.testing import RunningBroker

from .support import parse


def test_quick_gives_small_defaults_that_flags_override() -> None:
    full = parse()
    assert full.sizes == bench_options.FULL and full.scenarios == bench_options.SCENARIOS
    quick = parse("--quick", "--records", "7", "--partition-counts", "1,1000")
    assert quick.sizes.records == 7
    assert quick.sizes.partition_counts == (1, 1000)
    assert quick.sizes.duration_s == bench_options.QUICK.duration_s


def test_scenarios_are_checked() -> None:
    assert parse("--scenarios", "raw,produce").scenarios == ("raw", "produce")
    with pytest.raises(SystemExit):
        parse("--scenarios", "produce,nonsense")
    with pytest.raises(SystemExit):
        parse("--record-size", "100,-1")


def test_percentiles_are_nearest_rank() -> None:
    samples = [float(v) for v in range(1, 1001)]
    assert percentile(samples, 50) == 500
    assert percentile(samples, 99) == 990
    assert percentile(samples, 99.9) == 999
    assert percentile(samples, 100) == 1000
    assert percentile([3.0], 99.9) == 3.0
    summary = LatencySummary.of(reversed(samples))
    assert summary is not None
    assert (summary.p50, summary.p99, summary.p999, summary.max) == (500, 990, 999, 1000)
    assert LatencySummary.of([]) is None


def test_targets_compare_in_their_direction() -> None:
    assert TargetCheck("rate", 900.0, 820.0, "records/s").met is True
    assert TargetCheck("rate", 800.0, 820.0, "records/s").met is False
    assert TargetCheck("p99", 4.0, 5.0, "ms", higher_is_better=False).met is True
    assert TargetCheck("p99", None, 5.0, "ms").met is None


def test_table_shows_rows_and_targets() -> None:
    result = ScenarioResult("produce", "producer throughput", seconds=1.0)
    result.columns = [Column("record_size", "size B"), Column("p99_ms", "p99 ms", "{:.2f}")]
    result.rows = [{"record_size": 100, "p99_ms": 3.14159}, {"record_size": 1024}]
    result.targets = [TargetCheck("produce 100 B", 1234567.0, 820_000, "records/s")]
    report = {
        "environment": {"cpus": 2, "load_average": [0.1, 0.1, 0.1]},
        "broker": {"bootstrap": "127.0.0.1:9092", "started_by_harness": True},
    }
    text = format_report(report, [result])
    assert "size B  p99 ms" in text
    assert "3.14" in text and "1,024       -" in text
    assert "1,234,567 records/s" in format_targets([result])
    assert "met" in format_targets([result])


def test_cpu_sampler_interpolates_between_samples() -> None:
    sampler = CpuSampler(None)
    sampler.samples = [(0.0, 10.0), (1.0, 10.5), (2.0, 11.5)]
    assert sampler.cores(0.5, 1.5) == pytest.approx(0.75)
    assert sampler.cores(0.0, 2.0) == pytest.approx(0.75)
    assert sampler.cores(1.0, 1.0) is None


def test_hiccup_meter_counts_sleeps_that_overran() -> None:
    meter = HiccupMeter(stall_ms=2.0)
    assert meter.stalls_per_s() is None and meter.summary() is None
    meter.oversleeps_ms = [0.1, 2.5, 0.2, 7.0]
    meter.seconds = 2.0
    assert meter.stalls_per_s() == 1.0
    summary = meter.summary()
    assert summary is not None and summary.max == 7.0 and summary.p50 == 0.2


def test_prebuilt_batches_hold_the_records_asked_for() -> None:
    records = decode_batch(make_batch(100, 1000))
    assert len(records) == 1000
    assert all(r.key is None and r.value is not None and len(r.value) == 100 for r in records)
    assert [r.offset for r in records[:3]] == [0, 1, 2]


def test_connections_share_out_partitions_by_leader() -> None:
    a, b = ("a", 1), ("b", 2)
    layout = TopicLayout("t", {0: a, 1: b, 2: a, 3: b})
    plans = _plan_connections(layout, 4, "t", make_batch(10, 1), 1, 1000)
    assert sorted(address for address, _ in plans) == [a, a, b, b]
    assert all(len(frames) == 1 for _, frames in plans)
    one = _plan_connections(TopicLayout("t", {0: a}), 3, "t", make_batch(10, 1), 1, 1000)
    assert len(one) == 3  # three connections pipelining into one partition


def test_raw_load_and_consume_worker_against_a_broker(odradek_broker: RunningBroker) -> None:
    bootstrap = odradek_broker.bootstrap
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=2)]).values():
        future.result(timeout=15)
    layout = topic_layout(bootstrap, topic)
    assert layout is not None and sorted(layout.leaders) == [0, 1]

    loaded = raw_load(
        bootstrap, topic, record_size=50, batch_records=100, connections=2, window=4,
        total_records=1050,
    )  # fmt: skip
    assert (loaded.errors, loaded.records, loaded.requests) == (0, 1100, 11)
    assert loaded.payload_bytes == 1100 * 50 and len(loaded.latencies_ms) == 11

    read = consume_worker(
        lambda: None, bootstrap=bootstrap, topic=topic, expected=1100, timeout_s=30
    )
    assert read.complete and read.records == 1100 and read.payload_bytes == 1100 * 50


def test_a_failing_worker_fails_the_run_with_its_error() -> None:
    with pytest.raises(WorkerFailed, match="TypeError"):
        run_workers([(divmod, {}), (consume_worker, {})], timeout=60)


def test_repeat_and_produce_api_flags() -> None:
    assert parse().sizes.repeats == 3 and parse("--quick").sizes.repeats == 1
    assert parse("--repeat", "5").sizes.repeats == 5
    assert parse().sizes.produce_apis == ("batch", "record")
    assert parse("--produce-api", "record").sizes.produce_apis == ("record",)
    with pytest.raises(SystemExit):
        parse("--produce-api", "bulk")
    with pytest.raises(SystemExit):
        parse("--repeat", "0")


def test_the_median_run_is_reported_with_the_spread() -> None:
    runs = [{"records_per_s": r} for r in (300.0, 100.0, 200.0, 400.0)]
    median = _median_run(runs)
    assert median["records_per_s"] == 200.0 and median["runs"] == 4
    assert _median_run(runs[:1])["records_per_s"] == 300.0
    assert _range_text([300_000.0, 100_000.0]) == "100k-300k"
    assert _range_text([5.0]) == "-"


def test_produce_batches_resend_what_a_full_queue_refused(
    odradek_broker: RunningBroker, tmp_path: Path
) -> None:
    bootstrap = odradek_broker.bootstrap
    topic = f"batches-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=3)]).values():
        future.result(timeout=15)
    # A queue smaller than two calls' worth: produce_batch must refuse part of a call.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 1500, "linger.ms": 50}
    )
    reports: list[object] = []
    sent = _produce_batches(
        producer, topic, b"v" * 10, 5000, 3, lambda err, msg: reports.append(err), math.inf
    )
    assert sent == 5000
    assert producer.flush(30) == 0
    # one sampled delivery report per LATENCY_SAMPLE_EVERY dicts of each call, all successes
    assert reports and all(err is None for err in reports)
    assert len(reports) == 5 * math.ceil(1000 / LATENCY_SAMPLE_EVERY)
    ctx = BenchContext(parse(), bootstrap, None, tmp_path)
    assert ctx.end_offsets(topic) == 5000
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        ends = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(3)
        ]
    finally:
        consumer.close()
    assert ends == [2000, 2000, 1000]  # a call to each partition in turn
