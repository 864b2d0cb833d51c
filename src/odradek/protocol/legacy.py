"""Message sets in Kafka's message formats v0 and v1 (magic 0 and 1), converted to and from
RecordBatch v2.

Clients older than Kafka 0.11 (and librdkafka talking to a broker without Produce v3) send and read
*message sets*: a sequence of entries, each one message with the offset it has in the log::

    offset      int64     absolute; see below for the messages inside a compressed wrapper
    size        int32     bytes after this field
    crc         uint32    CRC-32 (IEEE, zlib's) of magic .. end
    magic       int8      0 or 1
    attributes  int8      bits 0-2 codec, bit 3 timestamp type (v1: 1 is LogAppendTime)
    timestamp   int64     v1 only
    key         int32 length (-1: null) and bytes
    value       int32 length (-1: null) and bytes

A compressed message set is one *wrapper* message with a null key whose value is the inner message
set compressed with the wrapper's codec; the inner messages are uncompressed. A v0 wrapper's inner
offsets are absolute; a v1 wrapper's are relative (0, 1, ...), the wrapper's own offset being the
absolute offset of the last inner message (KIP-31). A v1 wrapper with LogAppendTime gives every
inner message the wrapper's timestamp. Messages carry no headers, producer ids or sequences.

LZ4 in magic 0 has a quirk from Kafka's first LZ4 writer: the frame header checksum byte is hashed
over the 4-byte frame magic as well as the frame descriptor. Such frames are read after repairing
that byte, and magic-0 frames are written with it broken again, as Kafka's KafkaLZ4BlockOutputStream
does for v0 readers. zstd (codec 4) exists only in RecordBatch v2.

The conversions are Kafka's (LogValidator's conversion on produce, RecordsUtil.downConvert on
fetch): :func:`to_record_batch` turns a produced message set into one v2 batch of all its messages
(offsets left for the log to assign; v0 messages have no timestamp, -1), :func:`down_convert` turns
stored v2 batches into a message set of the magic a Fetch v0-v3 client reads (control batches
dropped, headers lost). Pure functions on bytes, any thread.
"""

from __future__ import annotations

import struct
import zlib

from odradek.protocol import compression as codecs
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import (
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_BIT,
    iter_headers,
)
from odradek.protocol.records import _write_varint, batch_around, decode_batch

Bytes = bytes | bytearray | memoryview

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_OFFSET = 16  # of the magic byte in a message entry as in a v2 batch

_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_ENTRY_SIZE = _ENTRY.size  # 18
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_V0_OVERHEAD = 4 + 1 + 1 + 4 + 4  # crc, magic, attributes, key length, value length
_V1_OVERHEAD = _V0_OVERHEAD + 8
_CRC_FIELD = 12  # entry offset of the crc, which covers every byte after it (magic onward)

# LZ4 frame: magic (4 bytes, little-endian 0x184D2204), FLG, BD, optional content size (8) and
# dictionary id (4) by FLG bits 3 and 0, then HC: byte 1 of xxHash32 of the descriptor.
_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"


class LegacyFormatError(ValueError):
    """A message set the broker refuses, with the Kafka error the producer gets."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def magic_of(records: Bytes) -> int:
    """The magic byte of the first entry (a message or a v2 batch); -1 when too short."""
    return records[MAGIC_OFFSET] if len(records) > MAGIC_OFFSET else -1


# -- xxHash32 (for LZ4 frame header checksums only: a few bytes) ------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data``, as LZ4 frames use it."""
    n = len(data)
    i = 0
    if n >= 16:
        lanes = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for lane in range(4):
                (word,) = struct.unpack_from("<I", data, i)
                lanes[lane] = _rotl((lanes[lane] + word * _P2) & _M32, 13) * _P1 & _M32
                i += 4
        h = _rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)
    else:
        h = seed + _P5
    h = (h + n) & _M32
    while i + 4 <= n:
        (word,) = struct.unpack_from("<I", data, i)
        h = _rotl((h + word * _P3) & _M32, 17) * _P4 & _M32
        i += 4
    while i < n:
        h = _rotl((h + data[i] * _P5) & _M32, 11) * _P1 & _M32
        i += 1
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    h ^= h >> 16
    return h


def _lz4_header_checksum_position(frame: Bytes) -> int:
    if len(frame) < 7 or bytes(frame[:4]) != _LZ4_FRAME_MAGIC:
        raise LegacyFormatError(ErrorCode.corrupt_message, "LZ4 data is not an LZ4 frame")
    flags = frame[4]
    return 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)


def _with_lz4_header_checksum(frame: Bytes, broken: bool) -> bytes:
    """``frame`` with its header checksum computed properly, or Kafka's broken way."""
    position = _lz4_header_checksum_position(frame)
    out = bytearray(frame)
    if position >= len(out):
        raise LegacyFormatError(ErrorCode.corrupt_message, "LZ4 frame ends inside its header")
    out[position] = (xxh32(bytes(out[0 if broken else 4 : position])) >> 8) & 0xFF
    return bytes(out)


