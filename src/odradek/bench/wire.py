"""Just enough of Kafka's protocol over plain sockets to load a broker as hard as it can take.

The ``raw`` scenario and the data loaders send record batches built once with
:func:`~odradek.protocol.records.encode_batch`: each Produce request frame is built once per
partition, and only its correlation id (bytes 8..12 of the frame) changes from one send to the
next. A connection keeps up to ``window`` requests in flight — it writes without waiting and reads
the responses as they come, matching them to their send time by correlation id — so the
client never waits on a round trip and the broker always has the next request queued. Kafka
answers a connection's requests in order, but nothing here relies on it.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    RequestHeader,
    build,
    decode_response,
    encode_request,
    request_schema,
    response_schema,
)
from odradek.protocol.records import NewRecord, encode_batch

PRODUCE = 0
METADATA = 3
PRODUCE_VERSION = 9  # within odradek's 3..11 and Kafka 4's floor
METADATA_VERSION = 12
CLIENT_ID = "odradek-bench"
_INT32 = struct.Struct(">i")
_CORRELATION_AT = 8  # length prefix (4), api key (2), api version (2)


def parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "127.0.0.1", int(port)


def request_frame(api_key: int, version: int, correlation_id: int, **fields: Any) -> bytes:
    """A whole request frame, length prefix included."""
    body = build(request_schema(api_key, version), fields)
    return encode_request(RequestHeader(api_key, version, correlation_id, CLIENT_ID), body)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def _call(address: tuple[str, int], frame: bytes, timeout: float) -> bytes:
    """One request, one response frame (without its length prefix), on a new connection."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(frame)
        (size,) = _INT32.unpack(_read_exactly(sock, 4))
        return _read_exactly(sock, size)


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """Where each partition of a topic is led: partition → (host, port)."""

    topic: str
    leaders: dict[int, tuple[str, int]]


def topic_layout(bootstrap: str, topic: str, timeout: float = 10.0) -> TopicLayout | None:
    """The topic's partition leaders by a Metadata request; None if the topic is not (yet)
    served with a leader for every partition."""
    frame = request_frame(
        METADATA,
        METADATA_VERSION,
        1,
        topics=[{"name": topic, "topic_id": uuid.UUID(int=0)}],
        allow_auto_topic_creation=False,
    )
    raw = _call(parse_address(bootstrap), frame, timeout)
    _, response = decode_response(response_schema(METADATA, METADATA_VERSION), raw)
    body: Any = response
    brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in body.brokers}
    for entry in body.topics:
        if entry.name != topic or entry.error_code != ErrorCode.none:
            continue
        leaders: dict[int, tuple[str, int]] = {}
        for partition in entry.partitions:
            leader = brokers.get(int(partition.leader_id))
            if partition.error_code != ErrorCode.none or leader is None:
                return None
            leaders[int(partition.partition_index)] = leader
        return TopicLayout(topic, leaders) if leaders else None
    return None


def produce_frame(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int) -> bytes:
    return request_frame(
        PRODUCE,
        PRODUCE_VERSION,
        0,
        transactional_id=None,
        acks=acks,
        timeout=timeout_ms,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
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
    reader, writer = await asyncio.open_connection(*address, limit=1 << 22)
    schema = response_schema(PRODUCE, PRODUCE_VERSION)
    slots = asyncio.Semaphore(window)
    sent_at: dict[int, float] = {}
    done_sending = False
    all_answered = asyncio.Event()
    sent = received = 0

    async def send() -> None:
        nonlocal sent, done_sending
        buffers = [bytearray(f) for f in frames]
        while True:
            await slots.acquire()
            if (deadline is not None and time.monotonic() >= deadline) or (
                max_requests is not None and sent >= max_requests
            ):
                break
            buffer = buffers[sent % len(buffers)]
            _INT32.pack_into(buffer, _CORRELATION_AT, sent)
            sent_at[sent] = time.perf_counter()
            writer.write(bytes(buffer))  # a copy: the transport may hold it past this turn
            stats.wire_bytes += len(buffer)
            sent += 1
            await writer.drain()
        done_sending = True
        if received == sent:
            all_answered.set()

    async def receive() -> None:
        nonlocal received
        while True:
            try:
                (size,) = _INT32.unpack(await reader.readexactly(4))
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                raise ConnectionError("broker closed the connection") from None
            now = time.perf_counter()
            correlation_id, response = decode_response(schema, frame)
            stats.latencies_ms.append((now - sent_at.pop(correlation_id)) * 1000)
            body: Any = response
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
            received += 1
            slots.release()
            if done_sending and received == sent:
                all_answered.set()

    sender = asyncio.create_task(send())
    receiver = asyncio.create_task(receive())
    try:
        await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
        if receiver.done():
            receiver.result()  # raises what ended it
        await sender
        # The receiver ends only by failing; otherwise stop it once everything is answered.
        answered = asyncio.create_task(all_answered.wait())
        await asyncio.wait({answered, receiver}, return_when=asyncio.FIRST_COMPLETED)
        if receiver.done():
            receiver.result()  # raises what the receiver failed with
        answered.cancel()
    finally:
        sender.cancel()
        receiver.cancel()
        writer.close()
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
) -> RawLoadResult:
    """Load ``topic`` over ``connections`` pipelined connections, for ``duration_s`` or until
    ``total_records`` are acknowledged (rounded up to whole batches). Partitions are shared out
    among the connections, each connection going to its partitions' leader."""
    if acks not in (1, -1):
        raise ValueError("raw load needs acks=1 or acks=-1: it counts acknowledged records")
    layout = topic_layout(bootstrap, topic)
    if layout is None:
        raise RuntimeError(f"topic {topic} has no leader for every partition")
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
