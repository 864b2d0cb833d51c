"""The load: functions that run in worker processes, and :func:`run_workers` that starts them.

Workers are *spawned* (not forked) so none inherits the parent's librdkafka threads, and each has
its own GIL. Every worker function takes ``start`` first: it does its setup (client, metadata,
assignment), calls ``start()`` — a barrier shared by all workers of one :func:`run_workers` call
— and only then starts the clock, so concurrent workers begin together and a latency consumer is
ready before its producer sends. Times that cross processes use ``time.monotonic`` (one
system-wide clock on Linux). Results are small picklable dataclasses.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import queue
import struct
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.bench.options import PRODUCE_APIS
from odradek.bench.stats import LatencySummary

R = TypeVar("R")
Start = Callable[[], None]

CLIENT_TIMEOUT_S = 60.0
_STAMP = struct.Struct(">q")
_END_OF_RUN = b"odradek-bench-end"
PACING_MIN_SLEEP_S = 0.002


class WorkerFailed(RuntimeError):
    """A worker raised, died or overran its time."""


# -- the process runner ----------------------------------------------------------------------------


def _entry(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    index: int,
    barrier: Any,
    results: Any,
) -> None:
    def start() -> None:
        barrier.wait(CLIENT_TIMEOUT_S)

    try:
        results.put((index, True, fn(start, **kwargs)))
    except BaseException:
        barrier.abort()
        results.put((index, False, traceback.format_exc()))


def run_workers(
    calls: Sequence[tuple[Callable[..., R], dict[str, Any]]], timeout: float
) -> list[R]:
    """Run each ``fn(start, **kwargs)`` in a process of its own, all at once; their results in
    the order of ``calls``. Raises :class:`WorkerFailed` if any fails or the lot takes longer
    than ``timeout`` seconds (stragglers are terminated)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(calls))
    results = context.Queue()
    processes = [
        context.Process(
            target=_entry,
            args=(fn, kwargs, i, barrier, results),
            name=f"odradek-bench-{getattr(fn, '__name__', 'worker')}-{i}",
            daemon=True,
        )
        for i, (fn, kwargs) in enumerate(calls)
    ]
    for process in processes:
        process.start()
    collected: dict[int, Any] = {}
    failures: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while len(collected) + len(failures) < len(calls):
            if time.monotonic() > deadline:
                failures.append(f"workers overran {timeout:.0f} s")
                break
            try:
                index, ok, value = results.get(timeout=0.2)
            except queue.Empty:
                dead = [p for p in processes if p.exitcode not in (None, 0)]
                if dead:
                    # Give a dying worker's queued traceback a moment to arrive first.
                    try:
                        index, ok, value = results.get(timeout=1.0)
                    except queue.Empty:
                        failures.append(f"{dead[0].name} died with exit code {dead[0].exitcode}")
                        break
                else:
                    continue
            if ok:
                collected[index] = value
            else:
                failures.append(str(value))
    finally:
        for process in processes:
            process.join(timeout=5 if not failures else 0.5)
            if process.is_alive():
                process.terminate()
                process.join(5)
        results.close()
    if failures:
        raise WorkerFailed("; ".join(failures[:3]))
    return [collected[i] for i in range(len(calls))]


# -- producing -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceResult:
    sent: int
    unsent: int
    seconds: float
    started: float
    ended: float
    latency: LatencySummary | None
    first_error: str | None
    cpu_s: float  # the worker process's CPU over the run, librdkafka's threads included


# One delivery report in this many carries a latency callback: a Python callback per record
# would cost as much as the produce() call itself. Kafka's ProducerPerformance samples too.
LATENCY_SAMPLE_EVERY = 64
_PRODUCE_BATCH = 1000


