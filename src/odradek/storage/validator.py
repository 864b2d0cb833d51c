"""What a leader accepts into its log: the checks and rewrites of Kafka's ``LogValidator``.

A produced record set is validated by its batch headers and CRCs, then every record of every
batch is read, as Kafka reads them before appending: a compressed batch is decompressed (at most
:func:`decompressed_limit` bytes) and the records' framing checked (lengths, varints, header
counts, the batch's record count against the records present, no trailing bytes; see
:func:`odradek.protocol.records.check_records`, compiled by mypyc where it was built). The batch
is still stored as the bytes that came: the check reads a transient copy of its records and
builds nothing per record. What the client gets, as Kafka answers:

- CORRUPT_MESSAGE: a CRC that does not match, a batch that ends early, a compressed payload its
  codec cannot decode (Kafka 3.x lets the codec's exception through as UNKNOWN_SERVER_ERROR; the
  damaged-bytes answer is the useful one, and the one a CRC failure gets);
- INVALID_RECORD: records whose framing Kafka's ``DefaultRecord.readFrom`` refuses, a record
  count that disagrees with the records or the last offset delta, control batches, an idempotent
  batch without a base sequence, and keyless records on a compacted topic (by record index);
  also, stricter than Kafka, a key, value or header value length below -1 (Kafka reads it as
  null; librdkafka and this project's readers refuse it) and a timestamp past 64 bits;
- MESSAGE_TOO_LARGE: a batch over ``max.message.bytes``, or records inflating past the limit;
- INVALID_TIMESTAMP: a record's CreateTime outside the topic's bounds of the broker's clock
  (``message.timestamp.before/after.max.ms``), by record index;
- INVALID_RECORD, on a topic with ``confluent.key.schema.validation`` or
  ``confluent.value.schema.validation`` (Confluent Server's schema id validation): a key or value
  that is not null and does not start with the schema registry's wire format (magic byte 0, a
  4-byte big-endian schema id) naming an id the registry holds under the subject the topic's
  subject name strategy gives (``confluent.key/value.subject.name.strategy``: see
  :func:`subjects_for`), by record index (:class:`SchemaIdsRefused`). Null keys and values pass,
  as Confluent's do (tombstones of compacted topics). Only these topics have their keys and
  values read, and each distinct id of a batch is checked once.

As Kafka does, the header's maxTimestamp is set from the records' timestamps when it disagrees
(sarama before 1.23 leaves it -1; time lookups, time indexes and retention read the header), and a
compressed batch whose offset deltas do not run 0, 1, 2, ... is rebuilt with ones that do. A
topic with its own ``compression.type`` has its batches rewritten in that codec, and
``message.timestamp.type=LogAppendTime`` stamps the broker's time later, in the append.

A big record set (many records, or a big compressed batch: :func:`stepped`) takes tens to
hundreds of milliseconds to check, so its framing checks can be made ahead, in steps
(:func:`checking_in_steps`: the decompression as one step that can run on another thread, the
scan in parts of a few thousand records), and handed to :func:`validate_for_leader`, which
answers with them exactly as it answers when it makes them itself.

Pure functions on bytes and a :class:`~odradek.storage.log.LogConfig`: no I/O, any thread.
A follower's appends do not come here; they hold the leader's batches as the leader stored them.
"""

from __future__ import annotations

import struct
from collections.abc import Generator, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode, RecordsRejected
from odradek.protocol.record_batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    InvalidBatch,
    iter_headers,
    set_max_timestamp,
    validate_batches,
    with_compression,
)
from odradek.protocol.records import (
    InvalidRecords,
    NewRecord,
    RecordDecodeError,
    RecordsCheck,
    RecordsScan,
    check_records,
    decode_batch,
    encode_batch,
    key_value_prefixes,
    wire_schema_ids,
)
from odradek.storage.log import (
    RECORD_NAME_STRATEGY,
    TOPIC_NAME_STRATEGY,
    TOPIC_RECORD_NAME_STRATEGY,
    LogConfig,
)

NO_PRODUCER_ID = -1
# How far a batch's records may inflate, as a multiple of max.message.bytes (at least 1 MiB).
# Kafka streams a compressed batch through its codec and sets no limit; here the records are
# decompressed whole before they are read, so the limit bounds the memory one batch can take
# while leaving room for the ratios real data reaches (JSON, logs: 5-20x; zeros: far more).
DECOMPRESSION_FACTOR = 64

