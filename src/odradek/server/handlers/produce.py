"""Produce (0): hand each partition's record set to its leader's append, acknowledge by acks.

Produce v0-v2 carry message sets in formats v0/v1, converted here to a RecordBatch v2 before the
log sees them (:mod:`odradek.protocol.legacy`); below v7 zstd is refused (KIP-110). Neither touches
the requests of current clients beyond a version comparison.

A transactional producer's first batch to a partition in a transaction is checked first with
the transaction coordinator (KIP-890's verification, ``transaction.partition.verification.
enable``): a partition the producer never added to its transaction is refused with
INVALID_TXN_STATE, so a hanging transaction cannot start there. From Produce v12 (transaction
version 2, whose producers send no AddPartitionsToTxn) the coordinator is asked to add the
partition to the transaction instead, whatever that setting says.
"""

from __future__ import annotations

from typing import Any

from odradek.cluster.replication.replica_manager import AppendResult, ProduceEntry
from odradek.counters import BrokerCounters
from odradek.protocol import compression, legacy, produce_request, produce_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import COMPRESSION_MASK, HEADER_SIZE, MAGIC, read_header
from odradek.server.authorize import producer_denials
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


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


def _answer(index: int, result: AppendResult) -> dict[str, Any]:
    info = result.appended
    if result.error != ErrorCode.none or info is None:
        answer = _failed(index, result.error, result.message)
        answer["record_errors"] = [
            {"batch_index": i, "batch_index_error_message": message}
            for i, message in result.record_errors
        ]
        return answer
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": info.first_offset,
        "log_append_time": info.log_append_time if info.log_append_time is not None else -1,
        "log_start_offset": info.log_start_offset,
        "record_errors": [],
        "error_message": None,
    }


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
    add = ctx.version >= produce_request.FIRST_IMPLICIT_ADD_VERSION
    if request.transactional_id is None or not (
        add or services.config.get_bool("transaction.partition.verification.enable")
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
    verdicts = await services.transactions.verify(request.transactional_id, *first, wanted, add=add)
    return {
        tp: ErrorCode.not_enough_replicas if code in _RETRIABLE_VERIFICATION else code
        for tp, code in verdicts.items()
        if code != ErrorCode.none
    }


@handles(
    api_key=produce_request.API_KEY,
    min_version=produce_request.MIN_VERSION,
    max_version=produce_request.MAX_VERSION,
    # by hand, so that record batches stay writable views of the receive buffer
    decode=produce_request.decode_produce_request,
)
async def handle_produce(ctx: RequestContext, request: Any) -> Response | None:
    acks = int(request.acks)
    topics: list[tuple[str, list[dict[str, Any]]]] = []
    entries: list[ProduceEntry] = []
    slots: list[tuple[list[dict[str, Any]], int]] = []  # where each entry's answer goes
    unauthorized = producer_denials(ctx, request)
    refused = unauthorized or await _unverified(ctx, request)
    for topic in request.topic_data:
        answers: list[dict[str, Any]] = []
        for p in topic.partition_data:
            code = refused.get((topic.name, int(p.index))) if refused else None
            if code is not None:
                message = (
                    None
                    if unauthorized
                    else "the transaction coordinator cannot take the partition yet"
                    if code == ErrorCode.not_enough_replicas
                    else "the partition is not in the transaction"
                )
                answers.append(_failed(int(p.index), code, message))
                continue
            records = p.records
            if ctx.version < produce_request.FIRST_ZSTD_VERSION:
                try:
                    records = _old_version_records(ctx.version, p.records)
                except legacy.LegacyFormatError as e:
                    answers.append(_failed(int(p.index), e.code, str(e)))
                    continue
            slots.append((answers, len(answers)))
            answers.append({})
            entries.append(ProduceEntry(topic.name, int(p.index), records))
        topics.append((topic.name, answers))
    results = await ctx.services.replicas.append_records(
        entries,
        acks,
        int(request.timeout_ms) if acks == -1 else 0,  # only acks=all waits
        origin=ctx.peer,
        api_key=ctx.header.api_key,
        waiting=ctx.only_waiting_left,
    )
    counters = ctx.services.counters
    for entry, (answers, at), result in zip(entries, slots, results, strict=True):
        answers[at] = _answer(entry.index, result)
        if counters is not None and result.appended is not None:
            # Kafka's BytesIn and MessagesIn: what the log took, whether or not acks=all then
            # waited in vain for the followers.
            stats = counters.topic(entry.topic)
            stats.bytes_in += len(entry.records) if entry.records is not None else 0
            stats.messages_in += result.appended.last_offset - result.appended.first_offset + 1
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
