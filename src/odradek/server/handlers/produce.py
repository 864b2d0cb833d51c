"""Produce (0): hand each partition's record set to its leader's append, acknowledge by acks.

Produce v0-v2 carry message sets in formats v0/v1, converted here to a RecordBatch v2 before the
log sees them (:mod:`odradek.protocol.legacy`); below v7 zstd is refused (KIP-110). Neither touches
the requests of current clients beyond a version comparison.

A transactional producer's first batch to a partition in a transaction is checked first with
the transaction coordinator (KIP-890's verification, ``transaction.partition.verification.
enable``): a partition the producer never added to its transaction is refused with
INVALID_TXN_STATE, so a hanging transaction cannot start there.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.cluster.replication.partition import Partition
from odradek.counters import BrokerCounters
from odradek.protocol import compression, legacy, produce_request, produce_response
from odradek.protocol.errors import ErrorCode, KafkaError, RecordsRejected
from odradek.protocol.record_batch import COMPRESSION_MASK, HEADER_SIZE, MAGIC, read_header
from odradek.server.authorize import producer_denials
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

log = logging.getLogger(__name__)


def _failed(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


def produce_to_partition(
    ctx: RequestContext, topic: str, index: int, records: bytes | memoryview | None, acks: int
) -> tuple[dict[str, Any], Partition | None, int]:
    """The partition's answer, and for an append that acks=all must wait on, the partition and
    the offset after its last record (the high watermark that commits it)."""
    services = ctx.services
    partition = services.topics.partition(topic, index)
    if partition is None:
        return _failed(index, ErrorCode.unknown_topic_or_partition), None, 0
    if acks not in (-1, 0, 1):
        failed = _failed(index, ErrorCode.invalid_required_acks, f"acks={acks} is not -1, 0 or 1")
        return failed, None, 0
    try:
        info = partition.append_as_leader(records, acks, services.clock.time_ms())
    except RecordsRejected as e:
        log.info("refused produce to %s-%d from %s: %s", topic, index, ctx.peer, e.message)
        failed = _failed(index, e.code, e.message)
        failed["record_errors"] = [
            {"batch_index": i, "batch_index_error_message": message}
            for i, message in e.record_errors
        ]
        return failed, None, 0
    except KafkaError as e:
        return _failed(index, e.code, e.message), None, 0
    counters = services.counters
    if counters is not None:
        # Kafka's BytesIn and MessagesIn: what the log took, whether or not acks=all then waits
        # in vain for the followers.
        stats = counters.topic(topic)
        stats.bytes_in += len(records) if records is not None else 0
        stats.messages_in += info.last_offset - info.first_offset + 1
    answer = {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": info.first_offset,
        "log_append_time": info.log_append_time if info.log_append_time is not None else -1,
        "log_start_offset": info.log_start_offset,
        "record_errors": [],
        "error_message": None,
    }
    return answer, (partition if acks == -1 else None), info.last_offset + 1


_ATTRIBUTES_LOW_BYTE = 22  # of a v2 batch: bits 0-2 are the codec


def _old_version_records(version: int, records: memoryview | None) -> bytes | memoryview | None:
    """What an old Produce version's partition data is to the log: a v0/v1 message set (v0-v2)
    as one RecordBatch v2; a zstd batch below v7 refused as Kafka's ``validateRecords`` does.
    Raises :class:`~odradek.protocol.legacy.LegacyFormatError`."""
    if records is None:
        return records
    magic = legacy.magic_of(records)
    if 0 <= magic < MAGIC and version < produce_request.FIRST_RECORD_BATCH_VERSION:
        return legacy.to_record_batch(records)
    if (
        magic == MAGIC
        and len(records) >= HEADER_SIZE
        and records[_ATTRIBUTES_LOW_BYTE] & COMPRESSION_MASK == compression.ZSTD
    ):
        raise legacy.LegacyFormatError(
            ErrorCode.unsupported_compression_type,
            f"Produce v{version} may not carry zstd batches (v7 and later may)",
        )
    return records


# The coordinator's answers a producer may retry (it cannot act on them itself): Kafka hands
# them to the producer as NOT_ENOUGH_REPLICAS, which every client retries.
_RETRIABLE_VERIFICATION = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
    }
)


async def _unverified(ctx: RequestContext, request: Any) -> dict[tuple[str, int], ErrorCode]:
    """The partitions a transactional produce may not write to, by the coordinator's answer:
    those where the producer has no transaction open yet and that its coordinator does not
    list in the producer's ongoing transaction."""
    services = ctx.services
    if request.transactional_id is None or not services.config.get_bool(
        "transaction.partition.verification.enable"
    ):
        return {}
    first: tuple[int, int] | None = None
    wanted: list[tuple[str, int]] = []
    for topic in request.topic_data:
        for p in topic.partition_data:
            records = p.records
            if records is None or len(records) < HEADER_SIZE:
                continue
            header = read_header(records)
            if not header.is_transactional:
                continue
            partition = services.topics.partition(topic.name, int(p.index))
            if partition is None or not partition.is_leader:
                continue
            if partition.has_ongoing_transaction(header.producer_id, header.producer_epoch):
                continue
            first = (header.producer_id, header.producer_epoch)
            wanted.append((topic.name, int(p.index)))
    if first is None:
        return {}
    verdicts = await services.transactions.verify(request.transactional_id, *first, wanted)
    return {
        tp: ErrorCode.not_enough_replicas if code in _RETRIABLE_VERIFICATION else code
        for tp, code in verdicts.items()
        if code != ErrorCode.none
    }


