"""A blocking data client: partitions, offsets, raw record batches in and out.

What a connector needs and a general Kafka client hides: :class:`DataClient` hands back the
record batches a Fetch returns as bytes (decoding them is the caller's business, e.g. straight
into Arrow), and takes already-encoded batches to Produce. It routes each partition to its
leader from Metadata, keeps one :class:`~odradek.client.blocking.BlockingConnection` per broker,
and
repeats a request that is safe to repeat (Metadata, ListOffsets, Fetch) once on a fresh
connection when a connection breaks — a cached client outlives broker restarts that way.

Reads are ``read_uncommitted`` or ``read_committed`` (the client's ``isolation_level``, as a Kafka
consumer's ``isolation.level``). A read_committed client asks ListOffsets for the last stable
offset where others get the high watermark, and Fetch for data up to it with the list of aborted
transactions; :func:`aborted_batches` applies that list as Kafka's consumer does. Control
batches are never data in either mode.

Produce is not repeated: a failed delivery raises :class:`ProduceError`, and the caller (a Spark
task) fails, so the data is written at least once, never silently dropped.
"""

from __future__ import annotations

import functools
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from odradek.client.blocking import BlockingConnection
from odradek.client.core import (
    FETCH,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    ClientError,
    ConnectionFailed,
    ProtocolError,
    Request,
)
from odradek.protocol.bounds import MalformedRequest
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_response import decode_fetch_v12
from odradek.protocol.messages import decode_response, response_schema
from odradek.protocol.record_batch import BatchHeader, iter_headers
from odradek.protocol.records import decode_batch
from odradek.security.client_settings import ClientSecurity
from odradek.topic_partition import TopicPartition as TopicPartition  # the data API names it

T = TypeVar("T")

EARLIEST = -2
LATEST = -1

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

DEFAULT_PARTITION_MAX_BYTES = 8 << 20
DEFAULT_FETCH_MAX_BYTES = 64 << 20

# The versions this client's requests are written for: (lowest, highest) per API key. Fetch stops
# at 12, the last version that names topics rather than topic ids.
CLIENT_VERSIONS: Mapping[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 8),
    METADATA: (1, 12),
}

# Errors after which fresh metadata (a new leader) may help; Kafka's clients retry these.
# A produce refused for stale metadata was not appended: it goes again, to the leader the
# refreshed metadata names, after this backoff (doubling up to the last), as Kafka's producer
# retries within delivery.timeout.ms.
_RETRY_BACKOFF_S = (0.05, 1.0)
_STALE_METADATA = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
    }
)


class KafkaClientError(ClientError):
    """The broker answered a request with an error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{message}: {code.name}")
        self.code = code


class ProduceError(KafkaClientError):
    """A batch was not (or not known to be) written to ``partition``."""

    def __init__(self, partition: TopicPartition, code: ErrorCode, detail: str | None) -> None:
        message = f"producing to {partition} failed"
        if detail:
            message += f" ({detail})"
        super().__init__(code, message)
        self.partition = partition


class OffsetOutOfRange(KafkaClientError):
    """A fetch asked for an offset the partition no longer (or does not yet) hold."""

    def __init__(
        self, partition: TopicPartition, offset: int, log_start_offset: int, high_watermark: int
    ) -> None:
        super().__init__(
            ErrorCode.offset_out_of_range,
            f"{partition} holds offsets {log_start_offset}..{high_watermark - 1}, not {offset}",
        )
        self.partition = partition
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    partitions: int
    internal: bool


class AbortedTransaction(NamedTuple):
    """An aborted transaction a read_committed Fetch response names: its producer and the
    offset of its first batch in the partition."""

    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    """One partition's part of a Fetch response: whole record batches as the broker stores them.

    ``records`` may end with a cut-off batch, which readers skip; ``next_offset`` is the offset
    after the last whole batch (``offset`` itself when there is none). A read_committed fetch
    stops at ``last_stable_offset`` and names the ``aborted`` transactions its batches may
    belong to (see :func:`aborted_batches`).
    """

    partition: TopicPartition
    offset: int
    records: bytes | memoryview  # a view of the response frame where possible
    high_watermark: int
    log_start_offset: int
    next_offset: int
    last_stable_offset: int = -1
    aborted: tuple[AbortedTransaction, ...] = ()


def aborted_batches(
    records: bytes | memoryview, aborted: Sequence[AbortedTransaction]
) -> frozenset[int]:
    """Positions in ``records`` of the batches a read_committed reader must skip.

    Kafka's consumer rule (its ``CompletedFetch``): walking the batches in offset order, an
    aborted transaction becomes active for its producer once a batch reaches its first offset;
    while active, that producer's transactional batches are aborted data, until its ABORT
    control batch ends it. (Control batches are skipped anyway; they are not listed here.)
    """
    if not aborted:
        return frozenset()
    pending = sorted(aborted, key=lambda a: a.first_offset)
    next_pending = 0
    active: set[int] = set()
    skipped = []
    for header in iter_headers(records):
        if header.producer_id < 0:
            continue
        while (
            next_pending < len(pending) and pending[next_pending].first_offset <= header.last_offset
        ):
            active.add(pending[next_pending].producer_id)
            next_pending += 1
        if header.is_control:
            if header.producer_id in active and _is_abort_marker(records, header):
                active.discard(header.producer_id)
        elif header.is_transactional and header.producer_id in active:
            skipped.append(header.position)
    return frozenset(skipped)


def data_batches(fetched: FetchedRecords) -> Iterator[memoryview]:
    """The whole batches of ``fetched`` that hold data for its reader: control batches and
    (for a read_committed fetch, which names them) aborted transactions' batches left out."""
    view = memoryview(fetched.records)
    skipped = aborted_batches(fetched.records, fetched.aborted)
    for header in iter_headers(view):
        if not header.is_control and header.position not in skipped:
            yield view[header.position : header.position + header.size]


