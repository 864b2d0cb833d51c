"""The scenarios: each sets up its topics, runs its load in worker processes and returns rows.

A scenario gets a :class:`BenchContext` (the broker under test, the options, helpers) and returns
a :class:`ScenarioResult`: rows of figures, the columns to print them by, and the targets of the
issue checked against them — reported, never asserted. Throughput is payload (record values):
MB/s means 10^6 bytes of values per second.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.bench.broker import BrokerCluster, BrokerProcess, ChildBroker
from odradek.bench.options import BenchOptions
from odradek.bench.stats import LatencySummary
from odradek.bench.wire import RawLoadResult, raw_load, topic_layout
from odradek.bench.workers import (
    LATENCY_SAMPLE_EVERY,
    ConsumeResult,
    EndToEndResult,
    PacedProduceResult,
    ProduceResult,
    RawResult,
    consume_worker,
    latency_consumer_worker,
    paced_producer_worker,
    produce_worker,
    raw_consume_worker,
    raw_worker,
    run_workers,
)
from odradek.client.core import ClientError
from odradek.storage.checkpoint import read_checkpoint
from odradek.storage.formats import RECOVERY_POINT_CHECKPOINT

if TYPE_CHECKING:  # odradek.testing imports pytest: only the cluster scenarios need it
    from odradek.testing import RunningCluster, ZooKeeperServer

MB = 1_000_000
TOPIC_TIMEOUT_S = 120.0
# A raw fetcher reads the fan-out topic again until this long has passed: one pass of it takes
# a few tenths of a second, and a figure that short measures start-up more than the broker.
RAW_FANOUT_MIN_S = 2.0
WORKER_SLACK_S = 120.0  # on top of a run's own duration: process start, connecting, draining
RUN_MAX_BYTES = 1_000_000_000  # of values per produce/consume run
# Of values per raw run (which also stops after --duration). Past the page cache's dirty limits
# the kernel holds writers to the disk's own rate, and this VM's disk slows down (fdatasync'd
# dd: 1.1 GB/s fresh, 220 MB/s after some 30 GB written): a long run would measure the disk.
RAW_MAX_BYTES = 2_000_000_000
RAW_BATCH_MAX_BYTES = 1_000_000  # of values; with record overhead still under 1,048,588


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    header: str
    format: str = "{:,.0f}"


@dataclass(frozen=True, slots=True)
class TargetCheck:
    """One of the issue's targets next to the figure measured for it."""

    description: str
    measured: float | None
    threshold: float
    unit: str
    higher_is_better: bool = True
    note: str | None = None

    @property
    def met(self) -> bool | None:
        if self.measured is None:
            return None
        if self.higher_is_better:
            return self.measured >= self.threshold
        return self.measured <= self.threshold

    def to_json(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "measured": self.measured,
            "threshold": self.threshold,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "met": self.met,
            "note": self.note,
        }


@dataclass(slots=True)
class ScenarioResult:
    name: str
    title: str
    status: str = "ok"  # ok | failed | skipped
    seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)
    columns: list[Column] = field(default_factory=list)
    targets: list[TargetCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "status": self.status,
            "seconds": self.seconds,
            "rows": self.rows,
            "targets": [t.to_json() for t in self.targets],
            "notes": self.notes,
            "error": self.error,
        }


# -- context -----------------------------------------------------------------------------------


