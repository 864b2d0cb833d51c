"""The bench's load generator: pre-built Produce frames, pipelined as hard as a broker takes them.

The ``raw`` scenario and the data loaders send record batches built once with
:func:`~odradek.protocol.records.encode_batch`: each Produce request frame is built once per
partition and sent again and again through :meth:`AsyncConnection.send_frame
<odradek.client.aio.AsyncConnection.send_frame>`, which only rewrites its correlation id. A
connection keeps up to ``window`` requests in flight — it writes without waiting and each
response completes its request's future — so the client never waits on a round trip and the
broker always has the next request queued. Framing, correlation and decoding are the client
core's (:mod:`odradek.client.core`).
"""

from __future__ import annotations

import asyncio
import functools
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.client.aio import AsyncConnection
from odradek.client.blocking import BlockingConnection
from odradek.client.core import METADATA, PRODUCE, ClientError, Response, request_frame
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch

PRODUCE_VERSION = 9  # within odradek's 3..11 and Kafka 4's floor
METADATA_VERSION = 12
DESCRIBE_LOG_DIRS = 35
DESCRIBE_LOG_DIRS_VERSION = 1
CLIENT_ID = "odradek-bench"


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """Where each partition of a topic is led: partition → (host, port)."""

    topic: str
    leaders: dict[int, tuple[str, int]]


