"""The cluster scenarios: a ZooKeeper and three ``odradek serve`` processes the harness starts.

Each scenario starts a fresh :class:`~odradek.testing.RunningCluster` (brokers 1..3 on the run's
one ZooKeeper, a chroot each; ``--broker-option`` goes to every broker) through
:meth:`BenchContext.cluster <odradek.bench.scenarios.BenchContext.cluster>`, and stops it after.
The brokers, the load and ZooKeeper share the machine's cores, so every row carries each broker
process's CPU (user + system seconds, from ``/proc``) per million records beside its figures: a
replicated write costs the leader and both followers.

- ``cluster-produce``: the produce load (librdkafka ``produce_batch``, and the raw pipelined
  load) to an RF=1 topic with acks=1, then to an RF=3 topic with acks=all, on one cluster.
- ``cluster-latency``: end-to-end latency at a fixed rate, as ``latency`` measures it, RF=1
  acks=1 and RF=3 acks=all (a record is readable once every in-sync follower has it).
- ``cluster-failover``: under an idempotent acks=all load, kill -9 of a partition leader (not
  the controller) and the time until an acks=all Produce succeeds on its successor; the broker
  restarted; then SIGTERM of a leader and the time until Metadata shows it leading nothing.
- ``cluster-catchup``: a follower SIGSTOPped until it has left every ISR, ``--catchup-mb`` MB
  produced, SIGCONT, and the time until its logs are as long as the leaders' and it is back in
  every ISR.

A scenario that sees records lost or a broker that never recovers raises, with what it saw: a
broker bug, not a slow figure.

``cluster-produce`` and ``cluster-latency`` take their cluster from
:meth:`BenchContext.measured_cluster <odradek.bench.scenarios.BenchContext.measured_cluster>`, so
that ``odradek bench --peer kafka --cluster`` runs them unchanged on Apache Kafka's three brokers
(:class:`~odradek.bench.peer.KafkaCluster`); the failover and catch-up scenarios time ZooKeeper
sessions and are odradek's alone.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from odradek.bench.broker import BrokerCluster
from odradek.bench.scenarios import (
    MB,
    WORKER_SLACK_S,
    BenchContext,
    Column,
    CpuSampler,
    HiccupMeter,
    ScenarioResult,
    TargetCheck,
    _latency_fields,
    _rate,
    settle_page_cache,
)
from odradek.bench.wire import (
    TopicState,
    log_sizes,
    make_batch,
    produce_once,
    raw_load,
    topic_state,
)
from odradek.bench.workers import (
    AckTimesResult,
    EndToEndResult,
    PacedProduceResult,
    ProduceResult,
    RawResult,
    acked_load_worker,
    latency_consumer_worker,
    paced_producer_worker,
    produce_worker,
    raw_worker,
    run_workers,
)
from odradek.client.core import ClientError
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.testing import RunningCluster

REPLICAS = 3
ACKS_ALL = -1
SESSION_TIMEOUT_KEY = "zookeeper.session.timeout.ms"
FAILOVER_PARTITIONS = 3
FAILOVER_RATE = 2000  # records/s of the acks=all load the failover happens under
FAILOVER_RECORD_SIZE = 100
CATCHUP_PARTITIONS = 3
CATCHUP_RECORD_SIZE = 1024
POLL_S = 0.005  # between Metadata requests while a leadership moves
WAIT_S = 60.0  # on top of the session timeout for anything a cluster should reach


def _skipped_without_cluster(ctx: BenchContext, result: ScenarioResult) -> bool:
    if ctx.options.bootstrap is None:
        return False
    result.status = "skipped"
    result.notes.append("needs a cluster the harness starts (no --bootstrap-server)")
    return True


# -- broker CPU --------------------------------------------------------------------------------


@contextlib.contextmanager
def _broker_cpu(cluster: BrokerCluster) -> Iterator[dict[int, CpuSampler]]:
    """A CPU sampler on each running broker process, by broker id."""
    with contextlib.ExitStack() as stack:
        samplers: dict[int, CpuSampler] = {}
        for broker_id, broker in sorted(cluster.brokers.items()):
            if broker.process is not None and broker.process.poll() is None:
                samplers[broker_id] = stack.enter_context(CpuSampler(broker.process.pid))
        yield samplers


def _cpu_fields(
    samplers: dict[int, CpuSampler], start: float, end: float, records: int
) -> dict[str, Any]:
    """Each broker's CPU seconds over [start, end] per million ``records``, and all of them in
    cores."""
    used = {b: s.seconds(start, end) for b, s in samplers.items()}
    per_million = {
        b: (None if u is None or records <= 0 else u / records * 1e6) for b, u in used.items()
    }
    known = [u for u in used.values() if u is not None]
    return {
        "broker_cpu_s": used,
        "broker_cpu_s_per_m": per_million,
        "broker_cpu_text": "/".join("-" if v is None else f"{v:.1f}" for v in per_million.values()),
        "broker_cores": sum(known) / (end - start) if known and end > start else None,
    }


_CPU_COLUMNS = [
    Column("broker_cpu_text", "CPU s/M rec b1/b2/b3", "{}"),
    Column("broker_cores", "brokers' cores", "{:.2f}"),
]
_CPU_NOTE = (
    "CPU s/M rec: each broker process's user+system CPU seconds over the measured window per "
    "million records (of the row); brokers' cores: all three together, in cores"
)


def _tail(cluster: RunningCluster, broker_id: int, lines: int = 40) -> str:
    """The last lines broker ``broker_id`` logged: the evidence when it misbehaves."""
    return "".join(cluster.brokers[broker_id].output[-lines:])


def _address(cluster: BrokerCluster, broker_id: int) -> str:
    return cluster.brokers[broker_id].bootstrap


def _state(address: str, topic: str) -> TopicState | None:
    """The topic's state as the broker at ``address`` answers it; None while it cannot."""
    with contextlib.suppress(ClientError, OSError):
        return topic_state(address, topic, timeout=5)
    return None


