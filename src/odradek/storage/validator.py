"""What a leader accepts into its log: the checks and rewrites of Kafka's ``LogValidator``.

A produced record set is validated by its batch headers and CRCs (records stay undecoded),
except where the topic's policy needs more: a compacted topic refuses keyless records, so only
there records are scanned; a topic with its own ``compression.type`` has its batches rewritten in
that codec; ``message.timestamp.type=LogAppendTime`` stamps the broker's time later, in the append,
and ``CreateTime`` timestamps must fall within the topic's bounds of the broker's clock. A batch
whose header leaves maxTimestamp unset (-1) although its records have timestamps (sarama before
1.23 writes them so) gets it from its records, as Kafka's LogValidator sets maxTimestamp from
the records it validates: time lookups, time indexes and retention read the header.

Pure functions on bytes and a :class:`~odradek.storage.log.LogConfig`: no I/O, any thread.
A follower's appends do not come here; they hold the leader's batches as the leader stored them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import (
    CONTROL_BIT,
    NO_TIMESTAMP,
    BatchHeader,
    InvalidBatch,
    iter_headers,
    set_max_timestamp,
    validate_batches,
    with_compression,
)
from odradek.storage.log import LogConfig

_BATCH_ERRORS = {
    "corrupt_message": ErrorCode.corrupt_message,
    "invalid_record": ErrorCode.invalid_record,
    "message_too_large": ErrorCode.message_too_large,
}


class RecordsRejected(KafkaError):
    """A produced record set the log refuses; ``record_errors`` name records by their index
    within the batch, as Produce v8+ reports them."""

    def __init__(
        self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]] | None = None
    ) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors or []


@dataclass(frozen=True, slots=True)
class ValidatedRecords:
    """Batches ready for :meth:`PartitionLog.append`: the buffer (the request's own bytes, or a
    rewritten copy), their headers, and the broker's time when the topic stamps it."""

    buffer: bytearray | memoryview
    headers: list[BatchHeader] = field(default_factory=list)
    log_append_time: int | None = None


def validate_for_leader(
    records: bytes | bytearray | memoryview | None, config: LogConfig, now_ms: int, name: str
) -> ValidatedRecords:
    """Check a produced record set for the log ``name`` (``topic-partition``, for messages)
    against the topic's policy; raises :class:`RecordsRejected`.

    Offsets are later assigned by rewriting the batches in place, so a writable view (the
    request's bytes in the connection's receive buffer) is used as it is and anything else copied.
    """
    if not records:
        raise RecordsRejected(ErrorCode.invalid_record, "no record batches")
    buffer: bytearray | memoryview = (
        records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
    )
    try:
        headers = validate_batches(buffer, config.max_message_bytes)
    except InvalidBatch as e:
        raise RecordsRejected(_BATCH_ERRORS[e.error], str(e)) from e
    for header in headers:
        if header.attributes & CONTROL_BIT:
            # Markers are the transaction coordinator's to write (WriteTxnMarkers), as in Kafka.
            raise RecordsRejected(ErrorCode.invalid_record, "clients may not write control batches")
    if config.compact:
        _refuse_keyless(buffer, headers, name)
    target = config.compression
    if target is not None and any(h.compression != target for h in headers):
        buffer = _recompress(buffer, headers, target)
        headers = list(iter_headers(buffer))
    if config.log_append_time:
        return ValidatedRecords(buffer, headers, now_ms)
    for header in headers:
        if header.max_timestamp == NO_TIMESTAMP and header.base_timestamp != NO_TIMESTAMP:
            _set_max_timestamps(buffer, headers)
            headers = list(iter_headers(buffer))
            break
    too_new, too_old = config.timestamp_after_max_ms, config.timestamp_before_max_ms
    for header in headers:
        ts = header.max_timestamp
        if ts - now_ms > too_new or now_ms - ts > too_old:
            raise RecordsRejected(
                ErrorCode.invalid_timestamp,
                f"timestamp {ts} is out of range of the broker's time {now_ms}",
            )
    return ValidatedRecords(buffer, headers, None)


def _set_max_timestamps(buffer: bytearray | memoryview, headers: list[BatchHeader]) -> None:
    """Give each batch lacking it the maxTimestamp of its records (rare: off the hot path)."""
    from odradek.protocol.records import RecordDecodeError, max_record_timestamp

    for header in headers:
        if header.max_timestamp == NO_TIMESTAMP and header.base_timestamp != NO_TIMESTAMP:
            try:
                set_max_timestamp(buffer, header, max_record_timestamp(buffer, header))
            except RecordDecodeError as e:
                raise RecordsRejected(ErrorCode.corrupt_message, str(e)) from e


def _recompress(
    buffer: bytearray | memoryview, headers: list[BatchHeader], codec: int
) -> bytearray:
    """Rewrite every batch in the topic's codec: the one case where the broker opens batches."""
    out = bytearray()
    for header in headers:
        out += with_compression(buffer, header, codec)
    return out


def _refuse_keyless(buffer: bytearray | memoryview, headers: list[BatchHeader], name: str) -> None:
    """On a compacted log every record needs a key: the cleaner keeps records by key."""
    from odradek.protocol.records import RecordDecodeError, records_section, scan_records

    for header in headers:
        try:
            spans = scan_records(records_section(buffer, header), header.record_count)
        except RecordDecodeError as e:
            raise RecordsRejected(ErrorCode.corrupt_message, str(e)) from e
        keyless = next((i for i, span in enumerate(spans) if span[2] is None), None)
        if keyless is not None:
            message = (
                f"Compacted topic cannot accept message without key in topic partition {name}."
            )
            raise RecordsRejected(ErrorCode.invalid_record, message, [(keyless, message)])