def _decompress(codec: int, magic: int, data: Bytes) -> bytes:
    if codec == codecs.LZ4 and magic == MAGIC_V0:
        # Either checksum is accepted, as librdkafka and Kafka's later readers do.
        data = _with_lz4_header_checksum(data, broken=False)
    try:
        return codecs.decompress(codec, data)
    except codecs.CompressionError as e:
        raise LegacyFormatError(ErrorCode.corrupt_message, str(e)) from e


def _compress(codec: int, magic: int, data: bytes) -> bytes:
    out = codecs.compress(codec, data)
    if codec == codecs.LZ4 and magic == MAGIC_V0:
        out = _with_lz4_header_checksum(out, broken=True)
    return out


# -- reading -----------------------------------------------------------------------------------


def _small_varint(value: int) -> bytes:
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


# Zigzag varints of 0..16383 (the lengths and deltas of nearly every record), looked up rather
# than computed: the conversion's cost is per record.
_SMALL_VARINTS = tuple(_small_varint(v) for v in range(1 << 14))


def _varint(out: bytearray, value: int) -> None:
    if 0 <= value < 16384:
        out += _SMALL_VARINTS[value]
    else:
        _write_varint(out, value)


class _Section:
    """The records section of the one v2 batch a message set becomes, as it is written."""

    __slots__ = ("base_timestamp", "body", "codec", "count", "max_timestamp")

    def __init__(self) -> None:
        self.body = bytearray()
        self.codec = codecs.NONE
        self.count = 0
        self.base_timestamp = NO_TIMESTAMP
        self.max_timestamp = NO_TIMESTAMP


def _convert_messages(buf: memoryview, out: _Section, wrapper: tuple[int, int] | None) -> None:
    """Write the messages of ``buf`` to ``out`` as v2 records, each CRC-checked first; the
    messages of a compressed one go in its place. ``wrapper``: the magic and LogAppendTime
    timestamp (-1 if none) of the compressed message ``buf`` came from. Raises
    :class:`LegacyFormatError`. One loop, no object per message: this is the cost per record of
    an old producer."""
    position = 0
    end = len(buf)
    crc32 = zlib.crc32
    unpack_entry = _ENTRY.unpack_from
    unpack_length = _LENGTH.unpack_from
    unpack_timestamp = _TIMESTAMP.unpack_from
    small = _SMALL_VARINTS
    body = out.body
    record = bytearray()
    while position < end:
        if end - position < _ENTRY_SIZE:
            raise LegacyFormatError(ErrorCode.corrupt_message, "message set ends inside an entry")
        offset, size, crc, magic, attributes = unpack_entry(buf, position)
        if magic == MAGIC:
            raise LegacyFormatError(
                ErrorCode.invalid_record, "a record batch v2 among v0/v1 messages"
            )
        if magic != MAGIC_V0 and magic != MAGIC_V1:
            raise LegacyFormatError(ErrorCode.corrupt_message, f"message magic {magic}")
        stop = position + LOG_OVERHEAD + size
        if size < (_V1_OVERHEAD if magic else _V0_OVERHEAD) or stop > end:
            raise LegacyFormatError(
                ErrorCode.corrupt_message, f"message size {size} does not fit the message set"
            )
        if crc32(buf[position + _CRC_FIELD + 4 : stop]) != crc:
            raise LegacyFormatError(
                ErrorCode.corrupt_message, f"message at offset {offset} fails its CRC"
            )
        at = position + _ENTRY_SIZE
        timestamp = NO_TIMESTAMP
        if magic == MAGIC_V1:
            (timestamp,) = unpack_timestamp(buf, at)
            at += 8
        # the overhead checked above puts the key's length field inside the message
        (key_length,) = unpack_length(buf, at)
        key_start = at + 4
        at = key_start + (key_length if key_length > 0 else 0)
        if at + 4 > stop:
            raise LegacyFormatError(ErrorCode.corrupt_message, "message key overruns it")
        (value_length,) = unpack_length(buf, at)
        value_start = at + 4
        if value_start + (value_length if value_length > 0 else 0) != stop:
            raise LegacyFormatError(
                ErrorCode.corrupt_message, f"message at offset {offset} does not end at its value"
            )
        codec = attributes & COMPRESSION_MASK
        if wrapper is not None:
            if magic != wrapper[0]:
                raise LegacyFormatError(
                    ErrorCode.invalid_record, f"a v{magic} message inside a v{wrapper[0]} wrapper"
                )
            if codec != codecs.NONE:
                raise LegacyFormatError(
                    ErrorCode.invalid_record, "a compressed message inside a compressed one"
                )
            if wrapper[1] != NO_TIMESTAMP:
                timestamp = wrapper[1]
        elif codec != codecs.NONE:
            if codec > codecs.LZ4:
                raise LegacyFormatError(
                    ErrorCode.unsupported_compression_type,
                    f"compression codec {codec} in a v{magic} message",
                )
            if value_length < 0:
                raise LegacyFormatError(
                    ErrorCode.invalid_record, "compressed message without a value"
                )
            out.codec = codec
            inner = _decompress(codec, magic, buf[value_start:stop])
            log_append = magic == MAGIC_V1 and attributes & TIMESTAMP_TYPE_BIT
            _convert_messages(
                memoryview(inner), out, (magic, timestamp if log_append else NO_TIMESTAMP)
            )
            position = stop
            continue
        count = out.count
        if not count:
            out.base_timestamp = timestamp
        if timestamp > out.max_timestamp:
            out.max_timestamp = timestamp
        record.clear()
        record.append(0)  # attributes
        delta = timestamp - out.base_timestamp
        if 0 <= delta < 16384:
            record += small[delta]
        else:
            _write_varint(record, delta)
        record += small[count] if count < 16384 else _small_varint(count)
        if key_length < 0:
            record.append(1)  # zigzag(-1): null
        else:
            _varint(record, key_length)
            record += buf[key_start : key_start + key_length]
        if value_length < 0:
            record.append(1)
        else:
            _varint(record, value_length)
            record += buf[value_start:stop]
        record.append(0)  # no headers
        _varint(body, len(record))
        body += record
        out.count = count + 1
        position = stop


