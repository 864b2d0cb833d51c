"""Fetch (1): read record slices, long-poll until min.bytes or max.wait.ms, reply with sendfile.

Fetch v0-v3 readers get their records down-converted to message format v0 (v0-v1) or v1 (v2-v3),
read into memory rather than sent by sendfile, and readers below v10 no zstd topic (KIP-110), as
Kafka 3.x answered them.
"""

from __future__ import annotations

from typing import Any

from odradek.cluster.replication.delayed import FetchParams
from odradek.cluster.replication.partition import FetchIsolation, RecordSlice
from odradek.counters import (
    FETCH_CONSUMER_SLOT,
    FETCH_FOLLOWER_SLOT,
    BrokerCounters,
    current_request,
)
from odradek.protocol import compression, fetch_request, fetch_response, legacy
from odradek.protocol.errors import ErrorCode
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


def _rack_brokers(ctx: RequestContext, request: Any, replica: bool) -> frozenset[int] | None:
    """The live brokers in the consumer's rack when it may read from a replica there
    (KIP-392: Fetch v11+ with a rack, and ``replica.selector.class`` RackAwareReplicaSelector
    on the broker)."""
    if replica or ctx.version < 11 or not request.rack_id:
        return None
    if ctx.services.config.raw("replica.selector.class") not in RACK_AWARE_SELECTORS:
        return None
    rack = str(request.rack_id)
    return frozenset(b.node_id for b in ctx.services.cluster.live_brokers() if b.rack == rack)


def _isolation(replica: bool, isolation_level: int) -> FetchIsolation:
    """A follower reads to the log end, a read_committed consumer to the last stable offset,
    any other consumer to the high watermark."""
    if replica:
        return FetchIsolation.LOG_END
    if isolation_level == READ_COMMITTED:
        return FetchIsolation.TXN_COMMITTED
    return FetchIsolation.HIGH_WATERMARK


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


@handles(
    api_key=fetch_request.API_KEY,
    min_version=0,
    max_version=fetch_response.MAX_VERSION,
    decode=fetch_request.decode_fetch_request,
)
async def handle_fetch(ctx: RequestContext, request: Any) -> Response:
    replica_id = int(request.replica_id)
    replica = replica_id >= 0
    timing = current_request.get()
    if timing is not None:
        timing.also = FETCH_FOLLOWER_SLOT if replica else FETCH_CONSUMER_SLOT
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
    params = FetchParams(
        replica_id=replica_id,
        isolation=_isolation(replica, int(request.isolation_level)),
        max_wait_ms=int(request.max_wait.total_seconds() * 1000),
        min_bytes=int(request.min_bytes),
        max_bytes=int(request.max_bytes) if ctx.version >= 3 else 2**31 - 1,
        denied=denied,
        incremental=session is not None and session.incremental,
        rack_brokers=_rack_brokers(ctx, request, replica),
    )
    found = await ctx.services.replicas.fetch_records(params, wanted, api_key=ctx.header.api_key)
    topics = found.topics
    if session is not None and session.session is not None:
        topics = _session_view(session, topics)
    if ctx.version < FIRST_ZSTD_VERSION:
        topics = _for_old_reader(ctx, topics, wanted)
    counters = ctx.services.counters
    if counters is not None:
        _count(counters, ctx.header.api_key, topics, replica)
    return _frame(ctx, topics, session_id=session.session_id if session is not None else 0)


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