# A record set is checked in steps (see checking_in_steps) when its batches hold more records than
# this, or when one of them is a compressed batch of more bytes than that (64x of it inflates to
# 4 MiB, some 15 ms of decompressing): below both, the check takes a few milliseconds at most.
STEPPED_RECORDS = 16_384
STEPPED_COMPRESSED_BYTES = 64 * 1024
# What a batch below those bounds may inflate to while checked where it arrived (the event
# loop): a few kilobytes of zeros can hold the whole decompression limit, which their headers
# do not tell. Past this, validate_for_leader raises InflatesPastInline, and the set is checked
# in steps like a big one.
INLINE_DECOMPRESSED_BYTES = 4 * 1024 * 1024
# The records a step of the framing scan checks: a few milliseconds of work.
STEP_RECORDS = 4_096
# Where a batch header keeps its length, the low byte of its attributes and its record count.
_INT32 = struct.Struct(">i")
_LENGTH_AT = 8
_ATTRIBUTES_LOW_BYTE = 22
_RECORD_COUNT_AT = 57

# The schema registry's wire format: magic byte 0, then the schema id (a big-endian int32).
WIRE_FORMAT_MAGIC = 0
_WIRE_PREFIX = struct.Struct(">bi")

_BATCH_ERRORS = {
    "corrupt_message": ErrorCode.corrupt_message,
    "invalid_record": ErrorCode.invalid_record,
    "message_too_large": ErrorCode.message_too_large,
}


@dataclass(frozen=True, slots=True)
class ValidatedRecords:
    """Batches ready for :meth:`PartitionLog.append`: the buffer (the request's own bytes, or a
    rewritten copy), their headers, and the broker's time when the topic stamps it."""

    buffer: bytearray | memoryview
    headers: list[BatchHeader] = field(default_factory=list)
    log_append_time: int | None = None


class SchemaIdUse(Protocol):
    """What the schema registry holds of one id: the subjects it is registered under, and the
    names Confluent's record name strategies give its schema (any of them may be the record's:
    a Protobuf file has several messages)."""

    @property
    def subjects(self) -> Set[str]: ...

    @property
    def record_names(self) -> Sequence[str]: ...


class SchemaIds(Protocol):
    """The schema registry's ids, as a topic that validates them asks."""

    def get(self, schema_id: int, /) -> SchemaIdUse | None: ...


def subjects_for(strategy: str, topic: str, what: str, use: SchemaIdUse) -> list[str]:
    """The subjects a key's or value's (``what``) schema is registered under by Confluent's
    ``strategy``: ``<topic>-key`` / ``<topic>-value`` (TopicNameStrategy), the record's name
    (RecordNameStrategy), ``<topic>-<record name>`` (TopicRecordNameStrategy)."""
    if strategy == TOPIC_NAME_STRATEGY:
        return [f"{topic}-{what}"]
    if strategy == RECORD_NAME_STRATEGY:
        return list(use.record_names)
    assert strategy == TOPIC_RECORD_NAME_STRATEGY, strategy
    return [f"{topic}-{name}" for name in use.record_names]


class InflatesPastInline(Exception):
    """A batch of a record set :func:`validate_for_leader` checked inline decompresses to more
    than :data:`INLINE_DECOMPRESSED_BYTES`: check the set with :func:`checking_in_steps` and
    validate it again with those checks. Raised before anything is changed."""


@dataclass(frozen=True, slots=True)
class RecordsChecked:
    """The framing checks of a record set's batches, made ahead of :func:`validate_for_leader`
    by :func:`checking_in_steps`, in batch order: each batch's :class:`RecordsCheck`, up to the
    first batch whose records are refused, there the refusal. ``limit``: the decompression limit
    they were made with (a topic's ``max.message.bytes`` may change meanwhile)."""

    limit: int
    outcomes: tuple[RecordsCheck | RecordsRejected, ...]


@dataclass(frozen=True, slots=True)
class Inflate:
    """A step of :func:`checking_in_steps`: decompress a batch's records. Its work (cramjam's)
    releases the GIL, so a driver may run :meth:`run` on another thread, and sends its result
    back to the steps."""

    codec: int
    payload: memoryview
    limit: int
    name: str

    def run(self) -> bytes | RecordsRejected:
        """The batch's records, or the refusal of a payload that does not decompress."""
        try:
            return _decompressed(self.codec, self.payload, self.limit, self.name)
        except RecordsRejected as e:
            return e