def to_record_batch(records: Bytes) -> bytes:
    """A produced v0/v1 message set as one RecordBatch v2 (offset deltas 0..n-1, offsets for the
    log to assign), compressed with the codec the producer used (the last compressed wrapper's,
    as Kafka takes it). Raises :class:`LegacyFormatError` for a CRC mismatch (CORRUPT_MESSAGE),
    a zstd or unknown codec (UNSUPPORTED_COMPRESSION_TYPE) and nested compression."""
    section = _Section()
    _convert_messages(memoryview(records).cast("B"), section, None)
    if not section.count:
        raise LegacyFormatError(ErrorCode.invalid_record, "no messages")
    return batch_around(
        section.body,
        section.count,
        section.base_timestamp,
        section.max_timestamp,
        compression=section.codec,
    )


# -- writing -----------------------------------------------------------------------------------


def _write_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
) -> None:
    start = len(out)
    out += _ENTRY.pack(offset, 0, 0, magic, attributes)
    if magic == MAGIC_V1:
        out += _TIMESTAMP.pack(timestamp)
    for field in (key, value):
        if field is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += _LENGTH.pack(len(field))
            out += field
    struct.pack_into(">iI", out, start + 8, len(out) - start - LOG_OVERHEAD, 0)
    crc = zlib.crc32(memoryview(out)[start + _CRC_FIELD + 4 :])
    struct.pack_into(">I", out, start + _CRC_FIELD, crc)


def down_convert(data: Bytes, magic: int, first_offset: int, size_hint: int = 0) -> bytes:
    """Stored v2 batches (whole ones; a cut-short last batch is left out) as a message set of
    ``magic`` for a Fetch v0-v3 reader: one message per record of an uncompressed batch, one
    wrapper per compressed batch; control batches and the records of uncompressed batches below
    ``first_offset`` are left out. Once the output holds ``size_hint`` bytes no further batch is
    converted (the first always is). Raises :class:`LegacyFormatError`
    (UNSUPPORTED_COMPRESSION_TYPE) for zstd."""
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"message format v{magic} is not an old one")
    out = bytearray()
    view = memoryview(data).cast("B")
    for header in iter_headers(view):
        if size_hint and out and len(out) >= size_hint:
            break
        if header.is_control or header.next_offset <= first_offset:
            continue
        codec = header.compression
        if codec == codecs.ZSTD:
            raise LegacyFormatError(
                ErrorCode.unsupported_compression_type,
                "zstd batches cannot be read by Fetch v0-v3",
            )
        batch = view[header.position : header.position + header.size]
        records = decode_batch(batch, verify_crc=False)
        if codec == codecs.NONE:
            # A compressed batch goes whole, as Kafka's downConvert sends it: old consumers
            # skip what lies below their fetch offset in a wrapper themselves.
            records = [r for r in records if r.offset >= first_offset]
        if not records:
            continue
        log_append = header.is_log_append_time
        type_bit = TIMESTAMP_TYPE_BIT if log_append and magic == MAGIC_V1 else 0
        if codec == codecs.NONE:
            for r in records:
                timestamp = header.max_timestamp if log_append else r.timestamp
                _write_message(out, r.offset, magic, type_bit, timestamp, r.key, r.value)
            continue
        inner = bytearray()
        base = records[0].offset
        for r in records:
            relative = r.offset - base if magic == MAGIC_V1 else r.offset
            timestamp = header.max_timestamp if log_append else r.timestamp
            _write_message(inner, relative, magic, 0, timestamp, r.key, r.value)
        wrapper_timestamp = (
            header.max_timestamp if log_append else max(r.timestamp for r in records)
        )
        _write_message(
            out,
            records[-1].offset,
            magic,
            codec | type_bit,
            wrapper_timestamp,
            None,
            _compress(codec, magic, bytes(inner)),
        )
    return bytes(out)