_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 abort, 1 commit)


def _is_abort_marker(records: bytes | memoryview, header: BatchHeader) -> bool:
    """Whether a control batch is an ABORT marker: its record's key is (version, type 0)."""
    batch = bytes(memoryview(records)[header.position : header.position + header.size])
    try:
        (marker, *_) = decode_batch(batch, verify_crc=False)
    except ValueError:  # RecordDecodeError included: not a marker Kafka would write
        return False
    key = marker.key or b""
    return len(key) >= _CONTROL_KEY.size and _CONTROL_KEY.unpack_from(key)[1] == 0


def _offset_after_batches(records: bytes | memoryview, offset: int) -> int:
    last = offset
    for header in iter_headers(records):
        last = header.next_offset
    return max(last, offset)


@dataclass(frozen=True, slots=True)
class _FetchPartition:
    correlation_id: int
    top_error: int
    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: tuple[AbortedTransaction, ...]
    records: bytes | memoryview | None


def _parse_fetch_v12(frame: bytes | memoryview) -> _FetchPartition | None:
    """A Fetch v12 response for one partition, read in place: its records stay a view of the
    frame instead of a copy (kio copies them, which costs as much as decoding them). None for
    anything else, which kio then decodes."""
    try:
        answer = decode_fetch_v12(frame)
    except MalformedRequest:
        return None
    if len(answer.responses) != 1 or len(answer.responses[0].partitions) != 1:
        return None
    (p,) = answer.responses[0].partitions
    return _FetchPartition(
        answer.correlation_id,
        answer.error_code,
        p.error_code,
        p.high_watermark,
        p.last_stable_offset,
        p.log_start_offset,
        tuple(AbortedTransaction(*entry) for entry in p.aborted_transactions),
        p.records,
    )