# One step of checking_in_steps: None after each part of a scan (the driver may run other work
# before the next), an Inflate to run.
Step = Inflate | None


class SchemaIdsRefused(RecordsRejected):
    """INVALID_RECORD: records without a schema id the registry holds under the topic's
    subject, on a topic that validates them. ``unknown``: the ids that were well-formed but not
    known, or not under the subject, which a replay of the registry fresher than the one asked
    may know (an id registered, or registered under one more subject, a moment ago)."""

    def __init__(
        self, message: str, record_errors: list[tuple[int, str]], unknown: frozenset[int]
    ) -> None:
        super().__init__(ErrorCode.invalid_record, message, record_errors)
        self.unknown = unknown


@dataclass(slots=True)
class _SchemaIdCheck:
    """The keys' and values' wire-format prefixes of a topic that validates them, batch by
    batch; what was refused, gathered over every batch of the set."""

    config: LogConfig
    known: SchemaIds
    topic: str
    name: str
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    unknown: set[int] = field(default_factory=set)
    # Each (id, key or value) judged once per record set: None, or why it is refused.
    _verdicts: dict[tuple[int, str], str | None] = field(default_factory=dict)

    @property
    def keys(self) -> bool:
        return self.config.key_schema_validation

    @property
    def values(self) -> bool:
        return self.config.value_schema_validation

    def batch(self, section: bytes, count: int) -> None:
        if self._all_valid(section, count):
            return
        # Refused: which records, and why, from their prefixes (rare, so in Python).
        prefixes = key_value_prefixes(section, count, _WIRE_PREFIX.size)
        # Each distinct prefix checked once: a batch's records mostly share one schema id.
        complaints: dict[tuple[int, bytes | None], str] = {}
        for at, what, wanted in ((0, "key", self.keys), (1, "value", self.values)):
            if wanted:
                for prefix in {p[at] for p in prefixes}:
                    complaint = self._complaint(what, prefix)
                    if complaint is not None:
                        complaints[(at, prefix)] = complaint
        if not complaints:
            return
        for index, (key, value) in enumerate(prefixes):
            complaint = complaints.get((0, key)) or complaints.get((1, value))
            if complaint is not None:
                self.record_errors.append((index, f"the {complaint} (record {index})"))

    def _all_valid(self, section: bytes, count: int) -> bool:
        """Whether every key and value the topic validates has a good id (the usual answer,
        told without looking at records one by one)."""
        if self.keys and self.values:
            # Keys' and values' ids answer to different subjects: one scan each.
            sides = [("key", *wire_schema_ids(section, count, True, False))]
            sides.append(("value", *wire_schema_ids(section, count, False, True)))
        else:
            what = "key" if self.keys else "value"
            sides = [(what, *wire_schema_ids(section, count, self.keys, self.values))]
        return all(
            not missing and all(self._verdict(what, i) is None for i in ids)
            for what, ids, missing in sides
        )

    def _verdict(self, what: str, schema_id: int) -> str | None:
        """Why ``schema_id`` may not be a ``what``'s id on this topic (None: it may)."""
        key = (schema_id, what)
        if key in self._verdicts:
            return self._verdicts[key]
        use = self.known.get(schema_id)
        verdict = None
        if use is None:
            verdict = f"{what}'s schema id {schema_id} is not in the schema registry"
        else:
            strategy = (
                self.config.key_subject_name_strategy
                if what == "key"
                else self.config.value_subject_name_strategy
            )
            wanted = subjects_for(strategy, self.topic, what, use)
            if not any(subject in use.subjects for subject in wanted):
                named = " or ".join(repr(s) for s in wanted) or "(its schema has no record name)"
                verdict = (
                    f"{what}'s schema id {schema_id} is not registered under the subject "
                    f"{named} that {strategy} gives"
                )
        if verdict is not None:
            self.unknown.add(schema_id)
        self._verdicts[key] = verdict
        return verdict

    def _complaint(self, what: str, prefix: bytes | None) -> str | None:
        if prefix is None:
            return None
        if len(prefix) < _WIRE_PREFIX.size or prefix[0] != WIRE_FORMAT_MAGIC:
            return f"{what} has no schema id: it does not start with magic byte 0 and an id"
        return self._verdict(what, _WIRE_PREFIX.unpack(prefix)[1])

    def refuse(self) -> None:
        if self.record_errors:
            first = self.record_errors[0][1]
            raise SchemaIdsRefused(
                f"{len(self.record_errors)} record(s) refused by the schema validation of "
                f"{self.name}: {first}",
                self.record_errors,
                frozenset(self.unknown),
            )


