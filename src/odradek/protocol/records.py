"""The records inside a RecordBatch v2: decoding whole batches and building new ones.

The broker's hot path never comes here (it works on :mod:`odradek.protocol.record_batch` headers);
this is for the project's own client, ListOffsets by timestamp, compaction, the group coordinator
and the Spark source.

After the 61-byte header a batch holds ``recordCount`` records, compressed together with the
batch's codec. Each record, as Kafka's ``DefaultRecord`` lays it out::

    length          varint    bytes of the record after this field
    attributes      int8      unused, 0
    timestampDelta  varlong   timestamp - baseTimestamp
    offsetDelta     varint    offset - baseOffset
    keyLength       varint    -1 for a null key
    key             bytes
    valueLength     varint    -1 for a null value
    value           bytes
    headersCount    varint
    headers         headerKeyLength varint, headerKey UTF-8,
                    headerValueLength varint (-1 for null), headerValue bytes

varint/varlong are zigzag-encoded base-128 varints, least significant group first (as protobuf's
``sint32``/``sint64``).
"""

from __future__ import annotations

import importlib.util
import os
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import crc32c

from odradek.protocol import compression as codecs
from odradek.protocol.record_batch import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_START,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    crc_of,
    iter_headers,
    read_header,
)

Bytes = bytes | bytearray | memoryview

_HEADER = struct.Struct(">qiibIhiqqqhii")
_MAX_VARINT_BYTES = 10  # a varlong; a varint takes at most 5


class RecordDecodeError(ValueError):
    """Bytes that are not a well-formed v2 batch or record."""


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a UTF-8 key and an optional value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record to put in a new batch; ``timestamp=None`` means the batch's ``now_ms``."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()
    timestamp: int | None = None


RecordInput = NewRecord | tuple[bytes | None, bytes | None, Sequence[Header], int | None]


# -- varints -----------------------------------------------------------------------------------


def _read_varint(buf: bytes, position: int) -> tuple[int, int]:
    """Decode the zigzag varint at ``position``; return it and the position after it."""
    try:
        b = buf[position]
        if b < 0x80:  # one byte: by far the common case
            return (b >> 1) ^ -(b & 1), position + 1
        raw = b & 0x7F
        shift = 7
        position += 1
        while True:
            b = buf[position]
            position += 1
            raw |= (b & 0x7F) << shift
            if b < 0x80:
                return (raw >> 1) ^ -(raw & 1), position
            shift += 7
            if shift >= 7 * _MAX_VARINT_BYTES:
                raise RecordDecodeError("varint longer than 10 bytes")
    except IndexError:
        raise RecordDecodeError("record ends inside a varint") from None