def _wait_for(
    condition: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.05
) -> Any:
    """Poll ``condition`` until it returns something true (returned); RuntimeError with the
    last answer after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval_s)
    raise RuntimeError(f"{what}: not reached within {timeout_s:.0f} s (last: {last!r})")


def _fully_replicated(address: str, topic: str, replicas: int) -> TopicState | None:
    state = _state(address, topic)
    if state is None or not state.partitions:
        return None
    if all(p.leader >= 0 and len(p.isr) == replicas for p in state.partitions.values()):
        return state
    return None


def _wait_replicated(
    address: str, topic: str, replicas: int, timeout_s: float = WAIT_S, what: str = ""
) -> TopicState:
    """Wait until every partition of ``topic`` has a leader and ``replicas`` in its ISR."""
    state: TopicState = _wait_for(
        lambda: _fully_replicated(address, topic, replicas),
        timeout_s,
        what or f"{topic}: a leader and {replicas} in-sync replicas for every partition",
    )
    return state


def topic_config(replicas: int) -> dict[str, str]:
    """A replicated topic's config: an acks=all write needs two in-sync copies, the usual
    production setting (RF=3, min.insync.replicas=2), so that losing one broker keeps it
    writable and losing two refuses writes rather than leave one copy."""
    return {"min.insync.replicas": "2"} if replicas >= REPLICAS else {}


# -- produce -----------------------------------------------------------------------------------

# (replication factor, acks) of the two runs compared
_PRODUCE_CONFIGS = ((1, 1), (REPLICAS, ACKS_ALL))


def cluster_produce(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    result = ScenarioResult(
        "cluster-produce",
        f"produce to 3 brokers: RF=1 acks=1 vs RF=3 acks=all ({sizes.topic_partitions} "
        "partitions; librdkafka produce_batch, and the raw pipelined load)",
    )
    result.columns = [
        Column("record_size", "size B"),
        Column("load", "load", "{}"),
        Column("config", "RF/acks", "{}"),
        Column("records", "records"),
        Column("seconds", "s", "{:.2f}"),
        Column("records_per_s", "records/s"),
        Column("mb_per_s", "MB/s", "{:.1f}"),
        Column("p50_ms", "p50 ms", "{:.2f}"),
        Column("p99_ms", "p99 ms", "{:.2f}"),
        Column("ratio", "x RF=1", "{:.2f}"),
        Column("settle_s", "in sync after s", "{:.1f}"),
        *_CPU_COLUMNS,
    ]
    if _skipped_without_cluster(ctx, result):
        return result
    with ctx.measured_cluster() as cluster:
        address = _address(cluster, 1)
        for size in sizes.record_sizes:
            for load in ("librdkafka", "raw"):
                base: float | None = None
                for replicas, acks in _PRODUCE_CONFIGS:
                    row = _cluster_produce_run(ctx, cluster, address, size, load, replicas, acks)
                    if base is None:
                        base = row["records_per_s"]
                    row["ratio"] = row["records_per_s"] / base if base else None
                    result.rows.append(row)
                    if row.get("lost"):
                        result.notes.append(f"{size} B {load} {row['config']}: {row['lost']}")
                ratio = result.rows[-1]["ratio"]
                result.targets.append(
                    TargetCheck(
                        f"{size} B {load}: RF=3 acks=all / RF=1 acks=1",
                        ratio,
                        0.5,
                        "x",
                        note=f"RF=3 {result.rows[-1]['records_per_s']:,.0f} rec/s",
                    )
                )
    result.notes.append(
        "librdkafka: produce_worker (produce_batch, linger.ms=5), records counted from the end "
        "offsets; raw: pre-built batches over pipelined connections to each leader, records "
        "acknowledged; p50/p99: librdkafka's delivery latency (queueing included) / the raw "
        "Produce round trip"
    )
    result.notes.append(
        "a connection's responses leave in request order; an acks=all request's wait for the "
        "followers (fetch, append, fetch again before the high watermark passes it) overlaps "
        "the connection's next requests, at most 8 taken and unanswered (Kafka mutes the "
        "channel for the whole wait): the raw load's acks=all rate is at most connections x "
        "min(window, 8) x records per request / its p50"
    )
    result.notes.append(
        "in sync after s: after an RF=3 run, how long until every follower was in the ISR "
        "again (not timed in the run; a follower that fell behind catches up before the next)"
    )
    result.notes.append(_CPU_NOTE)
    return result


def _cluster_produce_run(
    ctx: BenchContext,
    cluster: BrokerCluster,
    address: str,
    size: int,
    load: str,
    replicas: int,
    acks: int,
) -> dict[str, Any]:
    sizes = ctx.sizes
    topic = ctx.new_topic(
        f"cluster-produce-{replicas}",
        sizes.topic_partitions,
        address,
        replicas,
        topic_config(replicas),
    )
    _wait_replicated(address, topic, replicas)
    records_wanted = ctx.records_for(size)
    settle_page_cache()
    run: ProduceResult | RawResult
    if load == "librdkafka":
        call: tuple[Callable[..., Any], dict[str, Any]] = (
            produce_worker,
            {
                "bootstrap": cluster.bootstrap,
                "topic": topic,
                "records": records_wanted,
                "record_size": size,
                "duration_s": sizes.duration_s,
                "acks": acks,
                "api": "batch",
            },
        )
    else:
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
                "total_records": records_wanted,
                "acks": acks,
            },
        )
    with _broker_cpu(cluster) as cpus:
        (run,) = run_workers([call], sizes.duration_s + WORKER_SLACK_S)
    in_log = ctx.end_offsets(topic, address)
    settle_s = _settle_replication(address, topic, replicas)
    lost = None
    if isinstance(run, ProduceResult):
        records = in_log
        if in_log != run.sent:
            lost = (
                f"{run.sent - in_log} of {run.sent} sent records not in the log ({run.first_error})"
            )
    else:
        records = run.records
        if run.errors or in_log < run.records:
            lost = f"{run.errors} requests failed ({run.first_error}); {in_log} in the log"
    return {
        "record_size": size,
        "load": load,
        "config": f"RF={replicas} acks={'all' if acks == ACKS_ALL else acks}",
        "replication_factor": replicas,
        "acks": acks,
        "records": records,
        "seconds": run.seconds,
        "records_per_s": _rate(records, run.seconds),
        "mb_per_s": _rate(records * size, run.seconds) / MB,
        "lost": lost,
        "settle_s": settle_s,
        **_latency_fields(run.latency),
        **_cpu_fields(cpus, run.started, run.ended, records),
    }


def _settle_replication(address: str, topic: str, replicas: int) -> float | None:
    """Wait, after a run, until every replica of ``topic`` is in sync again; returns how long
    that took (None for RF=1). A follower that fell out of the ISR during the run is still
    copying when the producer stops: left running, its catch-up would be measured as the next
    run's load (the end-to-end latency run after the produce runs saw p50s of ~0.5-1 s on both
    brokers from it)."""
    if replicas <= 1:
        return None
    began = time.monotonic()
    _wait_replicated(
        address, topic, replicas, what=f"{topic}: followers back in sync after the run"
    )
    return time.monotonic() - began


# -- latency -----------------------------------------------------------------------------------


def cluster_latency(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    size = max(sizes.record_sizes[0], 8)
    result = ScenarioResult(
        "cluster-latency",
        f"end-to-end latency on 3 brokers at {sizes.latency_rate:,} records/s ({size} B, "
        "linger.ms=1, one partition): RF=1 acks=1 vs RF=3 acks=all",
    )
    result.columns = [
        Column("config", "RF/acks", "{}"),
        Column("achieved_rate", "sent rec/s"),
        Column("measured", "measured"),
        Column("p50_ms", "p50 ms", "{:.2f}"),
        Column("p99_ms", "p99 ms", "{:.2f}"),
        Column("p999_ms", "p99.9 ms", "{:.2f}"),
        Column("ack_p99_ms", "ack p99 ms", "{:.2f}"),
        Column("host_p99_ms", "host p99 ms", "{:.2f}"),
        Column("host_stalls_per_s", "host stalls/s", "{:.1f}"),
        *_CPU_COLUMNS,
    ]
    if _skipped_without_cluster(ctx, result):
        return result
    warmup = min(1.0, sizes.duration_s * 0.2)
    with ctx.measured_cluster() as cluster:
        address = _address(cluster, 1)
        for replicas, acks in _PRODUCE_CONFIGS:
            topic = ctx.new_topic(
                f"cluster-latency-{replicas}", 1, address, replicas, topic_config(replicas)
            )
            _wait_replicated(address, topic, replicas)
            settle_page_cache()
            common = {"bootstrap": cluster.bootstrap, "topic": topic}
            calls: list[tuple[Callable[..., Any], dict[str, Any]]] = [
                (
                    latency_consumer_worker,
                    {**common, "duration_s": sizes.duration_s, "warmup_s": warmup},
                ),
                (
                    paced_producer_worker,
                    {
                        **common,
                        "rate": sizes.latency_rate,
                        "duration_s": sizes.duration_s,
                        "record_size": size,
                        "acks": acks,
                    },
                ),
            ]
            consumer: EndToEndResult
            producer: PacedProduceResult
            with HiccupMeter() as host, _broker_cpu(cluster) as cpus:
                began = time.monotonic()
                consumer, producer = run_workers(calls, sizes.duration_s + WORKER_SLACK_S)
                ended = time.monotonic()
            if not consumer.saw_end:
                result.notes.append(
                    f"RF={replicas}: consumer got {consumer.received} of {producer.sent} records"
                )
            hiccups = host.summary()
            ack = producer.ack_latency
            result.rows.append(
                {
                    "config": f"RF={replicas} acks={'all' if acks == ACKS_ALL else acks}",
                    "replication_factor": replicas,
                    "acks": acks,
                    "rate": sizes.latency_rate,
                    "achieved_rate": producer.achieved_rate,
                    "sent": producer.sent,
                    "received": consumer.received,
                    "measured": consumer.measured,
                    "record_size": size,
                    **_latency_fields(consumer.latency),
                    "ack_p99_ms": ack.p99 if ack else None,
                    "host_p99_ms": hiccups.p99 if hiccups else None,
                    "host_stalls_per_s": host.stalls_per_s(),
                    # the window includes the workers' start-up: CPU per record is an upper bound
                    **_cpu_fields(cpus, began, ended, producer.sent),
                }
            )
    replicated = result.rows[-1]
    result.targets.append(
        TargetCheck(
            "end-to-end p99, RF=3 acks=all, at 10,000 records/s",
            replicated.get("p99_ms"),
            10.0,
            "ms",
            higher_is_better=False,
            note=None if sizes.latency_rate == 10_000 else f"ran at {sizes.latency_rate:,}/s",
        )
    )
    result.notes.append(
        f"as 'latency': first {warmup:.1f} s not measured, send time in the value; a record "
        "reaches the consumer once the high watermark passes it (every ISR follower fetched it)"
    )
    result.notes.append(_CPU_NOTE + " (window includes the workers' start-up)")
    return result


# -- failover ----------------------------------------------------------------------------------


class _Load:
    """:func:`acked_load_worker` running on a thread of the harness until :meth:`stop`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, max_s: float) -> None:
        self._stop = multiprocessing.get_context("spawn").Event()
        call = (
            acked_load_worker,
            {
                "bootstrap": bootstrap,
                "topic": topic,
                "partitions": partitions,
                "rate": FAILOVER_RATE,
                "record_size": FAILOVER_RECORD_SIZE,
                "stop": self._stop,
                "max_s": max_s,
            },
        )
        self._result: AckTimesResult | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                (self._result,) = run_workers([call], max_s + WORKER_SLACK_S)
            except BaseException as e:
                self._error = e

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self) -> AckTimesResult:
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def _first_ack_after(load: AckTimesResult, partition: int, moment: float) -> float | None:
    """When the load's first record on ``partition`` was acknowledged after ``moment``."""
    for at, _ in load.acks.get(partition, []):
        if at > moment:
            return at
    return None