def settle_page_cache() -> None:
    """Write back the dirty pages earlier runs left before a measurement starts: the kernel's
    writeback of gigabytes would otherwise compete with the broker's own writes and make a run's
    figure depend on what ran before it."""
    os.sync()


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a local process so far."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """Samples a process's CPU time on a thread, so that afterwards it can tell how busy the
    process was over any interval inside the sampling (the workers' own measured window, not
    the process start-up around it). A None pid samples nothing."""

    def __init__(self, pid: int | None, period_s: float = 0.02) -> None:
        self.pid = pid
        self.period_s = period_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> CpuSampler:
        if self.pid is not None:
            self._sample()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._sample()

    def _sample(self) -> None:
        assert self.pid is not None
        used = cpu_seconds(self.pid)
        if used is not None:
            self.samples.append((time.monotonic(), used))

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def _at(self, moment: float) -> float:
        times = [t for t, _ in self.samples]
        i = bisect.bisect_left(times, moment)
        if i == 0:
            return self.samples[0][1]
        if i == len(self.samples):
            return self.samples[-1][1]
        (t0, c0), (t1, c1) = self.samples[i - 1], self.samples[i]
        return c0 + (c1 - c0) * (moment - t0) / (t1 - t0) if t1 > t0 else c1

    def cores(self, start: float, end: float) -> float | None:
        """CPU used between two ``time.monotonic`` moments, in cores (1.0 = one busy core)."""
        used = self.seconds(start, end)
        return None if used is None else used / (end - start)

    def seconds(self, start: float, end: float) -> float | None:
        """CPU seconds (user + system) used between two ``time.monotonic`` moments."""
        if len(self.samples) < 2 or end <= start:
            return None
        return self._at(end) - self._at(start)


class HiccupMeter:
    """Measures the host, not the broker: a thread asks to sleep 1 ms again and again and keeps
    how much longer each sleep took, as jHiccup does. What delays it (other threads on the two
    cores, the hypervisor taking a vCPU away) delays the clients and the broker alike, so a
    latency figure is read beside it."""

    def __init__(self, sleep_s: float = 0.001, stall_ms: float = 2.0) -> None:
        self.sleep_s = sleep_s
        self.stall_ms = stall_ms
        self.oversleeps_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.seconds = 0.0  # measured

    def __enter__(self) -> HiccupMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        began = time.monotonic_ns()
        asked_ns = self.sleep_s * 1e9
        while not self._stop.is_set():
            before = time.monotonic_ns()
            time.sleep(self.sleep_s)
            self.oversleeps_ms.append(max(0.0, time.monotonic_ns() - before - asked_ns) / 1e6)
        self.seconds = (time.monotonic_ns() - began) / 1e9

    def summary(self) -> LatencySummary | None:
        return LatencySummary.of(self.oversleeps_ms)

    def stalls_per_s(self) -> float | None:
        """Sleeps that overran by more than ``stall_ms``, per second."""
        if self.seconds <= 0:
            return None
        return sum(1 for ms in self.oversleeps_ms if ms > self.stall_ms) / self.seconds


class BenchContext:
    """The broker under test and what scenarios share. ``broker`` is None when the harness
    benchmarks a broker it did not start (``--bootstrap-server``). ``new_broker`` makes the
    fresh brokers of :meth:`fresh_broker` over a directory (default: odradek's, with the run's
    ``--broker-option``s); ``odradek bench --peer`` gives it the peer's, and ``new_cluster``
    (a running cluster over a directory, stopped on leaving) for :meth:`measured_cluster`."""

    def __init__(
        self,
        options: BenchOptions,
        bootstrap: str,
        broker: BrokerProcess | None,
        work_dir: Path,
        new_broker: Callable[[Path], BrokerProcess] | None = None,
        new_cluster: Callable[[Path], AbstractContextManager[BrokerCluster]] | None = None,
    ) -> None:
        self.options = options
        self.sizes = options.sizes
        self.bootstrap = bootstrap
        self.broker = broker
        self.work_dir = work_dir
        self.new_broker = new_broker or self._odradek_broker
        self.new_cluster = new_cluster
        self._zookeeper: ZooKeeperServer | None = None

    def _odradek_broker(self, directory: Path) -> BrokerProcess:
        return ChildBroker(directory, self.options.broker_overrides)

    def new_topic(
        self,
        prefix: str,
        partitions: int,
        bootstrap: str | None = None,
        replication_factor: int = 1,
        config: dict[str, str] | None = None,
    ) -> str:
        """Create a topic of this run alone (with the topic ``config``) and wait until every
        partition has a leader that answers for it (``bootstrap``: one broker's address). Kafka
        lists a leader in Metadata a moment before that broker takes the partition on, and
        refuses a Produce meanwhile: the leaders' ListOffsets answers show they have."""
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        address = bootstrap or self.bootstrap
        name = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": address})
        futures = admin.create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    config=config or {},
                )
            ],
            operation_timeout=TOPIC_TIMEOUT_S,
            request_timeout=TOPIC_TIMEOUT_S,
        )
        for future in futures.values():
            future.result(timeout=TOPIC_TIMEOUT_S)
        deadline = time.monotonic() + TOPIC_TIMEOUT_S
        while True:
            layout = topic_layout(address, name)
            if layout is not None and len(layout.leaders) == partitions:
                with contextlib.suppress(RuntimeError):  # some partition not served yet
                    self.end_offsets(name, address)
                    return name
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} has no leaders after {TOPIC_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

    def records_for(self, record_size: int) -> int:
        """``--records``, but at most :data:`RUN_MAX_BYTES` of values: past the page cache's
        dirty limits a run measures the kernel's writeback, not the broker."""
        return max(1, min(self.sizes.records, RUN_MAX_BYTES // record_size))

    def end_offsets(self, topic: str, bootstrap: str | None = None) -> int:
        """The sum of ``topic``'s end offsets: the records in a topic that started empty."""
        from odradek.client.admin import GroupAdmin

        address = bootstrap or self.bootstrap
        layout = topic_layout(address, topic)
        if layout is None:
            raise RuntimeError(f"topic {topic} has no metadata")

        async def ask() -> int:
            async with await GroupAdmin.connect(address, timeout_s=TOPIC_TIMEOUT_S) as admin:
                ends = await admin.end_offsets((topic, p) for p in layout.leaders)
            if len(ends) != len(layout.leaders):
                raise RuntimeError(f"no end offset for some partitions of {topic}")
            return sum(ends.values())

        return asyncio.run(ask())

    def load(
        self, topic: str, records: int, record_size: int, bootstrap: str | None = None
    ) -> RawLoadResult:
        """Fill ``topic`` with about ``records`` records fast, with pre-built batches (smaller
        ones for small loads, which are rounded up to whole batches)."""
        result = raw_load(
            bootstrap or self.bootstrap,
            topic,
            record_size=record_size,
            batch_records=max(1, min(self.batch_records(record_size), records // 16)),
            connections=self.sizes.raw_connections,
            window=self.sizes.raw_window,
            total_records=records,
        )
        if result.errors:
            raise RuntimeError(f"loading {topic} failed: {result.first_error}")
        return result

    def batch_records(self, record_size: int) -> int:
        """Records per pre-built batch: as asked, but within Kafka's default max.message.bytes."""
        return max(1, min(self.sizes.raw_batch_records, RAW_BATCH_MAX_BYTES // record_size))

    @contextlib.contextmanager
    def fresh_broker(self) -> Iterator[BrokerProcess | None]:
        """A new broker over a new data directory, or None when the broker is not ours."""
        if self.broker is None:
            yield None
            return
        directory = Path(tempfile.mkdtemp(prefix="broker-", dir=self.work_dir))
        broker = self.new_broker(directory)
        try:
            broker.start()
            yield broker
        finally:
            broker.stop()
            shutil.rmtree(directory, ignore_errors=True)

    @contextlib.contextmanager
    def cluster(self, size: int = 3) -> Iterator[RunningCluster]:
        """A fresh cluster of ``size`` broker processes (``--broker-option`` given to each) on
        the run's ZooKeeper, under a chroot of its own; stopped and removed afterwards."""
        from odradek.testing import RunningCluster, ZooKeeperServer

        if self._zookeeper is None:
            self._zookeeper = ZooKeeperServer(Path(tempfile.mkdtemp(dir=self.work_dir))).start()
        settings = dict(o.split("=", 1) for o in self.options.broker_overrides if "=" in o)
        directory = Path(tempfile.mkdtemp(prefix="cluster-", dir=self.work_dir))
        cluster = RunningCluster(directory, size, zookeeper=self._zookeeper, settings=settings)
        try:
            yield cluster.start()
        finally:
            cluster.stop()
            shutil.rmtree(directory, ignore_errors=True)

    @contextlib.contextmanager
    def measured_cluster(self) -> Iterator[BrokerCluster]:
        """A fresh cluster of three brokers: ``new_cluster``'s (a peer's), else odradek's of
        :meth:`cluster`."""
        if self.new_cluster is not None:
            directory = Path(tempfile.mkdtemp(prefix="cluster-", dir=self.work_dir))
            try:
                with self.new_cluster(directory) as peer:
                    yield peer
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            return
        with self.cluster() as ours:
            yield ours

    def close(self) -> None:
        """Stop what the scenarios left running for each other (the clusters' ZooKeeper)."""
        if self._zookeeper is not None:
            self._zookeeper.kill()
            self._zookeeper = None

    def cpu_sampler(self, broker: BrokerProcess | None = None) -> CpuSampler:
        """Samples the broker's CPU (``broker``, else the shared one; nothing if not ours)."""
        target = broker or self.broker
        return CpuSampler(target.pid if target is not None else None)


def _latency_fields(summary: LatencySummary | None, prefix: str = "") -> dict[str, Any]:
    if summary is None:
        return {f"{prefix}p50_ms": None, f"{prefix}p99_ms": None, f"{prefix}p999_ms": None}
    return {
        f"{prefix}p50_ms": summary.p50,
        f"{prefix}p99_ms": summary.p99,
        f"{prefix}p999_ms": summary.p999,
        f"{prefix}max_ms": summary.max,
        f"{prefix}curve": [list(point) for point in summary.curve],
    }


def _rate(records: int, seconds: float) -> float:
    return records / seconds if seconds > 0 else 0.0


def _find(rows: list[dict[str, Any]], key: str, **match: Any) -> Any:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row.get(key)
    return None


_LAT_COLUMNS = [
    Column("p50_ms", "p50 ms", "{:.2f}"),
    Column("p99_ms", "p99 ms", "{:.2f}"),
    Column("p999_ms", "p99.9 ms", "{:.2f}"),
]
_CPU = Column("broker_cpu", "broker CPU", "{:.2f}")
_CLIENT_CPU = Column("client_cpu", "client CPU", "{:.2f}")


# -- produce -----------------------------------------------------------------------------------


def produce(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    result = ScenarioResult(
        "produce",
        f"producer throughput ({sizes.producers} producer(s), acks=1, linger.ms=5, "
        f"median of {sizes.repeats} run(s))",
    )
    result.columns = [
        Column("record_size", "size B"),
        Column("api", "api", "{}"),
        Column("records", "records"),
        Column("seconds", "s", "{:.2f}"),
        Column("records_per_s", "records/s"),
        Column("mb_per_s", "MB/s", "{:.1f}"),
        Column("runs_range", "runs' records/s", "{}"),
        *_LAT_COLUMNS,
        _CPU,
        _CLIENT_CPU,
    ]
    for size in sizes.record_sizes:
        for api in sizes.produce_apis:
            runs = [_produce_run(ctx, size, api) for _ in range(sizes.repeats)]
            row = _median_run(runs)
            row["runs_range"] = _range_text(r["records_per_s"] for r in runs)
            result.rows.append(row)
            lost = [r for r in runs if r["records"] != r["sent"]]
            if lost:
                result.notes.append(
                    f"{size} B {api}: {lost[0]['sent'] - lost[0]['records']} of "
                    f"{lost[0]['sent']} sent records are not in the log: {lost[0]['error']}"
                )
    for size, check in ((100, "records_per_s"), (1024, "mb_per_s")):
        rows = [r for r in result.rows if r["record_size"] == size]
        best = max(rows, key=lambda r: r[check]) if rows else None
        if size == 100 and sizes.producers != 1:
            continue
        result.targets.append(
            TargetCheck(
                "produce 100 B, one producer, acks=1" if size == 100 else "produce 1 KB",
                best[check] if best else None,
                820_000 if size == 100 else 250,
                "records/s" if size == 100 else "MB/s",
                note=f"api {best['api']}" if best else None,
            )
        )
    result.notes.append(
        "api batch: librdkafka's produce_batch, 1000 records a call; record: produce() per record"
    )
    result.notes.append(
        f"latency: librdkafka's, produce call to delivery report (queueing included), one record "
        f"in {LATENCY_SAMPLE_EVERY}; records: counted in the log's end offsets afterwards"
    )
    return result


def _produce_run(ctx: BenchContext, size: int, api: str) -> dict[str, Any]:
    """One produce run into a fresh topic: its row."""
    sizes = ctx.sizes
    topic = ctx.new_topic(f"produce-{size}", sizes.topic_partitions)
    per_producer = max(1, ctx.records_for(size) // sizes.producers)
    call = (
        produce_worker,
        {
            "bootstrap": ctx.bootstrap,
            "topic": topic,
            "records": per_producer,
            "record_size": size,
            "duration_s": sizes.duration_s,
            "api": api,
        },
    )
    settle_page_cache()
    with ctx.cpu_sampler() as cpu:
        runs: list[ProduceResult] = run_workers(
            [call] * sizes.producers, sizes.duration_s + WORKER_SLACK_S
        )
    began, ended = min(r.started for r in runs), max(r.ended for r in runs)
    records = ctx.end_offsets(topic)
    seconds = ended - began
    # Several producers: the worst of each percentile, and the first one's curve.
    row: dict[str, Any] = {
        "record_size": size,
        "api": api,
        "producers": sizes.producers,
        "sent": sum(r.sent for r in runs),
        "records": records,
        "error": next((r.first_error for r in runs if r.first_error), None),
        "seconds": seconds,
        "records_per_s": _rate(records, seconds),
        "mb_per_s": _rate(records * size, seconds) / MB,
        "broker_cpu": cpu.cores(began, ended),
        "client_cpu": sum(r.cpu_s for r in runs) / seconds if seconds > 0 else None,
        **_latency_fields(runs[0].latency),
    }
    for key, attr in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p999")):
        present = [getattr(r.latency, attr) for r in runs if r.latency is not None]
        row[key] = max(present) if present else None
    return row


def _median_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median records/s (the lower middle one of an even number)."""
    ordered = sorted(rows, key=lambda r: r["records_per_s"])
    return dict(ordered[(len(ordered) - 1) // 2], runs=len(rows))


def _range_text(rates: Iterable[float]) -> str:
    ordered = sorted(rates)
    if len(ordered) == 1:
        return "-"
    return f"{ordered[0] / 1000:,.0f}k-{ordered[-1] / 1000:,.0f}k"


# -- consume -----------------------------------------------------------------------------------


def consume(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    result = ScenarioResult(
        "consume",
        f"consumer throughput (one consumer, assign(), from offset 0, median of "
        f"{sizes.repeats} run(s))",
    )
    result.columns = [
        Column("record_size", "size B"),
        Column("records", "records"),
        Column("seconds", "s", "{:.2f}"),
        Column("records_per_s", "records/s"),
        Column("mb_per_s", "MB/s", "{:.1f}"),
        Column("runs_range", "runs' records/s", "{}"),
        Column("first_record_ms", "first record ms", "{:.1f}"),
        _CPU,
        _CLIENT_CPU,
    ]
    for size in sizes.record_sizes:
        topic = ctx.new_topic(f"consume-{size}", sizes.topic_partitions)
        loaded = ctx.load(topic, ctx.records_for(size), size)
        settle_page_cache()
        call = (
            consume_worker,
            {
                "bootstrap": ctx.bootstrap,
                "topic": topic,
                "expected": loaded.records,
                "timeout_s": sizes.duration_s + WORKER_SLACK_S,
            },
        )
        rows = []
        for _ in range(sizes.repeats):
            with ctx.cpu_sampler() as cpu:
                (run,) = run_workers([call], sizes.duration_s + 2 * WORKER_SLACK_S)
            if not run.complete:
                result.notes.append(f"{size} B: read {run.records} of {loaded.records} records")
            rows.append(_consume_row(size, run, cpu.cores(run.started, run.ended)))
        row = _median_run(rows)
        row["runs_range"] = _range_text(r["records_per_s"] for r in rows)
        result.rows.append(row)
    result.targets.append(
        TargetCheck(
            "consume 100 B",
            _find(result.rows, "records_per_s", record_size=100),
            1_000_000,
            "records/s",
        )
    )
    return result


def _consume_row(size: int, run: ConsumeResult, cpu: float | None) -> dict[str, Any]:
    return {
        "record_size": size,
        "records": run.records,
        "seconds": run.seconds,
        "records_per_s": _rate(run.records, run.seconds),
        "mb_per_s": _rate(run.payload_bytes, run.seconds) / MB,
        "first_record_ms": None if run.first_record_s is None else run.first_record_s * 1000,
        "complete": run.complete,
        "broker_cpu": cpu,
        "client_cpu": run.cpu_s / run.seconds if run.seconds > 0 else None,
    }


# -- end-to-end latency ------------------------------------------------------------------------


def latency(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    size = max(sizes.record_sizes[0], 8)
    result = ScenarioResult(
        "latency",
        f"end-to-end latency at {sizes.latency_rate:,} records/s "
        f"({size} B, linger.ms=1, acks=1, one partition)",
    )
    result.columns = [
        Column("rate", "target rec/s"),
        Column("achieved_rate", "sent rec/s"),
        Column("measured", "measured"),
        *_LAT_COLUMNS,
        Column("max_ms", "max ms", "{:.2f}"),
        Column("ack_p99_ms", "ack p99 ms", "{:.2f}"),
        Column("host_p99_ms", "host p99 ms", "{:.2f}"),
        Column("host_stalls_per_s", "host stalls/s", "{:.1f}"),
    ]
    topic = ctx.new_topic("latency", 1)
    warmup = min(1.0, sizes.duration_s * 0.2)
    calls: list[tuple[Callable[..., Any], dict[str, Any]]] = [
        (
            latency_consumer_worker,
            {
                "bootstrap": ctx.bootstrap,
                "topic": topic,
                "duration_s": sizes.duration_s,
                "warmup_s": warmup,
            },
        ),
        (
            paced_producer_worker,
            {
                "bootstrap": ctx.bootstrap,
                "topic": topic,
                "rate": sizes.latency_rate,
                "duration_s": sizes.duration_s,
                "record_size": size,
            },
        ),
    ]
    consumer: EndToEndResult
    producer: PacedProduceResult
    with HiccupMeter() as host:
        consumer, producer = run_workers(calls, sizes.duration_s + WORKER_SLACK_S)
    hiccups = host.summary()
    if not consumer.saw_end:
        result.notes.append(f"consumer got {consumer.received} of {producer.sent} records")
    ack = producer.ack_latency
    result.rows.append(
        {
            "rate": sizes.latency_rate,
            "achieved_rate": producer.achieved_rate,
            "sent": producer.sent,
            "received": consumer.received,
            "measured": consumer.measured,
            "record_size": size,
            **_latency_fields(consumer.latency),
            "ack_p99_ms": ack.p99 if ack else None,
            "ack_curve": [list(p) for p in ack.curve] if ack else None,
            "host_p99_ms": hiccups.p99 if hiccups else None,
            "host_max_ms": hiccups.max if hiccups else None,
            "host_stalls_per_s": host.stalls_per_s(),
        }
    )
    result.targets.append(
        TargetCheck(
            "end-to-end p99 at 10,000 records/s",
            consumer.latency.p99 if consumer.latency else None,
            5.0,
            "ms",
            higher_is_better=False,
            note=None if sizes.latency_rate == 10_000 else f"ran at {sizes.latency_rate:,}/s",
        )
    )
    result.notes.append(
        f"first {warmup:.1f} s of records not measured; send time from the value (monotonic ns)"
    )
    result.notes.append(
        f"host: how late a 1 ms sleep woke up during the run (p99), and how often a second it "
        f"was over {host.stall_ms:g} ms late; the end-to-end p99 follows it"
    )
    return result


# -- fan-out -----------------------------------------------------------------------------------


# librdkafka consumers (confluent-kafka), then the project's wire client counting records from
# batch headers: the cheapest consumer, which leaves the broker as the limit.
FANOUT_CLIENTS = ("librdkafka", "raw")


def fanout(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    groups = sizes.fanout_groups
    size = sizes.record_sizes[0]
    how = "subscribe, a group.id each" if ctx.options.use_groups else "assign(), one per group"
    result = ScenarioResult(
        "fanout",
        f"fan-out: N consumers each reading the whole topic ({how}, median of "
        f"{sizes.repeats} run(s))",
    )
    result.columns = [
        Column("client", "client", "{}"),
        Column("consumers", "consumers"),
        Column("records", "records"),
        Column("seconds", "s", "{:.2f}"),
        Column("records_per_s", "total rec/s"),
        Column("mb_per_s", "total MB/s", "{:.1f}"),
        Column("speedup", "x one", "{:.2f}"),
        Column("runs_range", "runs' total rec/s", "{}"),
        Column("first_record_ms", "first record ms", "{:.1f}"),
        _CPU,
        _CLIENT_CPU,
    ]
    topic = ctx.new_topic("fanout", sizes.topic_partitions)
    loaded = ctx.load(topic, ctx.records_for(size), size)
    settle_page_cache()
    for client in FANOUT_CLIENTS:
        first_row = len(result.rows)
        for count in (1, groups) if groups > 1 else (1,):
            rows = [
                _fanout_run(ctx, topic, loaded.records, count, client) for _ in range(sizes.repeats)
            ]
            row = _median_run(rows)
            row["runs_range"] = _range_text(r["records_per_s"] for r in rows)
            incomplete = max(r["incomplete"] for r in rows)
            if incomplete:
                result.notes.append(
                    f"{count} {client} consumers: {incomplete} did not read everything"
                )
            result.rows.append(row)
        base = result.rows[first_row]["records_per_s"]
        for row in result.rows[first_row:]:
            row["speedup"] = row["records_per_s"] / base if base else None
    for client, description in (
        ("librdkafka", f"{groups} groups together vs one group"),
        ("raw", f"{groups} raw fetchers together vs one (the broker's fan-out ceiling)"),
    ):
        speedup = (
            _find(result.rows, "speedup", consumers=groups, client=client) if groups > 1 else None
        )
        result.targets.append(
            TargetCheck(
                description,
                speedup,
                groups / 2,
                "x",
                note=None if groups == 8 else "the issue's target is 8 groups ≥ 4x",
            )
        )
    result.notes.append(
        f"{size} B records; a consumer's clock starts at assign(), or with --use-groups at its "
        "first record (after joining; 'first record' is the slowest consumer's wait for it)"
    )
    return result


def _fanout_run(
    ctx: BenchContext, topic: str, expected: int, count: int, client: str
) -> dict[str, Any]:
    """``count`` consumers (``client`` of :data:`FANOUT_CLIENTS`) reading all of ``topic`` at
    once: their row."""
    sizes = ctx.sizes
    calls: list[tuple[Callable[..., ConsumeResult], dict[str, Any]]]
    if client == "raw":
        calls = [
            (
                raw_consume_worker,
                {
                    "bootstrap": ctx.bootstrap,
                    "topic": topic,
                    "expected": expected,
                    "record_size": sizes.record_sizes[0],
                    "timeout_s": sizes.duration_s + WORKER_SLACK_S,
                    "min_s": min(RAW_FANOUT_MIN_S, sizes.duration_s / 4),
                },
            )
        ] * count
    else:
        calls = [
            (
                consume_worker,
                {
                    "bootstrap": ctx.bootstrap,
                    "topic": topic,
                    "expected": expected,
                    "timeout_s": sizes.duration_s + WORKER_SLACK_S,
                    "group_id": (
                        f"bench-fanout-{count}-{i}-{uuid.uuid4().hex[:6]}"
                        if ctx.options.use_groups
                        else None
                    ),
                },
            )
            for i in range(count)
        ]
    with ctx.cpu_sampler() as cpu:
        runs = run_workers(calls, sizes.duration_s + 2 * WORKER_SLACK_S)
    began, ended = min(r.started for r in runs), max(r.ended for r in runs)
    records = sum(r.records for r in runs)
    seconds = ended - began
    return {
        "client": client,
        "consumers": count,
        "records": records,
        "seconds": seconds,
        "records_per_s": _rate(records, seconds),
        "mb_per_s": _rate(sum(r.payload_bytes for r in runs), seconds) / MB,
        "slowest_s": max(r.seconds for r in runs),
        "first_record_ms": max((r.first_record_s or 0.0) for r in runs) * 1000,
        "broker_cpu": cpu.cores(began, ended),
        "client_cpu": sum(r.cpu_s for r in runs) / seconds if seconds > 0 else None,
        "incomplete": sum(1 for r in runs if not r.complete),
    }


# -- partition scaling -------------------------------------------------------------------------


def partitions(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    size = sizes.record_sizes[0]
    result = ScenarioResult(
        "partitions",
        f"partition scaling ({size} B, one producer, records round robin over the partitions)",
    )
    result.columns = [
        Column("partitions", "partitions"),
        Column("create_s", "create s", "{:.2f}"),
        Column("records_per_s", "records/s"),
        Column("mb_per_s", "MB/s", "{:.1f}"),
        Column("p99_ms", "p99 ms", "{:.2f}"),
        Column("rss_idle_mb", "RSS idle MB", "{:.1f}"),
        Column("rss_mb", "RSS after MB", "{:.1f}"),
        _CPU,
    ]
    for count in sizes.partition_counts:
        with ctx.fresh_broker() as broker:
            address = broker.bootstrap if broker else ctx.bootstrap
            idle = broker.rss() if broker else None
            started = time.monotonic()
            topic = ctx.new_topic(f"partitions-{count}", count, address)
            created = time.monotonic() - started
            call = (
                produce_worker,
                {
                    "bootstrap": address,
                    "topic": topic,
                    "records": ctx.records_for(size),
                    "record_size": size,
                    "duration_s": sizes.duration_s,
                    "partitions": count,
                    # a record to each partition in turn: every request touches them all
                    "api": "record",
                },
            )
            with ctx.cpu_sampler(broker) as cpu:
                (run,) = run_workers([call], sizes.duration_s + WORKER_SLACK_S)
            rss = broker.rss() if broker else None
            records = ctx.end_offsets(topic, address)
        result.rows.append(
            {
                "partitions": count,
                "create_s": created,
                "records": records,
                "seconds": run.seconds,
                "records_per_s": _rate(records, run.seconds),
                "mb_per_s": _rate(records * size, run.seconds) / MB,
                "rss_idle_mb": None if idle is None else idle / MB,
                "rss_mb": None if rss is None else rss / MB,
                "broker_cpu": cpu.cores(run.started, run.ended),
                **_latency_fields(run.latency),
            }
        )
    rate_10 = _find(result.rows, "records_per_s", partitions=10)
    rate_1000 = _find(result.rows, "records_per_s", partitions=1000)
    result.targets.append(
        TargetCheck(
            "produce rate, 10 partitions / 1000 partitions",
            rate_10 / rate_1000 if rate_10 and rate_1000 else None,
            2.0,
            "x",
            higher_is_better=False,
            note=_rss_note(result.rows),
        )
    )
    if ctx.broker is None:
        result.notes.append("RSS not measured: the broker is not one the harness started")
    else:
        result.notes.append("a fresh broker per partition count; RSS is VmRSS of its process")
    return result


def _rss_note(rows: list[dict[str, Any]]) -> str | None:
    low = _find(rows, "rss_mb", partitions=10)
    high = _find(rows, "rss_mb", partitions=1000)
    if low is None or high is None:
        return None
    return f"RSS {low:.0f} MB at 10 partitions, {high:.0f} MB at 1000"


# -- recovery ----------------------------------------------------------------------------------

_RECOVERY_RECORD_SIZE = 1024


def _timed_restart(broker: ChildBroker, topic: str) -> tuple[float, float]:
    """Restart ``broker`` (stopped) on its port: seconds to the "listening" line and to the
    first Metadata response serving ``topic`` with leaders."""
    broker.spawn()
    deadline = broker.spawned_at + 600
    while True:
        if not broker.alive():
            broker.wait_listening(1)  # raises with the broker's output
        with contextlib.suppress(ClientError):  # not listening yet
            if topic_layout(broker.bootstrap, topic, timeout=5) is not None:
                ready = time.monotonic() - broker.spawned_at
                return broker.wait_listening(), ready
        if time.monotonic() > deadline:
            raise RuntimeError("broker not serving metadata 600 s after restart")
        time.sleep(0.002)


@contextlib.contextmanager
def _scratch_broker(ctx: BenchContext, *overrides: str) -> Iterator[ChildBroker]:
    """A broker (not yet started) over a new directory, killed and removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="recovery-", dir=ctx.work_dir))
    broker = ChildBroker(directory, (*overrides, *ctx.options.broker_overrides))
    try:
        yield broker
    finally:
        broker.kill()
        shutil.rmtree(directory, ignore_errors=True)


def _load_new_topic(ctx: BenchContext, broker: ChildBroker, megabytes: float) -> tuple[str, int]:
    """Start ``broker``, make a one-partition topic and write about ``megabytes`` MB to it;
    the topic and the bytes written."""
    broker.start()
    topic = ctx.new_topic("recovery", 1, broker.bootstrap)
    loaded = ctx.load(
        topic, _mb_records(megabytes), _RECOVERY_RECORD_SIZE, bootstrap=broker.bootstrap
    )
    return topic, loaded.wire_bytes


def _wait_for_checkpointed_rolls(broker: ChildBroker, topic: str, timeout_s: float) -> int:
    """Wait until the recovery point checkpointed for partition 0 of ``topic`` reaches the base
    offset of its active segment (every rolled segment fsynced, and the checkpoint written);
    the bytes in the rolled segments."""
    partition_dir = broker.data_dir / f"{topic}-0"
    deadline = time.monotonic() + timeout_s
    while True:
        active = max(int(f.stem) for f in partition_dir.glob("*.log"))
        recovery_point = read_checkpoint(broker.data_dir / RECOVERY_POINT_CHECKPOINT).get(
            (topic, 0), 0
        )
        if recovery_point >= active:
            return sum(
                f.stat().st_size for f in partition_dir.glob("*.log") if int(f.stem) < active
            )
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"recovery point {recovery_point} short of the active segment {active} after "
                f"{timeout_s:.0f} s"
            )
        time.sleep(0.05)


def _mb_records(megabytes: float) -> int:
    return max(1, int(megabytes * MB / _RECOVERY_RECORD_SIZE))


# Kafka's 1 GB segments would not roll in the smaller runs; a short checkpoint interval keeps
# the wait for the recovery point short.
_RUNNING_OVERRIDES = (
    f"log.segment.bytes={16 * 1024 * 1024}",
    "log.flush.offset.checkpoint.interval.ms=500",
)


def recovery(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    result = ScenarioResult("recovery", "restart time after kill -9 as the unflushed log grows")
    result.columns = [
        Column("log_mb", "log MB", "{:,.1f}"),
        Column("crash_listen_s", "kill-9 → listening s", "{:.2f}"),
        Column("crash_ready_s", "kill-9 → metadata s", "{:.2f}"),
        Column("clean_listen_s", "clean → listening s", "{:.2f}"),
        Column("tail_mb", "tail MB", "{:,.1f}"),
        Column("tail_ready_s", "flushed+tail kill-9 → metadata s", "{:.2f}"),
        Column("running_flushed_mb", "running: rolled MB", "{:,.1f}"),
        Column("running_ready_s", "running kill-9 → metadata s", "{:.2f}"),
    ]
    if ctx.broker is None:
        result.status = "skipped"
        result.notes.append("needs a broker the harness starts (no --bootstrap-server)")
        return result
    tail_mb = min(sizes.recovery_mb)

    # An empty broker's start: the interpreter and imports, the floor under every restart.
    with _scratch_broker(ctx) as empty:
        empty_start = empty.start()
    result.rows.append({"log_mb": 0, "crash_listen_s": empty_start, "kind": "empty broker"})

    for megabytes in sorted(sizes.recovery_mb):
        row: dict[str, Any] = {}
        # All of the log unflushed (flush.ms is off by default): kill -9, restart.
        with _scratch_broker(ctx) as broker:
            topic, written = _load_new_topic(ctx, broker, megabytes)
            broker.kill()
            row["log_mb"] = written / MB
            row["crash_listen_s"], row["crash_ready_s"] = _timed_restart(broker, topic)
        # The same log flushed by a clean stop, then a small unflushed tail: kill -9, restart.
        with _scratch_broker(ctx) as broker:
            topic, _ = _load_new_topic(ctx, broker, megabytes)
            broker.stop()
            row["clean_listen_s"], _ = _timed_restart(broker, topic)
            tail = ctx.load(
                topic, _mb_records(tail_mb), _RECOVERY_RECORD_SIZE, bootstrap=broker.bootstrap
            )
            broker.kill()
            row["tail_mb"] = tail.wire_bytes / MB
            row["tail_listen_s"], row["tail_ready_s"] = _timed_restart(broker, topic)
        # A broker that keeps running: segments roll, each rolled one is fsynced in the
        # background and the recovery point is checkpointed; kill -9 then rereads the tail.
        with _scratch_broker(ctx, *_RUNNING_OVERRIDES) as broker:
            topic, _ = _load_new_topic(ctx, broker, megabytes)
            rolled_bytes = _wait_for_checkpointed_rolls(broker, topic, TOPIC_TIMEOUT_S)
            broker.kill()
            row["running_flushed_mb"] = rolled_bytes / MB
            row["running_listen_s"], row["running_ready_s"] = _timed_restart(broker, topic)
        row["recovery_s_per_mb"] = max(0.0, row["crash_listen_s"] - empty_start) / row["log_mb"]
        result.rows.append(row)

    measured = [r for r in result.rows if r.get("crash_ready_s") is not None]
    smallest, largest = measured[0], measured[-1]
    result.targets.append(
        TargetCheck(
            "restart: small tail over the largest flushed log vs the same tail alone",
            largest["tail_ready_s"] / smallest["crash_ready_s"],
            1.5,
            "x",
            higher_is_better=False,
            note=f"recovery ∝ unflushed tail; {largest['log_mb']:.0f} MB flushed + "
            f"{largest['tail_mb']:.1f} MB tail vs {smallest['log_mb']:.1f} MB unflushed",
        )
    )
    result.targets.append(
        TargetCheck(
            "restart: kill -9 of a running broker, largest log vs smallest",
            largest["running_ready_s"] / smallest["running_ready_s"],
            1.5,
            "x",
            higher_is_better=False,
            note="segments roll and are flushed in the background; only the active one is reread",
        )
    )
    result.notes.append(
        f"an empty broker starts in {empty_start:.2f} s; {_RECOVERY_RECORD_SIZE} B records; "
        "times from spawn of the restarted process"
    )
    result.notes.append(
        "running: " + ", ".join(_RUNNING_OVERRIDES) + "; killed once the checkpointed recovery "
        "point reached the active segment"
    )
    return result


# -- raw ---------------------------------------------------------------------------------------


def raw(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    result = ScenarioResult(
        "raw",
        f"raw pipelined Produce ({sizes.raw_connections} connections, {sizes.raw_window} in "
        "flight each, pre-built uncompressed batches, acks=1)",
    )
    result.columns = [
        Column("record_size", "size B"),
        Column("batch_records", "batch"),
        Column("records_per_s", "records/s"),
        Column("mb_per_s", "MB/s", "{:.1f}"),
        Column("requests_per_s", "requests/s"),
        *_LAT_COLUMNS,
        _CPU,
    ]
    for size in sizes.record_sizes:
        # A fresh broker for each size, as for the partition ceilings: nothing of the earlier
        # scenarios' topics in its way.
        with ctx.fresh_broker() as broker:
            address = broker.bootstrap if broker else ctx.bootstrap
            topic = ctx.new_topic(f"raw-{size}", sizes.raw_connections, address)
            call = (
                raw_worker,
                {
                    "bootstrap": address,
                    "topic": topic,
                    "record_size": size,
                    "batch_records": ctx.batch_records(size),
                    "connections": sizes.raw_connections,
                    "window": sizes.raw_window,
                    "duration_s": sizes.duration_s,
                    "total_records": RAW_MAX_BYTES // size,
                },
            )
            settle_page_cache()
            with ctx.cpu_sampler(broker) as cpu:
                (run,) = run_workers([call], sizes.duration_s + WORKER_SLACK_S)
        if run.errors:
            result.notes.append(f"{size} B: {run.errors} requests failed: {run.first_error}")
        cores = cpu.cores(run.started, run.ended)
        result.rows.append(_raw_row(size, ctx.batch_records(size), run, cores))
    result.targets.append(
        TargetCheck(
            "broker ceiling, 100 B (the produce target)",
            _find(result.rows, "records_per_s", record_size=100),
            820_000,
            "records/s",
        )
    )
    result.targets.append(
        TargetCheck(
            "broker ceiling, 1 KB", _find(result.rows, "mb_per_s", record_size=1024), 250, "MB/s"
        )
    )
    result.notes.append("latency: per Produce request, send to response")
    return result


def _raw_row(size: int, batch: int, run: RawResult, cpu: float | None) -> dict[str, Any]:
    return {
        "record_size": size,
        "batch_records": batch,
        "connections": run.connections,
        "records": run.records,
        "seconds": run.seconds,
        "records_per_s": _rate(run.records, run.seconds),
        "mb_per_s": _rate(run.payload_bytes, run.seconds) / MB,
        "wire_mb_per_s": _rate(run.wire_bytes, run.seconds) / MB,
        "requests_per_s": _rate(run.requests, run.seconds),
        "errors": run.errors,
        "broker_cpu": cpu,
        **_latency_fields(run.latency),
    }


SCENARIO_FUNCTIONS: dict[str, Callable[[BenchContext], ScenarioResult]] = {
    "produce": produce,
    "consume": consume,
    "latency": latency,
    "fanout": fanout,
    "partitions": partitions,
    "recovery": recovery,
    "raw": raw,
}
