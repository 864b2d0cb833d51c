"""Fetch (1): read record slices, long-poll until min.bytes or max.wait.ms, reply with sendfile.

Fetch v0-v3 readers get their records down-converted to message format v0 (v0-v1) or v1 (v2-v3),
read into memory rather than sent by sendfile, and readers below v10 no zstd topic (KIP-110), as
Kafka 3.x answered them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odradek.cluster.replication.partition import Partition, RecordSlice
from odradek.cluster.replication.quota import ReplicationQuotas
from odradek.counters import BrokerCounters
from odradek.protocol import compression, fetch_request, fetch_response, legacy
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import fetch_denials
from odradek.server.context import FrameParts, RequestContext, Response
from odradek.server.fetch_sessions import (
    INITIAL_EPOCH,
    NO_SESSION,
    SessionContext,
    SessionPartition,
    TopicPartitionKey,
    changed,
)
from odradek.server.registry import handles

# Built unsubscripted: on Python 3.11 calling ``PartitionData[RecordSlice](...)`` makes typing set
# ``__orig_class__`` on the frozen, slotted instance, which fails with a TypeError.
PartitionData = fetch_response.PartitionData


READ_COMMITTED = 1
FIRST_RECORD_BATCH_VERSION = 4  # Fetch v4+ reads RecordBatch v2
FIRST_ZSTD_VERSION = 10  # KIP-110

RACK_AWARE_SELECTORS = frozenset(
    {"org.apache.kafka.common.replica.RackAwareReplicaSelector", "RackAwareReplicaSelector"}
)


def _refused(
    partition: Partition,
    p: Any,
    errors: dict[tuple[str, int], ErrorCode] | None,
    followers_serve: bool,
) -> ErrorCode:
    """Why this broker does not serve the partition to this fetcher (NONE if it does): its
    leader serves, a follower only consumers that may read from followers (KIP-392), and only
    in the epoch the fetcher knows (KIP-320)."""
    if not partition.is_leader and not (followers_serve and partition.leader_id >= 0):
        return ErrorCode.not_leader_or_follower
    code = partition.check_leader_epoch(int(getattr(p, "current_leader_epoch", -1)))
    if code == ErrorCode.none and errors:
        code = errors.get((partition.topic, partition.index), ErrorCode.none)
    return code


def _follower_fetched(
    ctx: RequestContext, request: Any, replica_id: int
) -> dict[tuple[str, int], ErrorCode]:
    """A follower's fetch tells the leader the follower's log end offsets (once per request,
    before the read, so that the high watermark it gets back counts them); the partitions it
    may not fetch, by error."""
    errors: dict[tuple[str, int], ErrorCode] = {}
    replicas = ctx.services.replicas
    for topic in request.topics:
        for p in topic.partitions:
            partition = ctx.services.topics.partition(topic.topic, int(p.partition))
            if partition is None or not partition.is_leader:
                continue
            try:
                if replicas is not None:
                    replicas.follower_fetched(partition, replica_id, int(p.fetch_offset))
                else:
                    partition.follower_fetched(replica_id, int(p.fetch_offset))
            except KafkaError as e:
                errors[(topic.topic, int(p.partition))] = e.code
    return errors


def _rack_aware(ctx: RequestContext, request: Any, replica: bool) -> str | None:
    """The consumer's rack when it may read from a replica in it (KIP-392: Fetch v11+ with a
    rack, and ``replica.selector.class`` RackAwareReplicaSelector on the broker)."""
    if replica or ctx.version < 11 or not request.rack_id:
        return None
    if ctx.services.config.raw("replica.selector.class") not in RACK_AWARE_SELECTORS:
        return None
    return str(request.rack_id)


def _preferred_replica(ctx: RequestContext, partition: Partition, rack: str) -> int:
    """An in-sync replica in the consumer's rack other than this leader, or -1 (read here):
    the leader's own rack, when it matches, wins, as Kafka's RackAwareReplicaSelector."""
    in_rack = {b.node_id for b in ctx.services.cluster.live_brokers() if b.rack == rack} & set(
        partition.isr
    )
    if not in_rack or partition.local_id in in_rack:
        return -1
    return min(in_rack)


def _wanted(request: Any) -> list[tuple[TopicPartitionKey, SessionPartition]]:
    """The partitions a request names, with what it asks of each."""
    return [
        (
            (topic.topic, int(p.partition)),
            SessionPartition(
                int(p.fetch_offset),
                int(p.partition_max_bytes),
                int(getattr(p, "current_leader_epoch", -1)),
                int(getattr(p, "log_start_offset", -1)),
            ),
        )
        for topic in request.topics
        for p in topic.partitions
    ]


def _forgotten(request: Any) -> list[TopicPartitionKey]:
    return [
        (topic.topic, int(index))
        for topic in getattr(request, "forgotten_topics_data", ())
        for index in topic.partitions
    ]


@dataclass(frozen=True, slots=True)
class _Scope:
    """What one Fetch request asks of every partition it names (the same on every pass)."""

    replica: bool
    read_committed: bool
    budget: int  # the response's max_bytes
    errors: dict[tuple[str, int], ErrorCode] | None
    rack: str | None
    incremental: bool
    denied: frozenset[str]
    replica_id: int
    quotas: ReplicationQuotas | None

    def upper(self, partition: Partition) -> int:
        """How far this fetcher may read: a follower to the log end, a read_committed consumer
        to the last stable offset, any other consumer to the high watermark."""
        log = partition.log
        if self.replica:
            return log.log_end_offset
        return log.last_stable_offset if self.read_committed else partition.high_watermark


Mark = tuple[int, int, int, int, int, int, int, bool, tuple[int, ...], bool]


def _mark(scope: _Scope, partition: Partition) -> Mark:
    """What a partition's answer depends on besides the request: which partition object serves
    it, its read bound, high watermark, last stable offset, log start, leader epoch and leader,
    role, (for a rack-aware consumer) ISR and (for a throttled follower) whether the quota holds
    it back."""
    quotas = scope.quotas
    log = partition.log
    return (
        id(partition),
        scope.upper(partition),
        partition.high_watermark,
        log.last_stable_offset,
        log.log_start_offset,
        partition.leader_epoch,
        partition.leader_id,
        partition.is_leader,
        partition.isr if scope.rack is not None else (),
        quotas is not None
        and quotas.leader_holds_back(
            partition.topic, partition.index, scope.replica_id in partition.isr
        ),
    )


@dataclass(frozen=True, slots=True)
class _Answer:
    """One partition's part of a pass: its data (None: left out of an incremental response),
    whether it ends the wait, and whether the log was read for it."""

    mark: Mark | None  # None: no such partition here (or denied)
    data: PartitionData[RecordSlice] | None
    ends_wait: bool
    read: bool


class _Passes:
    """The passes of one Fetch over its partitions: the first when it arrives, then one per
    wake while it is parked. A partition whose answer did not need the log, and whose mark has
    not moved since, keeps that answer (Kafka's DelayedFetch compares offsets): a wake costs a
    look at each partition's offsets, and makes answers again only where something moved or
    where records were read (a slice is read again, never kept across a wake: the cleaner may
    have replaced its segment meanwhile)."""

    def __init__(
        self,
        ctx: RequestContext,
        scope: _Scope,
        wanted: list[tuple[TopicPartitionKey, SessionPartition]],
    ) -> None:
        self._ctx = ctx
        self._scope = scope
        self._wanted = wanted
        self._answers: list[_Answer | None] = [None] * len(wanted)

    def read(self) -> tuple[list[fetch_response.TopicData[RecordSlice]], int, bool]:
        """One pass: (topics, bytes found, whether the wait ends now)."""
        topics = self._ctx.services.topics
        scope = self._scope
        total = 0
        ends_wait = False
        grouped: list[tuple[str, list[PartitionData[RecordSlice]]]] = []
        for slot, ((name, index), p) in enumerate(self._wanted):
            if not grouped or grouped[-1][0] != name:
                grouped.append((name, []))
            partition = None if name in scope.denied else topics.partition(name, index)
            mark = None if partition is None else _mark(scope, partition)
            answer = self._answers[slot]
            if answer is None or answer.read or answer.mark != mark:
                answer = _read_one(self._ctx, scope, partition, mark, name, index, p, total)
                self._answers[slot] = answer
            ends_wait = ends_wait or answer.ends_wait
            if answer.data is not None:
                grouped[-1][1].append(answer.data)
                total += answer.data.records_size
        result = [fetch_response.TopicData(name, ps) for name, ps in grouped if ps]
        return result, total, ends_wait


def _read_one(
    ctx: RequestContext,
    scope: _Scope,
    partition: Partition | None,
    mark: Mark | None,
    name: str,
    index: int,
    p: SessionPartition,
    total: int,
) -> _Answer:
    """One partition's answer (its data None: left out of an incremental response, nothing
    new); it ends the wait if it is an error, or a consumer sent to another replica.
    A consumer reads below the high watermark (read_committed: below the last stable offset,
    with the aborted transactions in what it reads), a follower up to the log end; a consumer
    in ``rack`` is sent to an in-sync replica there (KIP-392); a follower outside the ISR of a
    throttled partition gets no records while the leader's quota is exceeded. ``total``: the
    bytes the response holds so far."""
    if partition is None:
        code = (
            ErrorCode.topic_authorization_failed
            if name in scope.denied
            else ErrorCode.unknown_topic_or_partition
        )
        return _Answer(mark, PartitionData(index, code, -1, -1, -1, None, 0), True, False)
    refused = _refused(partition, p, scope.errors, scope.rack is not None)
    if refused != ErrorCode.none:
        return _Answer(mark, PartitionData(index, refused, -1, -1, -1, None, 0), True, False)
    log = partition.log
    hw = partition.high_watermark
    lso = log.last_stable_offset
    if scope.rack is not None and partition.is_leader:
        preferred = _preferred_replica(ctx, partition, scope.rack)
        if preferred >= 0:  # answer now: the consumer goes elsewhere
            elsewhere: PartitionData[RecordSlice] = PartitionData(
                index, 0, hw, lso, log.log_start_offset, None, 0, preferred
            )
            return _Answer(mark, elsewhere, True, False)
    fetch_offset = p.fetch_offset
    upper = scope.upper(partition)
    if (
        scope.incremental
        and fetch_offset == upper
        and p.sent_high_watermark == hw
        and p.sent_last_stable_offset == lso
        and p.sent_log_start_offset == log.log_start_offset
    ):
        return _Answer(mark, None, False, False)  # nothing new: left out of the response
    limit = min(p.max_bytes, scope.budget - total)
    held_back = scope.quotas is not None and scope.quotas.leader_holds_back(
        name, index, scope.replica_id in partition.isr
    )
    slice_: RecordSlice | None = None
    error = ErrorCode.none
    # A fetcher already at the end (the usual case for most partitions of an idle consumer's
    # fetch) needs no look into the segments.
    reads = fetch_offset != upper and not held_back and (limit > 0 or total == 0)
    if reads:
        try:
            slice_ = partition.read(
                fetch_offset,
                max(limit, 0),
                max_offset=None if scope.replica else upper,
                min_one_batch=total == 0,
            )
        except KafkaError as e:
            error = e.code
    size = slice_.size if slice_ is not None else 0
    aborted: list[tuple[int, int]] = []
    if scope.read_committed and size:
        # Bounded by the LSO rather than the slice's end: entries past what the consumer reads
        # are never matched against a batch, as Kafka's clients use them.
        aborted = log.aborted_transactions(fetch_offset, lso)
    data = PartitionData(
        index,
        error,
        hw,
        lso,
        log.log_start_offset,
        slice_ if size else None,
        size,
        aborted_transactions=aborted,
    )
    return _Answer(mark, data, error != ErrorCode.none, reads)


@handles(
    api_key=fetch_request.API_KEY,
    min_version=0,
    max_version=fetch_response.MAX_VERSION,
    decode=fetch_request.decode_fetch_request,
)
async def handle_fetch(ctx: RequestContext, request: Any) -> Response:
    min_bytes = int(request.min_bytes)
    replica_id = int(request.replica_id)
    replica = replica_id >= 0
    wanted = _wanted(request)
    session: SessionContext | None = None
    sessions = ctx.services.fetch_sessions
    if ctx.version >= 7:
        session_id, epoch = int(request.session_id), int(request.session_epoch)
        if sessions is not None:
            session = sessions.resolve(session_id, epoch, wanted, _forgotten(request))
            if session.error != ErrorCode.none:
                return _frame(ctx, [], error_code=session.error)
            wanted = session.partitions
        elif session_id != NO_SESSION or epoch > INITIAL_EPOCH:
            return _frame(ctx, [], error_code=ErrorCode.fetch_session_id_not_found)
    denied = fetch_denials(ctx, (name for (name, _), _ in wanted), replica)
    scope = _Scope(
        replica=replica,
        read_committed=not replica and int(request.isolation_level) == READ_COMMITTED,
        budget=int(request.max_bytes) if ctx.version >= 3 else 2**31 - 1,
        errors=_follower_fetched(ctx, request, replica_id) if replica and not denied else None,
        rack=_rack_aware(ctx, request, replica),
        incremental=session is not None and session.incremental,
        denied=denied,
        replica_id=replica_id,
        quotas=ctx.services.replicas.quotas if replica and ctx.services.replicas else None,
    )
    passes = _Passes(ctx, scope, wanted)
    found = passes.read()

    def enough() -> bool:
        nonlocal found
        found = passes.read()
        return found[1] >= min_bytes or found[2]

    _, total, any_error = found
    max_wait_s = request.max_wait.total_seconds()
    if total < min_bytes and not any_error and max_wait_s > 0:
        # Parked until appends to the requested partitions bring min.bytes, or max.wait.ms.
        await ctx.services.purgatory.park(
            _watched(ctx, wanted), enough, max_wait_s, ctx.header.api_key
        )
    topics = found[0]
    if replica and ctx.services.replicas is not None:
        _record_throttled(ctx.services.replicas.quotas, topics)
    if session is not None and session.session is not None:
        topics = _session_view(session, topics)
    if ctx.version < FIRST_ZSTD_VERSION:
        topics = _for_old_reader(ctx, topics, wanted)
    counters = ctx.services.counters
    if counters is not None:
        _count(counters, ctx.header.api_key, topics, replica)
    return _frame(ctx, topics, session_id=session.session_id if session is not None else 0)


def _record_throttled(
    quotas: ReplicationQuotas, topics: list[fetch_response.TopicData[RecordSlice]]
) -> None:
    """The bytes sent to a follower for throttled partitions count against the leader quota."""
    size = sum(
        p.records_size
        for t in topics
        for p in t.partitions
        if p.records_size and quotas.leader_throttled(t.name, p.index)
    )
    if size:
        quotas.leader.record(size)


def _for_old_reader(
    ctx: RequestContext,
    topics: list[fetch_response.TopicData[RecordSlice]],
    wanted: list[tuple[TopicPartitionKey, SessionPartition]],
) -> list[fetch_response.TopicData[Any]]:
    """Fetch v0-v9: a partition of a topic with ``compression.type=zstd`` answers
    UNSUPPORTED_COMPRESSION_TYPE, as Kafka's; v0-v3 get records converted to their message
    format (records bytes in place of file slices)."""
    magic = legacy.MAGIC_V0 if ctx.version <= 1 else legacy.MAGIC_V1
    offsets = {key: p.fetch_offset for key, p in wanted}
    out: list[fetch_response.TopicData[Any]] = []
    for topic in topics:
        partitions: list[PartitionData[Any]] = []
        for p in topic.partitions:
            partition = ctx.services.topics.partition(topic.name, p.index)
            error: ErrorCode | None = None
            converted: PartitionData[Any] = p
            if partition is not None and partition.log.config.compression == compression.ZSTD:
                error = ErrorCode.unsupported_compression_type
            elif ctx.version < FIRST_RECORD_BATCH_VERSION and p.records is not None:
                try:
                    data = legacy.down_convert(
                        p.records.read_bytes(),
                        magic,
                        offsets[(topic.name, p.index)],
                        p.records_size,
                    )
                except legacy.LegacyFormatError as e:
                    error = e.code
                else:
                    converted = PartitionData(
                        p.index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                        data or None,
                        len(data),
                    )
            if error is not None:
                converted = PartitionData(p.index, error, -1, -1, -1, None, 0)
            partitions.append(converted)
        out.append(fetch_response.TopicData(topic.name, partitions))
    return out


def _session_view(
    session: SessionContext, topics: list[fetch_response.TopicData[RecordSlice]]
) -> list[fetch_response.TopicData[RecordSlice]]:
    """What a session's response holds: every partition of a full request, only the changed
    ones of an incremental one; the session notes what each partition was told."""
    assert session.session is not None
    known = session.session.partitions
    view = []
    for topic in topics:
        kept = []
        for p in topic.partitions:
            cached = known.get((topic.name, p.index))
            include = cached is None or changed(
                cached,
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
                p.records_size > 0,
                p.error_code,
            )
            if include or not session.incremental:
                kept.append(p)
        if kept:
            view.append(fetch_response.TopicData(topic.name, kept))
    return view


def _count(
    counters: BrokerCounters,
    api_key: int,
    topics: list[fetch_response.TopicData[RecordSlice]],
    replica: bool,
) -> None:
    """Kafka's BytesOut and Total-/FailedFetchRequests per topic for a consumer's fetch (per
    partition read), ReplicationBytesOut for a follower's; the partitions' error codes."""
    requests = counters.requests
    for topic in topics:
        stats = counters.topic(topic.name)
        stats.fetch_requests += len(topic.partitions)
        size = 0
        for p in topic.partitions:
            size += p.records_size
            if p.error_code:
                stats.failed_fetch_requests += 1
                requests.error(api_key, p.error_code)
        if replica:
            counters.replication_bytes_out += size
        else:
            stats.bytes_out += size


def _watched(
    ctx: RequestContext, wanted: list[tuple[TopicPartitionKey, SessionPartition]]
) -> list[Partition]:
    topics = ctx.services.topics
    watched = []
    for (name, index), _ in wanted:
        partition = topics.partition(name, index)
        if partition is not None:
            watched.append(partition)
    return watched


def _frame(
    ctx: RequestContext,
    topics: list[fetch_response.TopicData[RecordSlice]],
    error_code: int = ErrorCode.none,
    session_id: int = 0,
) -> FrameParts:
    parts, size = fetch_response.encode(
        ctx.version,
        ctx.header.correlation_id,
        topics,
        error_code=error_code,
        session_id=session_id,
    )
    return FrameParts(parts, size)