def _longest_gap(load: AckTimesResult, partition: int, start: float, end: float) -> float | None:
    times = [at for at, _ in load.acks.get(partition, []) if start <= at <= end]
    if len(times) < 2:
        return None
    return max(b - a for a, b in itertools.pairwise(times))


def cluster_failover(ctx: BenchContext) -> ScenarioResult:
    result = ScenarioResult(
        "cluster-failover",
        f"leader failover under an idempotent acks=all load ({FAILOVER_RATE:,} records/s, RF=3, "
        f"{FAILOVER_PARTITIONS} partitions): kill -9, and controlled shutdown (SIGTERM)",
    )
    result.columns = [
        Column("event", "event", "{}"),
        Column("broker", "broker"),
        Column("partitions_led", "led"),
        Column("metadata_s", "→ new leaders in Metadata s", "{:.3f}"),
        Column("first_ack_s", "→ first acks=all ack s", "{:.3f}"),
        Column("client_first_ack_s", "→ librdkafka's first ack s", "{:.3f}"),
        Column("exit_s", "→ process exit s", "{:.3f}"),
        Column("back_in_isr_s", "restart → in every ISR s", "{:.2f}"),
    ]
    if _skipped_without_cluster(ctx, result):
        return result
    with ctx.cluster() as cluster:
        session_ms = int(cluster.settings[SESSION_TIMEOUT_KEY])
        limit_s = session_ms / 1000 + WAIT_S
        first = _address(cluster, 1)
        topic = ctx.new_topic("failover", FAILOVER_PARTITIONS, first, REPLICAS)
        state = _wait_replicated(first, topic, REPLICAS)
        load = _Load(cluster.bootstrap, topic, FAILOVER_PARTITIONS, max_s=10 * limit_s)
        try:
            _wait_for(
                lambda: ctx.end_offsets(topic, first) >= FAILOVER_RATE // 2,
                WAIT_S,
                "the acks=all load under way",
            )
            # kill -9 of a leader that is not the controller (a controller's death adds an
            # election of its own); then it comes back
            state = _wait_for(lambda: _state(first, topic), WAIT_S, "metadata")
            victim = next(
                p.leader for p in state.partitions.values() if p.leader != state.controller
            )
            kill = _kill_leader(cluster, topic, state, victim, limit_s)
            restarted = time.monotonic()
            cluster.start_broker(victim)
            survivor = _address(cluster, kill["observer"])
            _wait_replicated(
                survivor, topic, REPLICAS, limit_s, f"broker {victim} back in every ISR"
            )
            kill["back_in_isr_s"] = time.monotonic() - restarted
            # SIGTERM of a leader (not the controller, if one such leads)
            state = _wait_for(lambda: _state(survivor, topic), WAIT_S, "metadata")
            leaders = sorted({p.leader for p in state.partitions.values()})
            target = next((b for b in leaders if b != state.controller), leaders[0])
            shutdown = _controlled_shutdown(cluster, topic, state, target, limit_s)
        except BaseException:
            # the scenario's own failure is the one to report, not the load's after it
            with contextlib.suppress(Exception):
                load.stop()
            raise
        acked = load.stop()
        observer = _address(cluster, shutdown["observer"])
        in_log = ctx.end_offsets(topic, observer)
        _client_view(kill, acked)
        stalled = (kill.get("client_first_ack_s") or float("inf")) > session_ms / 1000 + 5
        if stalled:
            # what the client and the brokers said while the load waited, kept in the JSON
            killed_at = kill["killed_at"]
            kill["evidence"] = {
                "client_log": [
                    f"+{at - killed_at:.3f} s {line}"
                    for at, line in acked.client_log
                    if killed_at - 1 <= at <= killed_at + (kill["client_gap_s"] or 60) + 1
                ][:60],
                "broker_output": {b: _tail(cluster, b, 60) for b in sorted(cluster.brokers)},
            }
    result.rows += [kill, shutdown]
    if stalled:
        result.notes.append(
            f"librdkafka's load waited {kill.get('client_first_ack_s') or 0:.1f} s for an ack on "
            f"the killed leader's partitions, though the harness's own acks=all produce "
            f"succeeded after {kill['first_ack_s']:.1f} s: its log and the brokers' output are "
            "in the JSON row's 'evidence'"
        )
    # The harness's own probe wrote one record to each partition the killed broker led.
    expected = acked.acked + kill["partitions_led"]
    if in_log < expected:
        raise RuntimeError(
            f"records lost: {expected} acknowledged with acks=all, {in_log} in the log "
            f"(first delivery error: {acked.first_error}); {kill} {shutdown}"
        )
    if in_log > expected + acked.failed:
        result.notes.append(
            f"{in_log - expected - acked.failed} more records in the log than were sent: "
            "duplicates from an idempotent producer"
        )
    result.targets.append(
        TargetCheck(
            "kill -9 of a leader → first acks=all produce acknowledged by its successor",
            kill["first_ack_s"],
            session_ms / 1000 + 1,
            "s",
            higher_is_better=False,
            note=f"{SESSION_TIMEOUT_KEY}={session_ms}",
        )
    )
    result.targets.append(
        TargetCheck(
            "SIGTERM of a leader → Metadata shows it leading nothing",
            shutdown["metadata_s"],
            1.0,
            "s",
            higher_is_better=False,
            note=f"broker {target}, {shutdown['partitions_led']} partition(s)",
        )
    )
    result.notes.append(
        f"{SESSION_TIMEOUT_KEY}={session_ms}: a killed broker's registration goes when its "
        "session expires; only then does the controller elect new leaders"
    )
    result.notes.append(
        f"load: librdkafka, enable.idempotence, acks=all, {acked.sent:,} sent, "
        f"{acked.acked:,} acknowledged, {acked.failed} failed; {in_log:,} in the log with the "
        "harness's probe records"
        + (f" (first error: {acked.first_error})" if acked.first_error else "")
    )
    result.notes.append(
        "first acks=all ack: the harness's own one-record Produce (acks=all, 2 s timeout) to the "
        "new leader, retried every 10 ms from the kill; librdkafka's: the load's first record "
        "acknowledged after the harness saw the new leader (librdkafka's metadata refresh "
        "included); longest ack gap "
        f"on the killed leader's partitions: {kill.get('client_gap_s') or 0:.2f} s"
    )
    return result