async def _await_replication(
    ctx: RequestContext, pending: list[tuple[dict[str, Any], Partition, int]], timeout_ms: int
) -> None:
    """acks=all: each answer waits until its partition's high watermark covers the append, or
    the request's timeout (REQUEST_TIMED_OUT), as Kafka's DelayedProduce."""

    def settled() -> bool:
        return all(p.replicated(offset) is not None for _, p, offset in pending)

    if not settled():
        await ctx.services.purgatory.park(
            [p for _, p, _ in pending], settled, timeout_ms / 1000, ctx.header.api_key
        )
    for answer, partition, offset in pending:
        outcome = partition.replicated(offset)
        if outcome is None:
            answer.update(_failed(answer["index"], ErrorCode.request_timed_out))
        elif outcome != ErrorCode.none:
            answer.update(_failed(answer["index"], outcome))


@handles(
    api_key=produce_request.API_KEY,
    min_version=produce_request.MIN_VERSION,
    max_version=produce_request.MAX_VERSION,
    # by hand, so that record batches stay writable views of the receive buffer
    decode=produce_request.decode_produce_request,
)
async def handle_produce(ctx: RequestContext, request: Any) -> Response | None:
    acks = int(request.acks)
    pending: list[tuple[dict[str, Any], Partition, int]] = []
    topics = []
    unauthorized = producer_denials(ctx, request)
    refused = unauthorized or await _unverified(ctx, request)
    for topic in request.topic_data:
        answers = []
        for p in topic.partition_data:
            code = refused.get((topic.name, int(p.index))) if refused else None
            if code is not None:
                message = None if unauthorized else "the partition is not in the transaction"
                answers.append(_failed(int(p.index), code, message))
                continue
            records = p.records
            if ctx.version < produce_request.FIRST_ZSTD_VERSION:
                try:
                    records = _old_version_records(ctx.version, p.records)
                except legacy.LegacyFormatError as e:
                    answers.append(_failed(int(p.index), e.code, str(e)))
                    continue
            answer, waits_on, offset = produce_to_partition(
                ctx, topic.name, int(p.index), records, acks
            )
            answers.append(answer)
            if waits_on is not None:
                pending.append((answer, waits_on, offset))
        topics.append((topic.name, answers))
    if pending:
        await _await_replication(ctx, pending, int(request.timeout_ms))
    counters = ctx.services.counters
    if counters is not None:
        _count(counters, topics)
    if acks == 0:
        return None
    return produce_response.encode(ctx.version, ctx.header.correlation_id, topics)


def _count(counters: BrokerCounters, topics: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """Kafka's Total- and FailedProduceRequests per topic (per partition written to), and the
    partitions' error codes once the answer is final."""
    requests = counters.requests
    for name, answers in topics:
        stats = counters.topic(name)
        stats.produce_requests += len(answers)
        for answer in answers:
            code = answer["error_code"]
            if code:
                stats.failed_produce_requests += 1
                requests.error(produce_request.API_KEY, int(code))