def produce_worker(
    start: Start,
    *,
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    duration_s: float,
    acks: int = 1,
    linger_ms: int = 5,
    partitions: int | None = None,
    api: str = "batch",
) -> ProduceResult:
    """Produce ``records`` values of ``record_size`` bytes (stopping early after ``duration_s``)
    and wait for every delivery. ``api`` is ``batch`` (librdkafka's ``produce_batch``, a
    thousand records a call, each call to the next partition in turn) or ``record``
    (``produce()`` a record at a time; with ``partitions`` each record to the next partition,
    as evenly spread keys would, otherwise the client's partitioner picks).

    Latency is librdkafka's, from the produce call to the delivery report (queueing included),
    for one record in :data:`LATENCY_SAMPLE_EVERY`. Delivery is not counted here: the caller
    reads the topic's end offsets, which also catches a record lost without a report."""
    from confluent_kafka import KafkaError, Message, Producer

    if api not in PRODUCE_APIS:
        raise ValueError(f"api must be one of {PRODUCE_APIS}, not {api!r}")
    latencies: list[float] = []
    failures: list[str] = []

    def sampled(err: KafkaError | None, message: Message) -> None:
        if err is not None:
            failures.append(str(err))
            return
        latency = message.latency()
        if latency is not None:
            latencies.append(latency * 1000)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
        }
    )
    # Connect before the clock starts.
    metadata = producer.list_topics(topic, timeout=CLIENT_TIMEOUT_S)
    value = os.urandom(record_size)
    start()
    started = time.monotonic()
    cpu_at_start = _process_cpu_s()
    if api == "batch":
        sent = _produce_batches(
            producer,
            topic,
            value,
            records,
            partitions or len(metadata.topics[topic].partitions),
            sampled,
            started + duration_s,
        )
    else:
        sent = _produce_records(
            producer, topic, value, records, partitions, sampled, started + duration_s
        )
    unsent = producer.flush(CLIENT_TIMEOUT_S)
    ended = time.monotonic()
    cpu_s = _process_cpu_s() - cpu_at_start
    return ProduceResult(
        sent=sent,
        unsent=unsent,
        seconds=ended - started,
        started=started,
        ended=ended,
        latency=LatencySummary.of(latencies),
        first_error=failures[0] if failures else None,
        cpu_s=cpu_s,
    )


def _produce_records(
    producer: Any,
    topic: str,
    value: bytes,
    records: int,
    partitions: int | None,
    sampled: Callable[..., None],
    stop_at: float,
) -> int:
    produce, poll = producer.produce, producer.poll
    sent = 0
    while sent < records:
        try:
            if sent % LATENCY_SAMPLE_EVERY == 0:
                if partitions is None:
                    produce(topic, value, on_delivery=sampled)
                else:
                    produce(topic, value, partition=sent % partitions, on_delivery=sampled)
            elif partitions is None:
                produce(topic, value)
            else:
                produce(topic, value, partition=sent % partitions)
        except BufferError:
            poll(0.001)
            continue
        sent += 1
        if sent & 0x3FF == 0:
            poll(0)
            if time.monotonic() >= stop_at:
                break
    return sent


def _produce_batches(
    producer: Any,
    topic: str,
    value: bytes,
    records: int,
    partitions: int,
    sampled: Callable[..., None],
    stop_at: float,
) -> int:
    # produce_batch sends a call's records to one partition (it ignores a partition per
    # message), so calls take the partitions in turn: Kafka's sticky partitioner does the same
    # with keyless records, a batch at a time. The dicts are built once and handed over again
    # and again; librdkafka copies the values.
    messages: list[dict[str, Any]] = []
    for i in range(_PRODUCE_BATCH):
        message: dict[str, Any] = {"value": value}
        if i % LATENCY_SAMPLE_EVERY == 0:
            message["callback"] = sampled
        messages.append(message)
    produce_batch, poll = producer.produce_batch, producer.poll
    sent = 0
    calls = 0
    while sent < records:
        partition = calls % partitions
        calls += 1
        batch = messages if records - sent >= len(messages) else messages[: records - sent]
        queued = produce_batch(topic, batch, partition=partition)
        sent += queued
        if queued < len(batch):
            # A full queue: the dicts that failed say so; send those again.
            retry = [m for m in batch if m.pop("_error", None) is not None]
            while retry:
                poll(0.001)
                sent += produce_batch(topic, retry, partition=partition)
                retry = [m for m in retry if m.pop("_error", None) is not None]
        poll(0)
        if time.monotonic() >= stop_at:
            break
    return sent


# -- consuming -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumeResult:
    records: int
    payload_bytes: int
    seconds: float
    started: float
    ended: float
    first_record_s: float | None
    complete: bool
    cpu_s: float  # the worker process's CPU over the run, librdkafka's threads included

    @classmethod
    def of_run(
        cls,
        records: int,
        payload_bytes: int,
        started: float,
        ended: float,
        first_record_s: float | None,
        expected: int,
        cpu_at_start: float,
    ) -> ConsumeResult:
        """A run that read ``records`` between two monotonic moments; CPU counted up to now."""
        return cls(
            records=records,
            payload_bytes=payload_bytes,
            seconds=ended - started,
            started=started,
            ended=ended,
            first_record_s=first_record_s,
            complete=records >= expected,
            cpu_s=_process_cpu_s() - cpu_at_start,
        )