def validate_for_leader(
    records: bytes | bytearray | memoryview | None,
    config: LogConfig,
    now_ms: int,
    name: str,
    schema_ids: SchemaIds | None = None,
    topic: str | None = None,
    checked: RecordsChecked | None = None,
) -> ValidatedRecords:
    """Check a produced record set for the log ``name`` (``topic-partition``, for messages)
    of ``topic`` (by default ``name`` less its partition) against the topic's policy; raises
    :class:`RecordsRejected`. ``schema_ids``: the ids the schema registry holds, for a topic
    that validates them (None: this broker has no registry to ask, and such a topic's records
    are refused). ``checked``: the framing checks of these very bytes made ahead by
    :func:`checking_in_steps`, used in place of making them here (where they still apply: same
    decompression limit, no schema ids to read).

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
        if header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0:
            raise RecordsRejected(
                ErrorCode.invalid_record,
                f"invalid sequence number {header.base_sequence} in a record batch with "
                f"producer id {header.producer_id} in {name}",
            )
    schema = None
    if config.key_schema_validation or config.value_schema_validation:
        if schema_ids is None:
            raise RecordsRejected(
                ErrorCode.invalid_record,
                f"{name} validates schema ids, but this broker serves no schema registry to "
                f"check them against (schema.registry.listener)",
            )
        schema = _SchemaIdCheck(config, schema_ids, topic or name.rsplit("-", 1)[0], name)
    limit = decompressed_limit(config)
    if checked is not None and checked.limit == limit and schema is None:
        checks = [_outcome(checked, index) for index in range(len(headers))]
    else:
        # Topics that read schema ids are never checked in steps: theirs inflate here in full.
        inline = limit if schema is not None else min(limit, INLINE_DECOMPRESSED_BYTES)
        checks = [_check(buffer, header, limit, name, schema, inline) for header in headers]
    if schema is not None:
        schema.refuse()
    if config.compact and any(check.null_keys for check in checks):
        _refuse_keyless(buffer, headers, name)
    if any(not c.offsets_in_order and h.compression for h, c in zip(headers, checks, strict=True)):
        buffer = _renumber(buffer, headers, checks, now_ms)
        headers = list(iter_headers(buffer))
        checks = [_check(buffer, header, limit, name) for header in headers]
    target = config.compression
    if target is not None and any(h.compression != target for h in headers):
        buffer = _recompress(buffer, headers, target)
        headers = list(iter_headers(buffer))
    if config.log_append_time:
        return ValidatedRecords(buffer, headers, now_ms)
    _check_timestamps(buffer, headers, checks, config, now_ms, name)
    if any(
        not h.is_log_append_time and h.max_timestamp != h.base_timestamp + c.max_timestamp_delta
        for h, c in zip(headers, checks, strict=True)
    ):
        _set_max_timestamps(buffer, headers, checks)
        headers = list(iter_headers(buffer))
    return ValidatedRecords(buffer, headers, None)


def decompressed_limit(config: LogConfig) -> int:
    """The most bytes a batch's records may take once decompressed (MESSAGE_TOO_LARGE past it)."""
    return DECOMPRESSION_FACTOR * max(config.max_message_bytes, 1 << 20)


def _check(
    buffer: bytearray | memoryview,
    header: BatchHeader,
    limit: int,
    name: str,
    schema: _SchemaIdCheck | None = None,
    inline: int | None = None,
) -> RecordsCheck:
    """Read every record of the batch at ``header`` (decompressed, if it is) for its framing,
    and for their schema ids where the topic validates them. ``inline``: the most bytes it may
    inflate to here (:class:`InflatesPastInline` past it), if less than ``limit``."""
    section = _records_of(buffer, header, limit, name, inline)
    try:
        check = _in_range(check_records(section, 0, len(section), header.record_count), header)
        if schema is not None:
            schema.batch(section, header.record_count)
        return check
    except RecordDecodeError as e:  # InvalidRecords, mostly
        raise _invalid(e, name) from e