def _write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` as a zigzag varint (a varlong for values outside int32)."""
    raw = (value << 1) ^ (value >> 63)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def zigzag_varint(value: int) -> bytes:
    """``value`` as a zigzag varint on its own: Kafka's record varints, Avro's longs and the
    message indexes of Confluent's Protobuf framing are all this encoding."""
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


# -- checking ----------------------------------------------------------------------------------
#
# The framing check itself is odradek.protocol.record_scan, compiled by mypyc where it could be
# built; _scanner() picks the compiled module unless its source is newer (an edit not yet built).


class InvalidRecords(RecordDecodeError):
    """A records section whose framing Kafka's record reader refuses (INVALID_RECORD)."""


class RecordsCheck(NamedTuple):
    """What checking a records section learnt beside its framing: the least and greatest
    timestamp delta, how many records have a null key, and whether the offset deltas run
    0, 1, 2, ... as every client writes them. (A named tuple: made once a batch, on the produce
    path, where a frozen dataclass's ``__init__`` costs several times as much.)"""

    min_timestamp_delta: int
    max_timestamp_delta: int
    null_keys: int
    offsets_in_order: bool


def _compiled_or_source(module: ModuleType) -> ModuleType:
    """``module`` compiled, if it was built from the source beside it; else that source.

    ``ODRADEK_PURE_PYTHON=1`` takes the source regardless (for tests comparing the two)."""
    compiled = module.__file__ or ""
    if compiled.endswith(".py"):
        return module
    name = module.__name__.rpartition(".")[2]
    source = Path(compiled).with_name(f"{name}.py")
    # Newer by seconds: edited since the build (an installer writes both within a moment).
    stale = source.exists() and source.stat().st_mtime > Path(compiled).stat().st_mtime + 2
    if not stale and os.environ.get("ODRADEK_PURE_PYTHON") != "1":
        return module
    spec = importlib.util.spec_from_file_location(f"odradek.protocol._{name}_source", source)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def _scanner() -> ModuleType:
    """record_scan compiled where it was built, else its source (see _compiled_or_source)."""
    from odradek.protocol import record_scan

    return _compiled_or_source(record_scan)


_scan_module = _scanner()
SCANNER_COMPILED = not (_scan_module.__file__ or "").endswith(".py")
_scan = _scan_module.scan
_scan_some = _scan_module.scan_some
_ScanState = _scan_module.ScanState
_FramingError: type[ValueError] = _scan_module.FramingError


def _wire_ids() -> ModuleType:
    from odradek.protocol import wire_ids

    return _compiled_or_source(wire_ids)


_wire_ids_module = _wire_ids()
WIRE_IDS_COMPILED = not (_wire_ids_module.__file__ or "").endswith(".py")
_schema_ids = _wire_ids_module.schema_ids


def wire_schema_ids(section: bytes, count: int, keys: bool, values: bool) -> tuple[set[int], bool]:
    """The distinct schema registry ids the records' keys (if ``keys``) and values (if
    ``values``) carry in the registry's wire format, and whether any key or value so checked,
    not null, lacks that prefix (see :mod:`odradek.protocol.wire_ids`); ``section``: records
    that :func:`check_records` passed, as ``bytes``. :class:`RecordDecodeError` where they are
    cut short."""
    try:
        ids, missing = _schema_ids(section, count, keys, values)
    except IndexError:
        raise RecordDecodeError("records end inside a record") from None
    return ids, missing


def check_records(buf: bytes, start: int, end: int, count: int) -> RecordsCheck:
    """Check that ``buf[start:end]`` is exactly ``count`` well-framed records, as Kafka's
    ``DefaultRecord.readFrom`` reads them (see :func:`odradek.protocol.record_scan.scan`); raise
    :class:`InvalidRecords` otherwise. ``buf`` must be ``bytes`` (what the compiled scan reads
    fastest, and all it takes)."""
    try:
        return RecordsCheck(*_scan(buf, start, end, count))
    except _FramingError as e:
        raise InvalidRecords(str(e)) from None


class RecordsScan:
    """The check of :func:`check_records`, made in parts: :meth:`advance` checks the next few
    records, so that a records section of a million records can give way to other work between
    parts. Whatever the parts, it refuses what :func:`check_records` refuses, with the same
    message, and learns the same :class:`RecordsCheck`."""

    __slots__ = ("_buf", "_state")

    def __init__(self, buf: bytes, start: int, end: int, count: int) -> None:
        """``buf`` must be ``bytes`` (as for :func:`check_records`); :class:`InvalidRecords` for a
        ``count`` that the bytes cannot hold."""
        self._buf = buf
        try:
            self._state = _ScanState(start, end, count)
        except _FramingError as e:
            raise InvalidRecords(str(e)) from None

    def advance(self, records: int) -> RecordsCheck | None:
        """Check up to ``records`` more records: the :class:`RecordsCheck` once every record is
        checked, None while some are left; :class:`InvalidRecords` where the framing is refused."""
        try:
            if not _scan_some(self._buf, self._state, records):
                return None
        except _FramingError as e:
            raise InvalidRecords(str(e)) from None
        return RecordsCheck(*self._state.result())


# -- decoding ----------------------------------------------------------------------------------


def _read_bytes(buf: bytes, position: int, what: str) -> tuple[bytes | None, int]:
    length, position = _read_varint(buf, position)
    if length < 0:
        if length == -1:
            return None, position
        raise RecordDecodeError(f"{what} length {length} is negative")
    end = position + length
    if end > len(buf):
        raise RecordDecodeError(f"{what} of {length} bytes overruns the record")
    return buf[position:end], end


def _decode_records(data: bytes, header: BatchHeader) -> list[Record]:
    records: list[Record] = []
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = header.max_timestamp if header.is_log_append_time else None
    position = 0
    end = len(data)
    for _ in range(header.record_count):
        length, position = _read_varint(data, position)
        record_end = position + length
        if length < 6 or record_end > end:  # attributes + 5 one-byte varints at the least
            raise RecordDecodeError(f"record length {length} does not fit the batch")
        position += 1  # attributes: unused
        timestamp_delta, position = _read_varint(data, position)
        offset_delta, position = _read_varint(data, position)
        key, position = _read_bytes(data, position, "key")
        value, position = _read_bytes(data, position, "value")
        header_count, position = _read_varint(data, position)
        if header_count < 0:
            raise RecordDecodeError(f"header count {header_count} is negative")
        headers: tuple[Header, ...] = ()
        if header_count:
            items = []
            for _ in range(header_count):
                raw_key, position = _read_bytes(data, position, "header key")
                if raw_key is None:
                    raise RecordDecodeError("header key is null")
                header_value, position = _read_bytes(data, position, "header value")
                try:
                    header_key = raw_key.decode()
                except UnicodeDecodeError as e:
                    raise RecordDecodeError(f"header key is not UTF-8: {e}") from None
                items.append(Header(header_key, header_value))
            headers = tuple(items)
        if position != record_end:
            raise RecordDecodeError(f"record length {length} disagrees with its fields")
        records.append(
            Record(
                base_offset + offset_delta,
                base_timestamp + timestamp_delta if log_append_time is None else log_append_time,
                key,
                value,
                headers,
            )
        )
    if position != end:
        raise RecordDecodeError(
            f"{end - position} bytes follow the {header.record_count} records of the batch"
        )
    return records


def _decode_at(buf: Bytes, header: BatchHeader, verify_crc: bool) -> list[Record]:
    if header.magic != MAGIC:
        raise RecordDecodeError(f"record batch magic {header.magic} is not 2")
    if verify_crc and crc_of(buf, header) != header.crc:
        raise RecordDecodeError("record batch CRC does not match its contents")
    if header.record_count < 0:
        raise RecordDecodeError(f"record count {header.record_count} is negative")
    body = memoryview(buf)[header.position + HEADER_SIZE : header.position + header.size]
    try:
        data = codecs.decompress(header.compression, body)
    except codecs.CompressionError as e:
        raise RecordDecodeError(f"cannot decompress record batch: {e}") from e
    return _decode_records(data, header)


def decode_batch(batch: Bytes, *, verify_crc: bool = True) -> list[Record]:
    """The records of ``batch``, exactly one whole v2 batch, decompressed.

    Offsets and timestamps are absolute: ``baseOffset + offsetDelta`` and
    ``baseTimestamp + timestampDelta``, or the batch's ``maxTimestamp`` for every record when the
    batch has LogAppendTime. Control batches decode like any other (check the header to skip them;
    see :func:`iter_records`). Raises :class:`RecordDecodeError` if ``batch`` is malformed.
    """
    if len(batch) < HEADER_SIZE:
        raise RecordDecodeError(f"{len(batch)} bytes are too few for a record batch header")
    header = read_header(batch, 0)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or header.size != len(batch):
        raise RecordDecodeError(
            f"batch length {header.batch_length} does not match the {len(batch)} bytes given"
        )
    return _decode_at(batch, header, verify_crc)


def iter_records(
    buf: Bytes, *, verify_crc: bool = True
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Each whole batch in ``buf`` with its records, in order.

    A partial batch at the end (a Fetch response may cut one off) is skipped; a malformed batch
    raises :class:`RecordDecodeError`.
    """
    for header in iter_headers(buf):
        yield header, _decode_at(buf, header, verify_crc)


# -- encoding ----------------------------------------------------------------------------------


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        _write_varint(out, len(data))
        out += data


def encode_batch(
    records: Iterable[RecordInput],
    *,
    compression: int = 0,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    timestamp_type_log_append: bool = False,
    transactional: bool = False,
    control: bool = False,
    now_ms: int,
) -> bytes:
    """One v2 batch holding ``records``, with offsets ``base_offset, base_offset + 1, ...``.

    Each record is a :class:`NewRecord` or a ``(key, value, headers, timestamp)`` tuple; a
    ``None`` timestamp is ``now_ms``. baseTimestamp is the first record's timestamp, as the Java
    client writes it. With ``timestamp_type_log_append`` the batch carries the LogAppendTime bit
    and ``now_ms`` as its maxTimestamp, so readers see ``now_ms`` for every record.
    """
    if compression not in codecs.CODEC_NAMES.values():
        raise ValueError(f"unknown compression codec id {compression}")
    items = [r if isinstance(r, NewRecord) else NewRecord(*r) for r in records]
    if not items:
        raise ValueError("a record batch needs at least one record")
    timestamps = [now_ms if r.timestamp is None else r.timestamp for r in items]
    base_timestamp = timestamps[0]

    body = bytearray()
    record = bytearray()
    for offset_delta, (item, timestamp) in enumerate(zip(items, timestamps, strict=True)):
        record.clear()
        record.append(0)  # attributes
        _write_varint(record, timestamp - base_timestamp)
        _write_varint(record, offset_delta)
        _write_bytes(record, item.key)
        _write_bytes(record, item.value)
        _write_varint(record, len(item.headers))
        for h in item.headers:
            _write_bytes(record, h.key.encode())
            _write_bytes(record, h.value)
        _write_varint(body, len(record))
        body += record

    attributes = 0
    if timestamp_type_log_append:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    return batch_around(
        body,
        len(items),
        base_timestamp,
        now_ms if timestamp_type_log_append else max(timestamps),
        compression=compression,
        attributes=attributes,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
    )


def batch_around(
    section: Bytes,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: int = 0,
    attributes: int = 0,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The v2 batch holding a records ``section`` already written (``record_count`` records,
    offset deltas 0, 1, ..., timestamp deltas from ``base_timestamp``), compressed here with
    ``compression``; ``attributes`` are the bits besides the codec."""
    payload = section if compression == codecs.NONE else codecs.compress(compression, section)
    out = bytearray(HEADER_SIZE + len(payload))
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,  # crc, below
        attributes | compression,
        record_count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    out[HEADER_SIZE:] = payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


# -- compaction ----------------------------------------------------------------------------------
#
# Log compaction reads every record of a log but needs only its key, offset, timestamp and whether
# its value is null, and rewrites a batch by dropping records.  A record's bytes are relative to
# its batch (offset and timestamp deltas), so a rewritten batch that keeps its base offset and
# base timestamp can carry the kept records' bytes unchanged; only a new delete horizon, which
# replaces the base timestamp, makes the timestamp deltas change.

# (offset delta, timestamp delta, key, value is null, start, end, attributes position, position
# after the timestamp delta): one record of a batch's records section, its bytes start..end
# (length prefix included).
RecordSpan = tuple[int, int, bytes | None, bool, int, int, int, int]


def records_section(batch: Bytes, header: BatchHeader) -> bytes:
    """The records of the batch at ``header`` in ``batch``, decompressed."""
    body = memoryview(batch)[header.position + HEADER_SIZE : header.position + header.size]
    try:
        return codecs.decompress(header.compression, body)
    except codecs.CompressionError as e:
        raise RecordDecodeError(f"cannot decompress record batch: {e}") from e


def max_record_timestamp(batch: Bytes, header: BatchHeader) -> int:
    """The greatest CreateTime of the batch's records (baseTimestamp plus each record's delta),
    read from the records themselves; raises :class:`RecordDecodeError`."""
    spans = scan_records(records_section(batch, header), header.record_count)
    return header.base_timestamp + max(span[1] for span in spans)


def scan_records(section: bytes, count: int) -> list[RecordSpan]:
    """The spans of the ``count`` records of a records section, reading only what compaction
    needs (one-byte varints, by far the common case, are read inline)."""
    spans: list[RecordSpan] = []
    add = spans.append
    read = _read_varint
    position = 0
    size = len(section)
    try:
        for _ in range(count):
            start = position
            b = section[position]
            if b < 0x80:
                length, position = (b >> 1) ^ -(b & 1), position + 1
            elif section[position + 1] < 0x80:  # records of 64 bytes to 8 KiB
                raw = (b & 0x7F) | (section[position + 1] << 7)
                length, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                length, position = read(section, position)
            end = position + length
            if length < 6 or end > size:
                raise RecordDecodeError(f"record length {length} does not fit the batch")
            attributes = position
            position += 1
            b = section[position]
            if b < 0x80:
                timestamp_delta, position = (b >> 1) ^ -(b & 1), position + 1
            else:
                timestamp_delta, position = read(section, position)
            after_timestamp = position
            b = section[position]
            if b < 0x80:
                offset_delta, position = (b >> 1) ^ -(b & 1), position + 1
            elif section[position + 1] < 0x80:  # offset deltas from 64 to 8191
                raw = (b & 0x7F) | (section[position + 1] << 7)
                offset_delta, position = (raw >> 1) ^ -(raw & 1), position + 2
            else:
                offset_delta, position = read(section, position)
            b = section[position]
            if b < 0x80:
                key_length, position = (b >> 1) ^ -(b & 1), position + 1
            else:
                key_length, position = read(section, position)
            key: bytes | None = None
            if key_length >= 0:
                key = section[position : position + key_length]
                position += key_length
            elif key_length != -1:
                raise RecordDecodeError(f"key length {key_length} is negative")
            # A null value's length, -1, is the one-byte varint 1 (as every client writes it).
            null_value = section[position] == 1
            if position >= end:
                raise RecordDecodeError("record fields overrun its length")
            add(
                (
                    offset_delta,
                    timestamp_delta,
                    key,
                    null_value,
                    start,
                    end,
                    attributes,
                    after_timestamp,
                )
            )
            position = end
    except IndexError:
        raise RecordDecodeError("records end inside a record") from None
    if position != size:
        raise RecordDecodeError(f"{size - position} bytes follow the {count} records of the batch")
    return spans


def key_value_prefixes(
    section: bytes, count: int, size: int
) -> list[tuple[bytes | None, bytes | None]]:
    """The first ``size`` bytes (fewer where shorter) of each of the ``count`` records' key and
    value in a records section, None for a null one: what a check of a wire-format prefix reads
    (a schema registry's magic byte and id), copying no more. Raises :class:`RecordDecodeError`
    where the framing is broken (a section :func:`check_records` passed is not)."""
    prefixes: list[tuple[bytes | None, bytes | None]] = []
    position = 0
    total = len(section)
    try:
        # Only a refused batch is read here (the check itself is wire_ids'), so plainly.
        for _ in range(count):
            length, position = _read_varint(section, position)
            end = position + length
            position += 1  # attributes
            position = _read_varint(section, position)[1]  # timestampDelta
            position = _read_varint(section, position)[1]  # offsetDelta
            fields: list[bytes | None] = []
            for _field in ("key", "value"):
                field_length, position = _read_varint(section, position)
                fields.append(
                    None
                    if field_length < 0
                    else section[position : position + min(field_length, size)]
                )
                position += max(field_length, 0)
            if position > end or end > total:
                raise RecordDecodeError("record fields overrun its length")
            prefixes.append((fields[0], fields[1]))
            position = end
    except IndexError:
        raise RecordDecodeError("records end inside a record") from None
    return prefixes


def rebuild_batch(
    header: BatchHeader,
    section: bytes,
    kept: Sequence[RecordSpan],
    *,
    compression: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """The batch of ``header`` holding only the records ``kept`` (spans of its ``section``, in
    order): what log compaction writes in place of a batch that lost records.

    No offset changes: the batch keeps its baseOffset and lastOffsetDelta, so it spans the offsets
    it spanned and a reader moves past removed records, and each record keeps its offset delta.
    Producer id, epoch and base sequence, the leader epoch and the timestamp-type, transactional
    and control bits carry over, and record timestamps are kept.  ``compression`` (default: the
    batch's own codec) packs the records.  With ``delete_horizon_ms`` the batch is marked as
    KIP-534 describes: the delete-horizon attribute bit is set and baseTimestamp holds the
    horizon, the records' timestamp deltas rewritten to count from it, so readers unaware of the
    bit still decode the right timestamps.

    With no records kept the result is an empty batch, as Kafka's cleaner keeps an idempotent
    producer's last batch: uncompressed, no records, both timestamps the batch's max timestamp.
    """
    if not kept:
        return _empty_batch(header)
    codec = header.compression if compression is None else compression
    if codec not in codecs.CODEC_NAMES.values():
        raise ValueError(f"unknown compression codec id {codec}")
    body = bytearray()
    if delete_horizon_ms is None or delete_horizon_ms == header.base_timestamp:
        base_timestamp = header.base_timestamp
        for span in kept:
            body += section[span[4] : span[5]]
    else:
        base_timestamp = delete_horizon_ms
        shift = header.base_timestamp - delete_horizon_ms
        record = bytearray()
        for _, timestamp_delta, _, _, _, end, attributes, after_timestamp in kept:
            record.clear()
            record.append(section[attributes])
            _write_varint(record, timestamp_delta + shift)
            record += section[after_timestamp:end]
            _write_varint(body, len(record))
            body += record
    payload = body if codec == codecs.NONE else codecs.compress(codec, body)
    attributes_field = (header.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_BIT)) | codec
    if delete_horizon_ms is not None:
        attributes_field |= DELETE_HORIZON_BIT
    max_timestamp = (
        header.max_timestamp
        if header.is_log_append_time
        else header.base_timestamp + max(span[1] for span in kept)
    )
    out = bytearray(HEADER_SIZE + len(payload))
    _HEADER.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC,
        0,  # crc, below
        attributes_field,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    out[HEADER_SIZE:] = payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def _empty_batch(header: BatchHeader) -> bytes:
    out = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        out,
        0,
        header.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC,
        0,  # crc, below
        header.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_BIT),
        header.last_offset_delta,
        header.max_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        0,
    )
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