def _kill_leader(
    cluster: RunningCluster, topic: str, state: TopicState, victim: int, limit_s: float
) -> dict[str, Any]:
    """kill -9 of ``victim``; times until Metadata (from another broker) names new leaders for
    each of its partitions and until one-record acks=all Produces to each succeed."""
    led = state.led_by(victim)
    epochs = {p: state.partitions[p].leader_epoch for p in led}
    observer = next(b for b in sorted(cluster.brokers) if b != victim)
    address = _address(cluster, observer)
    batch = make_batch(FAILOVER_RECORD_SIZE, 1)
    elected: dict[int, float] = {}
    acked: dict[int, float] = {}
    last_error: dict[int, str] = {}
    killed_at = time.monotonic()
    cluster.kill(victim)
    deadline = killed_at + limit_s
    while len(acked) < len(led):
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"after kill -9 of broker {victim}: partitions {led} of {topic} had no "
                f"acks=all produce acknowledged within {limit_s:.0f} s (elected: {elected}, "
                f"last errors: {last_error}, metadata: {_state(address, topic)}); the "
                f"observer's last output:\n{_tail(cluster, observer)}"
            )
        now_state = _state(address, topic)
        for partition in led:
            if partition in acked or now_state is None:
                continue
            replicas = now_state.partitions.get(partition)
            if replicas is None or replicas.leader in (-1, victim):
                continue
            if replicas.leader_epoch <= epochs[partition]:
                continue
            elected.setdefault(partition, time.monotonic())
            leader = now_state.brokers.get(replicas.leader)
            if leader is None:
                continue
            try:
                code = produce_once(
                    f"{leader[0]}:{leader[1]}", topic, partition, batch, ACKS_ALL, timeout_s=2
                )
            except (ClientError, OSError) as e:
                last_error[partition] = repr(e)
                continue
            if code == ErrorCode.none:
                acked[partition] = time.monotonic()
            else:
                last_error[partition] = code.name
        time.sleep(0.01)
    return {
        "event": "kill -9",
        "broker": victim,
        "was_controller": victim == state.controller,
        "partitions_led": len(led),
        "led": led,
        "elected_at": elected,
        "new_leaders": {p: now_state.partitions[p].leader for p in led if now_state is not None},
        "observer": observer,
        "killed_at": killed_at,
        "metadata_s": max(elected.values()) - killed_at,
        "first_ack_s": max(acked.values()) - killed_at,
    }