def _records_of(
    buffer: bytearray | memoryview,
    header: BatchHeader,
    limit: int,
    name: str,
    inline: int | None = None,
) -> bytes:
    """The records section of the batch at ``header``, decompressed, as ``bytes``: a copy to read
    from, since the scan reads bytes (compiled, it takes nothing else), and reads them faster
    than a view, by more than the copy costs."""
    payload = memoryview(buffer)[header.position + HEADER_SIZE : header.position + header.size]
    if header.compression == compression.NONE:
        return bytes(payload)
    return _decompressed(header.compression, payload, limit, name, inline)


def _decompressed(
    codec: int, payload: memoryview, limit: int, name: str, inline: int | None = None
) -> bytes:
    bound = limit if inline is None else min(inline, limit)
    try:
        records, size = compression.decompress_bounded(codec, payload, bound)
    except compression.DecompressedTooLarge as e:
        if bound < limit:
            raise InflatesPastInline(name) from e
        raise RecordsRejected(
            ErrorCode.message_too_large,
            f"the records of a batch to {name} take more than {limit} bytes decompressed: {e}",
        ) from e
    except compression.CompressionError as e:
        raise RecordsRejected(
            ErrorCode.corrupt_message, f"cannot decompress a record batch to {name}: {e}"
        ) from e
    return bytes(memoryview(records)[:size])


def _invalid(e: RecordDecodeError, name: str) -> RecordsRejected:
    return RecordsRejected(ErrorCode.invalid_record, f"invalid record in a batch to {name}: {e}")


def _outcome(checked: RecordsChecked, index: int) -> RecordsCheck:
    outcome = checked.outcomes[index]
    if isinstance(outcome, RecordsRejected):
        raise outcome
    return outcome


def stepped(records: bytes | bytearray | memoryview | None) -> bool:
    """Whether the check of a record set is worth making in steps (:func:`checking_in_steps`):
    many records, or a big compressed batch (by their headers: a few kilobytes of zstd can hold
    a hundred thousand records)."""
    if records is None:
        return False
    # Read in place rather than by iter_headers: this runs for every produced set.
    position, end, count = 0, len(records), 0
    while position + HEADER_SIZE <= end:
        (length,) = _INT32.unpack_from(records, position + _LENGTH_AT)
        size = LOG_OVERHEAD + length
        if records[position + _ATTRIBUTES_LOW_BYTE] & COMPRESSION_MASK and (
            size > STEPPED_COMPRESSED_BYTES
        ):
            return True
        (records_count,) = _INT32.unpack_from(records, position + _RECORD_COUNT_AT)
        count += records_count
        if length <= 0:
            break
        position += size
    return count > STEPPED_RECORDS


def checking_in_steps(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    name: str,
    step_records: int = STEP_RECORDS,
) -> Generator[Step, bytes | RecordsRejected | None, RecordsChecked | None]:
    """The framing checks :func:`validate_for_leader` makes of every batch's records (the
    costly part of validating a big compressed batch: decompressing it, reading a million
    records), made in steps, so that the caller can run other work between them: a step that
    decompresses (an :class:`Inflate`, whose result the caller sends back), then the scan, in
    parts of ``step_records`` records, each followed by a None step. Returns them as
    :func:`validate_for_leader`'s ``checked``, or None where it would not use them: batches it
    refuses before reading records, a topic that validates schema ids.

    Pure: no I/O, any thread; the records must not change until they are validated.
    """
    if config.key_schema_validation or config.value_schema_validation:
        return None
    buffer = memoryview(records)
    try:
        headers = validate_batches(buffer, config.max_message_bytes)
    except InvalidBatch:
        return None
    limit = decompressed_limit(config)
    outcomes: list[RecordsCheck | RecordsRejected] = []
    for header in headers:
        start = header.position + HEADER_SIZE
        payload = buffer[start : header.position + header.size]
        if header.compression == compression.NONE:
            section = bytes(payload)
        else:
            inflated = yield Inflate(header.compression, payload, limit, name)
            if inflated is None:
                raise TypeError("an Inflate step's result must be sent back to the steps")
            if isinstance(inflated, RecordsRejected):
                outcomes.append(inflated)
                break
            section = inflated
        try:
            scan = RecordsScan(section, 0, len(section), header.record_count)
            while (check := scan.advance(step_records)) is None:
                yield None
            outcomes.append(_in_range(check, header))
        except RecordDecodeError as e:
            outcomes.append(_invalid(e, name))
            break
    return RecordsChecked(limit, tuple(outcomes))