@dataclass(frozen=True, slots=True)
class PartitionReplicas:
    """One partition as Metadata describes it: its leader (-1 for none), replicas and ISR."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicState:
    """A topic's partitions as one broker's Metadata answer has them, with the live brokers."""

    topic: str
    controller: int
    brokers: dict[int, tuple[str, int]]
    partitions: dict[int, PartitionReplicas]

    def led_by(self, broker: int) -> list[int]:
        return sorted(p for p, r in self.partitions.items() if r.leader == broker)


def topic_state(bootstrap: str, topic: str, timeout: float = 10.0) -> TopicState | None:
    """``topic`` by a Metadata request to ``bootstrap``; None if that broker does not know it."""
    with BlockingConnection.open(
        bootstrap, client_id=CLIENT_ID, timeout_s=timeout, negotiate=False
    ) as connection:
        response = connection.request(
            METADATA,
            {
                "topics": [{"name": topic, "topic_id": uuid.UUID(int=0)}],
                "allow_auto_topic_creation": False,
            },
            version=METADATA_VERSION,
        )
    body: Any = response
    brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in body.brokers}
    for entry in body.topics:
        if entry.name != topic or entry.error_code != ErrorCode.none:
            continue
        partitions = {
            int(p.partition_index): PartitionReplicas(
                leader=int(p.leader_id) if p.error_code == ErrorCode.none else -1,
                leader_epoch=int(p.leader_epoch),
                replicas=tuple(int(r) for r in p.replica_nodes),
                isr=tuple(int(r) for r in p.isr_nodes),
            )
            for p in entry.partitions
        }
        return TopicState(topic, int(body.controller_id), brokers, partitions)
    return None


def live_brokers(bootstrap: str, timeout: float = 10.0) -> int:
    """How many brokers a Metadata request (for no topic) to ``bootstrap`` lists: 0 while a
    starting broker answers but is not yet registered."""
    with BlockingConnection.open(
        bootstrap, client_id=CLIENT_ID, timeout_s=timeout, negotiate=False
    ) as connection:
        response = connection.request(
            METADATA, {"topics": [], "allow_auto_topic_creation": False}, version=METADATA_VERSION
        )
    body: Any = response
    return len(body.brokers)


def topic_layout(bootstrap: str, topic: str, timeout: float = 10.0) -> TopicLayout | None:
    """The topic's partition leaders by a Metadata request; None if the topic is not (yet)
    served with a leader for every partition."""
    state = topic_state(bootstrap, topic, timeout)
    if state is None or not state.partitions:
        return None
    leaders: dict[int, tuple[str, int]] = {}
    for index, partition in state.partitions.items():
        leader = state.brokers.get(partition.leader)
        if leader is None:
            return None
        leaders[index] = leader
    return TopicLayout(topic, leaders)


def log_sizes(address: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """The bytes of each of ``topic``'s partitions in the logs of the broker at ``address``
    (DescribeLogDirs: the sum of its segment files)."""
    with BlockingConnection.open(
        address, client_id=CLIENT_ID, timeout_s=timeout, negotiate=False
    ) as connection:
        response = connection.request(
            DESCRIBE_LOG_DIRS, {"topics": None}, version=DESCRIBE_LOG_DIRS_VERSION
        )
    body: Any = response
    sizes: dict[int, int] = {}
    for log_dir in body.results:
        for entry in log_dir.topics:
            if entry.name == topic:
                for partition in entry.partitions:
                    index = int(partition.partition_index)
                    sizes[index] = sizes.get(index, 0) + int(partition.partition_size)
    return sizes


def produce_once(
    address: str, topic: str, partition: int, batch: bytes, acks: int, timeout_s: float
) -> ErrorCode:
    """One Produce of ``batch`` to ``partition`` at the broker at ``address``: its error code
    (``ErrorCode.none`` once acknowledged). A connection error propagates (ClientError)."""
    with BlockingConnection.open(
        address, client_id=CLIENT_ID, timeout_s=timeout_s + 5, negotiate=False
    ) as connection:
        response = connection.request(
            PRODUCE,
            {
                "transactional_id": None,
                "acks": acks,
                "timeout": int(timeout_s * 1000),
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
                ],
            },
            version=PRODUCE_VERSION,
        )
    body: Any = response
    return ErrorCode(body.responses[0].partition_responses[0].error_code)


def produce_frame(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int) -> bytes:
    return request_frame(
        PRODUCE,
        PRODUCE_VERSION,
        {
            "transactional_id": None,
            "acks": acks,
            "timeout": timeout_ms,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
            ],
        },
        client_id=CLIENT_ID,
    )


def make_batch(record_size: int, records: int) -> bytes:
    """One uncompressed batch of ``records`` values of ``record_size`` bytes, no keys."""
    value = bytes(range(256)) * (record_size // 256) + bytes(range(record_size % 256))
    now = int(time.time() * 1000)
    return encode_batch([NewRecord(None, value)] * records, now_ms=now)


@dataclass(slots=True)
class ConnectionStats:
    requests: int = 0
    records: int = 0
    wire_bytes: int = 0
    errors: int = 0
    first_error: str | None = None
    latencies_ms: list[float] = field(default_factory=list)


async def _pipeline(
    address: tuple[str, int],
    frames: Sequence[bytes],
    records_per_frame: int,
    window: int,
    deadline: float | None,
    max_requests: int | None,
) -> ConnectionStats:
    """Send ``frames`` round robin, ``window`` at a time, until the deadline or the budget."""
    stats = ConnectionStats()
    connection = await AsyncConnection.open(
        f"{address[0]}:{address[1]}", client_id=CLIENT_ID, negotiate=False
    )
    slots = asyncio.Semaphore(window)
    failures: list[BaseException] = []

    def answered(sent_at: float, response: Response | ClientError) -> None:
        now = time.perf_counter()
        slots.release()
        if not isinstance(response, Response):
            failures.append(response)
            return
        stats.latencies_ms.append((now - sent_at) * 1000)
        body: Any = response.body
        ok = all(
            p.error_code == ErrorCode.none
            for topic in body.responses
            for p in topic.partition_responses
        )
        stats.requests += 1
        if ok:
            stats.records += records_per_frame
        else:
            stats.errors += 1
            if stats.first_error is None:
                stats.first_error = repr(body)[:500]

    buffers = [bytearray(f) for f in frames]
    sent = 0
    try:
        while max_requests is None or sent < max_requests:
            await slots.acquire()
            if failures or (deadline is not None and time.monotonic() >= deadline):
                slots.release()
                break
            buffer = buffers[sent % len(buffers)]
            connection.send_frame_then(buffer, functools.partial(answered, time.perf_counter()))
            stats.wire_bytes += len(buffer)
            sent += 1
            await connection.drain()
        # Every slot back: every request answered (or failed).
        for _ in range(window):
            await slots.acquire()
        if failures:
            raise failures[0]
    finally:
        await connection.close()
    return stats


@dataclass(frozen=True, slots=True)
class RawLoadResult:
    connections: int
    requests: int
    records: int
    payload_bytes: int
    wire_bytes: int
    seconds: float
    errors: int
    first_error: str | None
    latencies_ms: tuple[float, ...]


def raw_load(
    bootstrap: str,
    topic: str,
    *,
    record_size: int,
    batch_records: int,
    connections: int,
    window: int,
    duration_s: float | None = None,
    total_records: int | None = None,
    acks: int = 1,
    timeout_ms: int = 30_000,
    batch: bytes | None = None,
) -> RawLoadResult:
    """Load ``topic`` over ``connections`` pipelined connections, for ``duration_s`` or until
    ``total_records`` are acknowledged (rounded up to whole batches). Partitions are shared out
    among the connections, each connection going to its partitions' leader. ``batch``: a
    prebuilt batch of ``batch_records`` records of ``record_size`` bytes to send instead of
    :func:`make_batch`'s (a compressed one, say)."""
    if acks not in (1, -1):
        raise ValueError("raw load needs acks=1 or acks=-1: it counts acknowledged records")
    layout = topic_layout(bootstrap, topic)
    if layout is None:
        raise RuntimeError(f"topic {topic} has no leader for every partition")
    if batch is None:
        batch = make_batch(record_size, batch_records)
    plans = _plan_connections(layout, connections, topic, batch, acks, timeout_ms)
    budgets: list[int | None] = [None] * len(plans)
    if total_records is not None:
        requests = -(-total_records // batch_records)
        budgets = [requests // len(plans) + (i < requests % len(plans)) for i in range(len(plans))]

    async def run_all() -> list[ConnectionStats]:
        deadline = None if duration_s is None else time.monotonic() + duration_s
        return list(
            await asyncio.gather(
                *(
                    _pipeline(address, frames, batch_records, window, deadline, budget)
                    for (address, frames), budget in zip(plans, budgets, strict=True)
                    if budget is None or budget > 0
                )
            )
        )

    started = time.perf_counter()
    results = asyncio.run(run_all())
    seconds = time.perf_counter() - started
    records = sum(s.records for s in results)
    return RawLoadResult(
        connections=len(results),
        requests=sum(s.requests for s in results),
        records=records,
        payload_bytes=records * record_size,
        wire_bytes=sum(s.wire_bytes for s in results),
        seconds=seconds,
        errors=sum(s.errors for s in results),
        first_error=next((s.first_error for s in results if s.first_error), None),
        latencies_ms=tuple(x for s in results for x in s.latencies_ms),
    )


def _plan_connections(
    layout: TopicLayout, connections: int, topic: str, batch: bytes, acks: int, timeout_ms: int
) -> list[tuple[tuple[str, int], list[bytes]]]:
    """(leader address, frames) per connection: partitions dealt round robin to connections,
    a connection serving only partitions of one leader."""
    by_leader: dict[tuple[str, int], list[int]] = {}
    for partition, leader in sorted(layout.leaders.items()):
        by_leader.setdefault(leader, []).append(partition)
    total = len(layout.leaders)
    plans: list[tuple[tuple[str, int], list[bytes]]] = []
    for leader, partitions in by_leader.items():
        share = max(1, round(connections * len(partitions) / total))
        groups: list[list[int]] = [[] for _ in range(share)]
        for i, partition in enumerate(partitions):
            groups[i % share].append(partition)
        for group in groups:
            if not group:
                # More connections than partitions: a connection may share a partition.
                group = [partitions[len(plans) % len(partitions)]]
            frames = [produce_frame(topic, p, batch, acks, timeout_ms) for p in group]
            plans.append((leader, frames))
    return plans