def _client_view(kill: dict[str, Any], load: AckTimesResult) -> None:
    """The load's own view of the kill: when each of the killed leader's partitions had a
    record acknowledged by a newer leader, and the longest wait between two acks there."""
    # Acks between the kill and the election are responses the dead leader sent before it died
    # (librdkafka's leader epoch of a delivery is its metadata's, not the broker's, so it
    # cannot tell them apart): the new leader acknowledges nothing before it is elected.
    killed_at = kill["killed_at"]
    firsts = [_first_ack_after(load, p, kill["elected_at"][p]) for p in kill["led"]]
    known = [f for f in firsts if f is not None]
    kill["client_first_ack_s"] = max(known) - killed_at if len(known) == len(firsts) else None
    gaps = [_longest_gap(load, p, killed_at - 1, killed_at + 60) for p in kill["led"]]
    kill["client_gap_s"] = max((g for g in gaps if g is not None), default=None)
    del kill["elected_at"]


def _controlled_shutdown(
    cluster: RunningCluster, topic: str, state: TopicState, target: int, limit_s: float
) -> dict[str, Any]:
    """SIGTERM of ``target``: time until another broker's Metadata shows it leading none of the
    topic's partitions, and until the process exits."""
    process = cluster.brokers[target].process
    assert process is not None
    led = state.led_by(target)
    observer = next(b for b in sorted(cluster.brokers) if b != target and cluster.is_running(b))
    address = _address(cluster, observer)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    moved: float | None = None
    exited: float | None = None
    leaderless_seen = 0
    deadline = signalled + limit_s
    while moved is None or exited is None:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"SIGTERM of broker {target}: leaderships moved after "
                f"{'-' if moved is None else f'{moved - signalled:.2f}'} s, exited after "
                f"{'-' if exited is None else f'{exited - signalled:.2f}'} s; still running "
                f"after {limit_s:.0f} s (metadata: {_state(address, topic)}); its last output:\n"
                + _tail(cluster, target)
            )
        if exited is None and process.poll() is not None:
            exited = time.monotonic()
        if moved is None:
            now_state = _state(address, topic)
            if now_state is not None:
                leaders = [p.leader for p in now_state.partitions.values()]
                leaderless_seen += leaders.count(-1)
                if target not in leaders and -1 not in leaders:
                    moved = time.monotonic()
        time.sleep(POLL_S)
    row: dict[str, Any] = {
        "event": "SIGTERM",
        "broker": target,
        "was_controller": target == state.controller,
        "partitions_led": len(led),
        "observer": observer,
        "metadata_s": moved - signalled,
        "exit_s": exited - signalled,
        "exit_code": process.returncode,
        "leaderless_answers": leaderless_seen,
    }
    if process.returncode != 0:
        # A stop that hung ends by the broker's watchdog, which writes every thread's stack.
        row["evidence"] = {"broker_output": "".join(cluster.brokers[target].output[-400:])}
    return row