def _process_cpu_s() -> float:
    # Every thread of the process, at nanosecond resolution (os.times() counts in 10 ms ticks,
    # which rounds a short run to zero).
    return time.process_time()


def _consumer_config(bootstrap: str, group_id: str) -> dict[str, Any]:
    # Fetch sizes are Kafka's defaults: larger responses made librdkafka fault in fresh pages
    # for every receive buffer. When its local queue is full, librdkafka stops fetching for
    # fetch.queue.backoff.ms (1 s by default; Kafka's Java consumer has no such pause): a deep
    # queue makes that rare and a short backoff makes it cheap (+30% on 100 B records).
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "queued.min.messages": 1_000_000,
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 100,
    }


def consume_worker(
    start: Start,
    *,
    bootstrap: str,
    topic: str,
    expected: int,
    timeout_s: float,
    group_id: str | None = None,
) -> ConsumeResult:
    """Read ``topic`` from the beginning until ``expected`` records arrive. Without ``group_id``
    the consumer assign()s every partition (no group coordinator involved) and the clock starts
    there; with it, it subscribes as the only member of that group and the clock starts at the
    first record, after the group is joined."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

    # Each batch makes thousands of Message objects the cyclic GC would keep traversing; none
    # of them is in a cycle. Only for the run: tests call this in their own process.
    collecting = gc.isenabled()
    consumer = Consumer(
        _consumer_config(bootstrap, group_id or f"odradek-bench-assign-{uuid.uuid4().hex[:8]}")
    )
    try:
        gc.disable()
        metadata = consumer.list_topics(topic, timeout=CLIENT_TIMEOUT_S)
        partitions = sorted(metadata.topics[topic].partitions)
        start()
        started = time.monotonic()
        cpu_at_start = _process_cpu_s()
        if group_id is None:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        else:
            consumer.subscribe([topic])
        received = 0
        payload = 0
        first: float | None = None
        give_up = started + timeout_s
        while received < expected and time.monotonic() < give_up:
            # consume() waits for a full batch or the timeout: never ask for more than is left.
            batch = consumer.consume(min(10_000, expected - received), timeout=0.5)
            # map() keeps the per-record work in C: a Python loop here cost a third of the rate.
            if any(map(Message.error, batch)):
                raise KafkaException(next(m.error() for m in batch if m.error() is not None))
            payload += sum(map(len, batch))
            if batch and first is None:
                first = time.monotonic() - started
            received += len(batch)
        ended = time.monotonic()
        if group_id is not None and first is not None:
            started += first  # joining the group is reported as first_record_s, not throughput
        return ConsumeResult.of_run(
            received, payload, started, ended, first, expected, cpu_at_start
        )
    finally:
        consumer.close()
        if collecting:
            gc.enable()


def raw_consume_worker(
    start: Start,
    *,
    bootstrap: str,
    topic: str,
    expected: int,
    record_size: int,
    timeout_s: float,
    min_s: float = 0.0,
) -> ConsumeResult:
    """Read every partition of ``topic`` from offset 0 with the project's own wire client,
    counting records from batch headers and decoding none: the cheapest consumer there is, so
    that several of them show what the broker itself can serve. Read again from offset 0 until
    ``min_s`` seconds have passed: one pass of a small topic takes a fraction of a second, too
    short for a rate that means anything."""
    from odradek.client.data import DataClient, TopicPartition
    from odradek.protocol.record_batch import iter_headers

    client = DataClient(bootstrap, client_id="odradek-bench-raw", timeout_s=CLIENT_TIMEOUT_S)
    try:
        count = client.describe([topic])[topic].partitions
        partitions = [TopicPartition(topic, p) for p in range(count)]
        ends = client.latest(partitions)
        start()
        started = time.monotonic()
        cpu_at_start = _process_cpu_s()
        received = 0
        first: float | None = None
        give_up = started + timeout_s
        while True:
            for partition in partitions:
                if time.monotonic() > give_up:
                    break
                for fetched in client.fetch_range(partition, 0, ends[partition]):
                    received += sum(h.record_count for h in iter_headers(fetched.records))
                    if first is None and received:
                        first = time.monotonic() - started
                    if time.monotonic() > give_up:
                        break
            now = time.monotonic()
            if now - started >= min_s or now > give_up or not received:
                break
        ended = time.monotonic()
        return ConsumeResult.of_run(
            received, received * record_size, started, ended, first, expected, cpu_at_start
        )
    finally:
        client.close()


# -- end-to-end latency ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PacedProduceResult:
    sent: int
    failed: int
    seconds: float
    achieved_rate: float
    ack_latency: LatencySummary | None


def paced_producer_worker(
    start: Start,
    *,
    bootstrap: str,
    topic: str,
    rate: int,
    duration_s: float,
    record_size: int,
    linger_ms: int = 1,
    acks: int = 1,
) -> PacedProduceResult:
    """Produce at ``rate`` records/s for ``duration_s``, each value starting with its send time
    (``time.monotonic_ns``, 8 bytes), then one end-of-run marker record."""
    from confluent_kafka import KafkaError, Message, Producer

    ack_ms: list[float] = []
    failures = 0

    def delivered(err: KafkaError | None, message: Message) -> None:
        nonlocal failures
        if err is not None:
            failures += 1
            return
        latency = message.latency()
        if latency is not None:
            ack_ms.append(latency * 1000)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": linger_ms,
            "compression.type": "none",
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
            "on_delivery": delivered,
        }
    )
    producer.list_topics(topic, timeout=CLIENT_TIMEOUT_S)
    padding = b"\0" * max(0, record_size - _STAMP.size)
    interval = 1.0 / rate
    start()
    started = time.monotonic()
    total = int(rate * duration_s)
    sent = 0
    while sent < total:
        ahead = started + sent * interval - time.monotonic()
        if ahead >= PACING_MIN_SLEEP_S:
            # Sleep, never spin (a spinning producer would take a core from the broker), and
            # only once ahead by a whole tick, as Kafka's ThroughputThrottler does: a sleep per
            # record would cost more wake-ups than the records themselves. Records due are
            # sent back to back, each stamped as it goes.
            producer.poll(0)
            time.sleep(ahead)
            continue
        stamp = _STAMP.pack(time.monotonic_ns())
        try:
            producer.produce(topic, stamp + padding, partition=0)
        except BufferError:
            producer.poll(0.001)
            continue
        sent += 1
    seconds = time.monotonic() - started
    producer.produce(topic, _END_OF_RUN, partition=0)
    producer.flush(CLIENT_TIMEOUT_S)
    return PacedProduceResult(
        sent=sent,
        failed=failures,
        seconds=seconds,
        achieved_rate=sent / seconds if seconds > 0 else 0.0,
        ack_latency=LatencySummary.of(ack_ms),
    )


@dataclass(frozen=True, slots=True)
class EndToEndResult:
    received: int
    measured: int
    latency: LatencySummary | None
    saw_end: bool


def latency_consumer_worker(
    start: Start, *, bootstrap: str, topic: str, duration_s: float, warmup_s: float
) -> EndToEndResult:
    """Read partition 0 from the beginning (a new topic: every record) until the end marker;
    each record's latency is now minus the send time in its value. Records sent in the first
    ``warmup_s`` (connections, first metadata) are counted but not measured."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    consumer = Consumer(_consumer_config(bootstrap, f"odradek-bench-e2e-{uuid.uuid4().hex[:8]}"))
    try:
        consumer.list_topics(topic, timeout=CLIENT_TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        consumer.consume(1, timeout=0.2)  # the first fetch is under way before the producer starts
        start()
        give_up = time.monotonic() + duration_s + CLIENT_TIMEOUT_S
        latencies: list[float] = []
        received = 0
        first_sent: int | None = None
        warmup_ns = int(warmup_s * 1e9)
        saw_end = False
        while not saw_end and time.monotonic() < give_up:
            # poll(), not consume(): a batch call would hold records back until it fills up.
            message = consumer.poll(0.1)
            if message is None:
                continue
            now = time.monotonic_ns()
            error = message.error()
            if error is not None:
                raise KafkaException(error)
            value = message.value() or b""
            if value == _END_OF_RUN:
                saw_end = True
                break
            received += 1
            (sent,) = _STAMP.unpack_from(value)
            if first_sent is None:
                first_sent = sent
            if sent - first_sent >= warmup_ns:
                latencies.append((now - sent) / 1e6)
        return EndToEndResult(
            received=received,
            measured=len(latencies),
            latency=LatencySummary.of(latencies),
            saw_end=saw_end,
        )
    finally:
        consumer.close()


# -- load through a failover ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AckTimesResult:
    sent: int
    acked: int
    failed: int
    first_error: str | None
    # partition → (time.monotonic() of the delivery report, the leader epoch librdkafka knew,
    # -1 if unknown), in delivery order
    acks: dict[int, list[tuple[float, int]]]
    # librdkafka's warnings and errors: (time.monotonic(), message), the first CLIENT_LOG_LINES
    client_log: list[tuple[float, str]]


CLIENT_LOG_LINES = 400


class _KeptLog(logging.Handler):
    """librdkafka's log lines (through confluent-kafka's ``logger``), kept with the monotonic
    time they arrived."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.lines) < CLIENT_LOG_LINES:
            self.lines.append((time.monotonic(), record.getMessage()))


def acked_load_worker(
    start: Start,
    *,
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: int,
    record_size: int,
    stop: Any,
    max_s: float,
) -> AckTimesResult:
    """An idempotent acks=all producer at ``rate`` records/s, records round robin over the
    partitions, until ``stop`` (a multiprocessing Event) is set or ``max_s`` pass, then every
    delivery waited for. Keeps when each record was acknowledged and by which leader epoch, so
    that the harness can tell when a new leader took over."""
    from confluent_kafka import KafkaError, Message, Producer

    acks: dict[int, list[tuple[float, int]]] = {p: [] for p in range(partitions)}
    failures: list[str] = []
    kept = _KeptLog()
    client_logger = logging.getLogger(f"odradek.bench.librdkafka.{uuid.uuid4().hex[:6]}")
    client_logger.propagate = False
    client_logger.addHandler(kept)

    def delivered(err: KafkaError | None, message: Message) -> None:
        if err is not None:
            failures.append(str(err))
            return
        epoch = message.leader_epoch()
        partition = message.partition()
        if partition is not None:
            acks[partition].append((time.monotonic(), -1 if epoch is None else epoch))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "compression.type": "none",
            "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
            # find the new leader soon after the old one goes (librdkafka's default is 100 ms
            # at first, backing off to 10 s)
            "topic.metadata.refresh.fast.interval.ms": 50,
            # kept, not printed: the killed broker's refused connections are expected
            "logger": client_logger,
            "on_delivery": delivered,
        }
    )
    producer.list_topics(topic, timeout=CLIENT_TIMEOUT_S)
    value = os.urandom(record_size)
    interval = 1.0 / rate
    start()
    started = time.monotonic()
    sent = 0
    while not stop.is_set() and time.monotonic() - started < max_s:
        ahead = started + sent * interval - time.monotonic()
        if ahead >= PACING_MIN_SLEEP_S:
            producer.poll(0)
            time.sleep(ahead)
            continue
        try:
            producer.produce(topic, value, partition=sent % partitions)
        except BufferError:
            producer.poll(0.001)
            continue
        sent += 1
    producer.flush(CLIENT_TIMEOUT_S)
    return AckTimesResult(
        sent=sent,
        acked=sum(len(times) for times in acks.values()),
        failed=len(failures),
        first_error=failures[0] if failures else None,
        acks=acks,
        client_log=kept.lines,
    )


# -- raw -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RawResult:
    connections: int
    requests: int
    records: int
    payload_bytes: int
    wire_bytes: int
    seconds: float
    errors: int
    first_error: str | None
    latency: LatencySummary | None
    started: float
    ended: float


def raw_worker(start: Start, **kwargs: Any) -> RawResult:
    """:func:`odradek.bench.wire.raw_load` in a process of its own."""
    from odradek.bench.wire import raw_load

    start()
    started = time.monotonic()
    result = raw_load(**kwargs)
    ended = time.monotonic()
    return RawResult(
        connections=result.connections,
        requests=result.requests,
        records=result.records,
        payload_bytes=result.payload_bytes,
        wire_bytes=result.wire_bytes,
        seconds=result.seconds,
        errors=result.errors,
        first_error=result.first_error,
        latency=LatencySummary.of(result.latencies_ms),
        started=started,
        ended=ended,
    )