class DataClient:
    """A client for reading and writing partitions of the cluster at ``bootstrap``.

    ``bootstrap`` is a comma-separated list of ``host:port``; the first that answers is used for
    metadata. Connections open lazily, so making a client costs nothing. Not thread-safe.
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "odradek-data",
        timeout_s: float = 30.0,
        isolation_level: int = READ_UNCOMMITTED,
        security: ClientSecurity | None = None,
    ) -> None:
        self.security = security
        self.bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        if not self.bootstrap:
            raise ValueError("no bootstrap servers given")
        if isolation_level not in (READ_UNCOMMITTED, READ_COMMITTED):
            raise ValueError(f"isolation level {isolation_level} is not 0 or 1")
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.isolation_level = isolation_level
        self._bootstrap_connection: BlockingConnection | None = None
        self._brokers: dict[int, str] = {}
        self._connections: dict[str, BlockingConnection] = {}
        self._leaders: dict[TopicPartition, int] = {}

    # -- connections -------------------------------------------------------------------------

    def _connect(self, address: str) -> BlockingConnection:
        connection = self._connections.get(address)
        if connection is None or connection.closed:
            connection = BlockingConnection.open(
                address,
                client_id=self.client_id,
                timeout_s=self.timeout_s,
                client_versions=CLIENT_VERSIONS,
                security=self.security,
            )
            self._connections[address] = connection
        return connection

    def connection_to(self, address: str) -> BlockingConnection:
        """The (cached) connection to the broker at ``host:port``, for requests this client
        does not make itself (a transaction's coordinator, say)."""
        return self._connect(address)

    def _any_connection(self) -> BlockingConnection:
        errors = []
        for address in [*self.bootstrap, *self._brokers.values()]:
            try:
                return self._connect(address)
            except ConnectionFailed as e:
                errors.append(str(e))
        raise ConnectionFailed("no broker reachable: " + "; ".join(errors))

    def _leader_connection(self, partition: TopicPartition) -> BlockingConnection:
        leader = self._leaders.get(partition)
        if leader is None:
            self.describe([partition.topic])
            leader = self._leaders.get(partition)
        address = self._brokers.get(leader) if leader is not None else None
        if address is None:
            return self._any_connection()
        return self._connect(address)

    def any_connection(self) -> BlockingConnection:
        """A connection to some broker of the cluster."""
        return self._any_connection()

    def _retrying(self, call: Callable[[], T]) -> T:
        """Run ``call``; on a broken connection, once more on fresh connections."""
        try:
            return call()
        except ConnectionFailed:
            self._drop_connections()
            return call()

    def _drop_connections(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
        self._leaders.clear()

    def close(self) -> None:
        self._drop_connections()

    def __enter__(self) -> DataClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ----------------------------------------------------------------------------

    def _metadata(self, topics: Sequence[str] | None, auto_create: bool) -> list[TopicInfo]:
        def call() -> Any:
            return self._any_connection().request(
                METADATA,
                {
                    "topics": None if topics is None else [{"name": t} for t in topics],
                    "allow_auto_topic_creation": auto_create,
                    "include_topic_authorized_operations": False,
                },
            )

        response = self._retrying(call)
        self._brokers = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in response.brokers}
        found = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.none or topic.name is None:
                continue
            for p in topic.partitions:
                self._leaders[TopicPartition(topic.name, int(p.partition_index))] = int(p.leader_id)
            found.append(TopicInfo(topic.name, len(topic.partitions), bool(topic.is_internal)))
        return found

    def topics(self) -> dict[str, TopicInfo]:
        """Every topic in the cluster, internal ones included."""
        return {t.name: t for t in self._metadata(None, False)}

    def describe(self, topics: Iterable[str], *, auto_create: bool = False) -> dict[str, TopicInfo]:
        """The named topics that exist (or, with ``auto_create``, that the broker creates)."""
        names = sorted(set(topics))
        if not names:
            return {}
        return {t.name: t for t in self._metadata(names, auto_create)}

    # -- offsets -----------------------------------------------------------------------------

    def list_offsets(
        self, partitions: Iterable[TopicPartition], spec: int | Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Offsets by ListOffsets: ``spec`` is :data:`EARLIEST`, :data:`LATEST` (the high
        watermark, or for a read_committed client the last stable offset) or a timestamp in ms
        — the first offset whose timestamp is at least it, or -1 when no record is that recent
        — for every partition, or a mapping of one per partition.
        """
        wanted = sorted(set(partitions))
        by_leader: dict[str, list[TopicPartition]] = {}
        for tp in wanted:
            by_leader.setdefault(self._leader_connection(tp).address, []).append(tp)
        result: dict[TopicPartition, int] = {}
        for address, tps in by_leader.items():
            result.update(self._retrying(functools.partial(self._list_offsets, address, tps, spec)))
        return result

    def _list_offsets(
        self,
        address: str,
        partitions: list[TopicPartition],
        spec: int | Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in partitions:
            timestamp = spec if isinstance(spec, int) else spec[tp]
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "current_leader_epoch": -1,
                    "timestamp": timestamp,
                }
            )
        response = self._connect(address).request(
            LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": self.isolation_level,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        result = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                if p.error_code != ErrorCode.none:
                    raise KafkaClientError(p.error_code, f"listing offsets of {tp}")
                result[tp] = int(p.offset)
        return result

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.list_offsets(partitions, EARLIEST)

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self.list_offsets(partitions, LATEST)

    # -- fetch -------------------------------------------------------------------------------

    def _send_fetch(
        self, connection: BlockingConnection, partition: TopicPartition, offset: int, max_bytes: int
    ) -> Request:
        return connection.send(
            FETCH,
            {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": max(max_bytes, DEFAULT_FETCH_MAX_BYTES),
                "isolation_level": self.isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": partition.topic,
                        "partitions": [
                            {
                                "partition": partition.partition,
                                "current_leader_epoch": -1,
                                "fetch_offset": offset,
                                "last_fetched_epoch": -1,
                                "log_start_offset": -1,
                                "partition_max_bytes": max_bytes,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
            raw=True,
        )

    def _receive_fetch(
        self,
        connection: BlockingConnection,
        pending: Request,
        partition: TopicPartition,
        offset: int,
    ) -> FetchedRecords:
        answer = connection.receive(pending)
        assert answer is not None
        frame = answer.frame
        parsed = _parse_fetch_v12(frame) if pending.version == 12 else None
        if parsed is None:
            response: Any
            try:
                correlation_id, response = decode_response(
                    response_schema(pending.api_key, pending.version), frame
                )
            except Exception as e:
                connection.close()
                raise ProtocolError(f"cannot decode a Fetch response: {e}") from e
            (topic,) = response.responses
            (p,) = topic.partitions
            parsed = _FetchPartition(
                int(correlation_id),
                int(response.error_code),
                int(p.error_code),
                int(p.high_watermark),
                int(p.last_stable_offset),
                int(p.log_start_offset),
                tuple(
                    AbortedTransaction(int(a.producer_id), int(a.first_offset))
                    for a in p.aborted_transactions or ()
                ),
                p.records,
            )
        if parsed.top_error != ErrorCode.none:
            raise KafkaClientError(ErrorCode(parsed.top_error), f"fetching {partition}")
        if parsed.error == ErrorCode.offset_out_of_range:
            raise OffsetOutOfRange(
                partition, offset, parsed.log_start_offset, parsed.high_watermark
            )
        if parsed.error != ErrorCode.none:
            code = ErrorCode(parsed.error)
            if code in _STALE_METADATA:
                self._leaders.pop(partition, None)
            raise KafkaClientError(code, f"fetching {partition} at offset {offset}")
        records = parsed.records if parsed.records is not None else b""
        return FetchedRecords(
            partition,
            offset,
            records,
            parsed.high_watermark,
            parsed.log_start_offset,
            _offset_after_batches(records, offset),
            parsed.last_stable_offset,
            parsed.aborted,
        )

    def fetch(
        self,
        partition: TopicPartition,
        offset: int,
        *,
        max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
    ) -> FetchedRecords:
        """The batches of ``partition`` from the one holding ``offset``, up to about
        ``max_bytes`` (at least one whole batch). Raises :class:`OffsetOutOfRange`."""

        def call() -> FetchedRecords:
            connection = self._leader_connection(partition)
            pending = self._send_fetch(connection, partition, offset, max_bytes)
            return self._receive_fetch(connection, pending, partition, offset)

        return self._retrying(call)

    def _readable_end(self, fetched: FetchedRecords) -> int:
        """Where this client's fetches stop: the last stable offset when read_committed."""
        if self.isolation_level == READ_COMMITTED and fetched.last_stable_offset >= 0:
            return fetched.last_stable_offset
        return fetched.high_watermark

    def fetch_range(
        self,
        partition: TopicPartition,
        start: int,
        end: int,
        *,
        max_bytes: int = DEFAULT_PARTITION_MAX_BYTES,
    ) -> Iterator[FetchedRecords]:
        """The batches covering offsets ``start``..``end - 1`` of ``partition``, in order.

        The next request is on the wire before a response is yielded, so the broker reads while
        the caller decodes. The first batch may begin before ``start`` and the last may reach
        past ``end``; offsets a compaction removed are simply absent. Iteration also stops at the
        high watermark (the last stable offset when read_committed): when that is below ``end``
        the last item's ``next_offset`` tells how far the partition reaches. Raises
        :class:`OffsetOutOfRange` when ``start`` (or an offset reached on the way) is below the
        log start offset.
        """
        offset = start
        connection: BlockingConnection | None = None
        pending: Request | None = None
        retried = False
        try:
            while offset < end:
                try:
                    if connection is None or pending is None:
                        connection = self._leader_connection(partition)
                        pending = self._send_fetch(connection, partition, offset, max_bytes)
                    fetched = self._receive_fetch(connection, pending, partition, offset)
                except ConnectionFailed:
                    if retried:
                        raise
                    retried = True
                    self._drop_connections()
                    connection = pending = None
                    continue
                pending = None
                next_offset = fetched.next_offset
                # No whole batch past ``offset`` means nothing more to read (never ask twice).
                more = offset < next_offset < min(end, self._readable_end(fetched))
                if more:
                    try:
                        pending = self._send_fetch(connection, partition, next_offset, max_bytes)
                    except ConnectionFailed:
                        connection = pending = None  # reconnect on the next round
                yield fetched
                if not more:
                    return
                offset = next_offset
        finally:
            if pending is not None and connection is not None:
                # The caller stopped early: the answer to the request sent ahead is dropped.
                connection.abandon(pending)

    # -- produce -----------------------------------------------------------------------------

    def produce(
        self,
        batches: Mapping[TopicPartition, bytes],
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
        transactional_id: str | None = None,
    ) -> dict[TopicPartition, int]:
        """Write one encoded batch (or several, concatenated) per partition; the base offsets.

        With ``acks=0`` nothing is confirmed and the result is empty. A partition refused for
        stale metadata (its leader moved, or is not known yet: a topic just created) is sent
        again to the leader the refreshed metadata names, until ``timeout_ms``. Raises
        :class:`ProduceError` for the first partition that failed otherwise.
        """
        deadline = time.monotonic() + timeout_ms / 1000
        backoff_s, max_backoff_s = _RETRY_BACKOFF_S
        remaining = dict(batches)
        result: dict[TopicPartition, int] = {}
        while True:
            refused: dict[TopicPartition, ProduceError] = {}
            pendings = self.send_produce(
                remaining, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id
            )
            for connection, pending in pendings:
                written, errors = self._produce_answers(connection, pending)
                result.update(written)
                refused.update(errors)
            if not refused:
                return result
            for error in refused.values():
                if error.code not in _STALE_METADATA or time.monotonic() >= deadline:
                    raise error
            time.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, max_backoff_s)
            remaining = {tp: batches[tp] for tp in refused}

    def send_produce(
        self,
        batches: Mapping[TopicPartition, bytes],
        *,
        acks: int = -1,
        timeout_ms: int = 30_000,
        transactional_id: str | None = None,
    ) -> list[tuple[BlockingConnection, Request]]:
        """Send Produce requests (one per leader) without waiting; see :meth:`receive_produce`.
        Transactional batches name their ``transactional_id``."""
        by_leader: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for tp, records in batches.items():
            address = self._leader_connection(tp).address
            by_leader.setdefault(address, {}).setdefault(tp.topic, []).append(
                {"index": tp.partition, "records": records}
            )
        sent = []
        for address, topics in by_leader.items():
            connection = self._connect(address)
            fields = {
                "transactional_id": transactional_id,
                "acks": acks,
                "timeout": timeout_ms,
                "topic_data": [
                    {"name": topic, "partition_data": data} for topic, data in topics.items()
                ],
            }
            pending = connection.send(PRODUCE, fields)
            if pending.expects_response:
                sent.append((connection, pending))
        return sent

    def receive_produce(
        self, connection: BlockingConnection, pending: Request
    ) -> dict[TopicPartition, int]:
        """The base offsets of one Produce's partitions; :class:`ProduceError` for the first
        partition refused."""
        result, refused = self._produce_answers(connection, pending)
        for error in refused.values():
            raise error
        return result

    def _produce_answers(
        self, connection: BlockingConnection, pending: Request
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, ProduceError]]:
        """One Produce's answer: the base offsets of the partitions written, and the errors of
        those refused (a partition refused for stale metadata is forgotten from the leader
        cache, so the next send asks for metadata again)."""
        answer = connection.receive(pending)
        assert answer is not None
        result: dict[TopicPartition, int] = {}
        refused: dict[TopicPartition, ProduceError] = {}
        for topic in answer.body.responses:
            for p in topic.partition_responses:
                tp = TopicPartition(topic.name, int(p.index))
                if p.error_code == ErrorCode.none:
                    result[tp] = int(p.base_offset)
                    continue
                if p.error_code in _STALE_METADATA:
                    self._leaders.pop(tp, None)
                refused[tp] = ProduceError(tp, p.error_code, p.error_message)
        return result, refused