# -- follower catch-up -------------------------------------------------------------------------


def cluster_catchup(ctx: BenchContext) -> ScenarioResult:
    sizes = ctx.sizes
    result = ScenarioResult(
        "cluster-catchup",
        f"follower catch-up: one broker SIGSTOPped while {sizes.catchup_mb:,} MB go to an RF=3 "
        f"topic ({CATCHUP_PARTITIONS} partitions, {CATCHUP_RECORD_SIZE} B, acks=all), then "
        "SIGCONT",
    )
    result.columns = [
        Column("broker", "follower"),
        Column("out_of_isr_s", "pause → out of ISR s", "{:.2f}"),
        Column("copied_mb", "to copy MB", "{:,.1f}"),
        Column("produce_mb_per_s", "produce MB/s", "{:.1f}"),
        Column("copying_s", "resume → copying s", "{:.2f}"),
        Column("caught_up_s", "resume → logs equal s", "{:.2f}"),
        Column("mb_per_s", "catch-up MB/s", "{:.1f}"),
        Column("copy_mb_per_s", "copying MB/s", "{:.1f}"),
        Column("back_in_isr_s", "resume → in every ISR s", "{:.2f}"),
        *_CPU_COLUMNS,
    ]
    if _skipped_without_cluster(ctx, result):
        return result
    with ctx.cluster() as cluster:
        session_ms = int(cluster.settings[SESSION_TIMEOUT_KEY])
        limit_s = session_ms / 1000 + WAIT_S
        first = _address(cluster, 1)
        topic = ctx.new_topic("catchup", CATCHUP_PARTITIONS, first, REPLICAS)
        state = _wait_replicated(first, topic, REPLICAS)
        follower = next(b for b in sorted(cluster.brokers) if b != state.controller)
        observer = _address(cluster, state.controller)
        follower_address = _address(cluster, follower)

        def left_every_isr() -> TopicState | None:
            now = _state(observer, topic)
            if now is None or any(
                follower in p.isr or p.leader in (-1, follower) for p in now.partitions.values()
            ):
                return None
            return now

        paused = time.monotonic()
        cluster.pause(follower)
        try:
            state = _wait_for(left_every_isr, limit_s + 30, f"broker {follower} out of every ISR")
            out_of_isr = time.monotonic() - paused
            settle_page_cache()
            loaded = raw_load(
                observer,
                topic,
                record_size=CATCHUP_RECORD_SIZE,
                batch_records=ctx.batch_records(CATCHUP_RECORD_SIZE),
                connections=sizes.raw_connections,
                window=sizes.raw_window,
                total_records=sizes.catchup_mb * MB // CATCHUP_RECORD_SIZE,
                acks=ACKS_ALL,
            )
            if loaded.errors:
                raise RuntimeError(f"loading {topic} failed: {loaded.first_error}")
            leader_sizes: dict[int, int] = {}
            for partition, replicas in state.partitions.items():
                host, port = state.brokers[replicas.leader]
                leader_sizes[partition] = log_sizes(f"{host}:{port}", topic)[partition]
        finally:
            resumed = time.monotonic()
            cluster.resume(follower)
        copying: float | None = None
        caught_up: float | None = None
        back_in_isr: float | None = None
        last_sizes: dict[int, int] = {}
        deadline = resumed + limit_s + sum(leader_sizes.values()) / (20 * MB)
        with _broker_cpu(cluster) as cpus:
            while caught_up is None or back_in_isr is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"broker {follower} resumed {time.monotonic() - resumed:.0f} s ago: "
                        f"logs {last_sizes} of the leaders' {leader_sizes} "
                        f"(caught up: {caught_up}), ISR: {_state(observer, topic)}"
                    )
                if caught_up is None:
                    with contextlib.suppress(ClientError, OSError):
                        last_sizes = log_sizes(follower_address, topic, timeout=5)
                    if copying is None and any(last_sizes.values()):
                        # The topic was empty when the follower was paused.
                        copying = time.monotonic()
                    if all(last_sizes.get(p, 0) >= n for p, n in leader_sizes.items()):
                        caught_up = time.monotonic()
                if back_in_isr is None:
                    now = _state(observer, topic)
                    if now is not None and all(follower in p.isr for p in now.partitions.values()):
                        back_in_isr = time.monotonic()
                time.sleep(0.02)
            ended = max(caught_up, back_in_isr)
    copied = sum(leader_sizes.values())
    row = {
        "broker": follower,
        "out_of_isr_s": out_of_isr,
        "records": loaded.records,
        "copied_mb": copied / MB,
        "produce_mb_per_s": _rate(loaded.payload_bytes, loaded.seconds) / MB,
        "copying_s": (copying or caught_up) - resumed,
        "caught_up_s": caught_up - resumed,
        "mb_per_s": _rate(copied, caught_up - resumed) / MB,
        "copy_mb_per_s": _rate(copied, caught_up - (copying or resumed)) / MB,
        "back_in_isr_s": back_in_isr - resumed,
        **_cpu_fields(cpus, resumed, ended, loaded.records),
    }
    result.rows.append(row)
    result.targets.append(
        TargetCheck(
            "follower catch-up after SIGCONT",
            row["mb_per_s"],
            500,
            "MB/s",
            note=f"{copied / MB:,.0f} MB of log to copy",
        )
    )
    result.notes.append(
        f"{SESSION_TIMEOUT_KEY}={session_ms}: the paused broker leaves the ISRs when its session "
        "expires (the controller drops it) and its leaderships move; after SIGCONT its session "
        "is re-created, it registers again and its fetchers copy what it missed"
    )
    result.notes.append(
        "to copy: the leaders' log bytes (DescribeLogDirs) once the load ended; logs equal: the "
        "follower's DescribeLogDirs sizes reach them; MB/s = to copy / that time (log bytes, "
        "record overhead included); copying: the follower's first bytes of the topic seen "
        "(polled every 20 ms; before them, its ZooKeeper session, registration and truncation); "
        "copying MB/s = to copy / (logs equal - copying); in every ISR: Metadata from the "
        "controller"
    )
    result.notes.append(_CPU_NOTE + "; here over resume → both done, per million records copied")
    return result


CLUSTER_SCENARIO_FUNCTIONS: dict[str, Callable[[BenchContext], ScenarioResult]] = {
    "cluster-produce": cluster_produce,
    "cluster-latency": cluster_latency,
    "cluster-failover": cluster_failover,
    "cluster-catchup": cluster_catchup,
}