def check_in_steps(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    name: str,
    step_records: int = STEP_RECORDS,
) -> RecordsChecked | None:
    """:func:`checking_in_steps` run to its end in this thread."""
    steps = checking_in_steps(records, config, name, step_records)
    sent: bytes | RecordsRejected | None = None
    try:
        while True:
            step = steps.send(sent)
            sent = None if step is None else step.run()
    except StopIteration as done:
        result: RecordsChecked | None = done.value
        return result


def _in_range(check: RecordsCheck, header: BatchHeader) -> RecordsCheck:
    """The records' timestamps must be int64s (a varlong delta can say more), as the header's
    maxTimestamp will hold one of them."""
    low = header.base_timestamp + check.min_timestamp_delta
    high = header.base_timestamp + check.max_timestamp_delta
    if low < -(1 << 63) or high >= 1 << 63:
        raise InvalidRecords(f"record timestamps [{low}, {high}] are not 64-bit integers")
    return check


def _check_timestamps(
    buffer: bytearray | memoryview,
    headers: list[BatchHeader],
    checks: list[RecordsCheck],
    config: LogConfig,
    now_ms: int,
    name: str,
) -> None:
    """CreateTime timestamps must lie within the topic's bounds of the broker's clock: every
    record's (Kafka's ``validateTimestamp``), told by the batch's least and greatest."""
    too_new, too_old = config.timestamp_after_max_ms, config.timestamp_before_max_ms
    for header, check in zip(headers, checks, strict=True):
        if header.is_log_append_time:
            low = high = header.max_timestamp
        else:
            low = header.base_timestamp + check.min_timestamp_delta
            high = header.base_timestamp + check.max_timestamp_delta
        if (high - now_ms > too_new and high != NO_TIMESTAMP) or (
            now_ms - low > too_old and low != NO_TIMESTAMP
        ):
            message = (
                f"a record's timestamp is out of range [{now_ms - too_old}, {now_ms + too_new}] "
                f"of the broker's time in {name}"
            )
            raise RecordsRejected(
                ErrorCode.invalid_timestamp,
                message,
                _late_or_early(buffer, header, message, config, now_ms),
            )


def _late_or_early(
    buffer: bytearray | memoryview,
    header: BatchHeader,
    message: str,
    config: LogConfig,
    now_ms: int,
) -> list[tuple[int, str]]:
    """The indexes of the records out of bounds, for Produce's record errors (rare: decodes)."""
    too_new, too_old = config.timestamp_after_max_ms, config.timestamp_before_max_ms
    try:
        records = decode_batch(memoryview(buffer)[header.position : header.position + header.size])
    except RecordDecodeError:
        return []
    return [
        (i, message)
        for i, r in enumerate(records)
        if r.timestamp != NO_TIMESTAMP
        and (r.timestamp - now_ms > too_new or now_ms - r.timestamp > too_old)
    ]


def _set_max_timestamps(
    buffer: bytearray | memoryview, headers: list[BatchHeader], checks: list[RecordsCheck]
) -> None:
    """Give each batch the maxTimestamp of its records where its header says otherwise (rare:
    every client but old sarama writes it right)."""
    for header, check in zip(headers, checks, strict=True):
        greatest = header.base_timestamp + check.max_timestamp_delta
        if not header.is_log_append_time and header.max_timestamp != greatest:
            set_max_timestamp(buffer, header, greatest)


def _renumber(
    buffer: bytearray | memoryview,
    headers: list[BatchHeader],
    checks: list[RecordsCheck],
    now_ms: int,
) -> bytearray:
    """Rebuild compressed batches whose offset deltas do not run 0, 1, 2, ...: Kafka rewrites
    such a batch rather than refusing it (rare: every current client numbers them so)."""
    out = bytearray()
    for header, check in zip(headers, checks, strict=True):
        batch = memoryview(buffer)[header.position : header.position + header.size]
        if check.offsets_in_order or not header.compression:
            out += batch
            continue
        try:
            records = decode_batch(batch)
        except RecordDecodeError as e:
            raise RecordsRejected(ErrorCode.invalid_record, str(e)) from e
        out += encode_batch(
            [NewRecord(r.key, r.value, r.headers, r.timestamp) for r in records],
            compression=header.compression,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            partition_leader_epoch=header.partition_leader_epoch,
            transactional=header.is_transactional,
            now_ms=now_ms,
        )
    return out


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
    from odradek.protocol.records import records_section, scan_records

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
