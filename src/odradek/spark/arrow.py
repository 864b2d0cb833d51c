"""Record batches to Arrow, column-wise, in the layout of Spark's Kafka source.

A Fetch returns RecordBatch v2 bytes (see :mod:`odradek.protocol.records` for the record layout).
Decoding them one record at a time in Python costs microseconds per record. Here the per-record
Python is at most one step — following the record-length varints from one record to the next,
because where a record starts depends on the one before — and everything else is numpy over all
records of a Fetch at once:

1. the records are read where the Fetch response put them (compressed batches are decompressed
   and joined into one buffer);
2. record boundaries: from each record, a run of following records of the same length is
   guessed and checked with one vectorised comparison (runs are long in practice: lengths
   change only where a delta's varint grows); where runs are short, the Python walk takes over;
3. every field (timestamp delta, offset delta, key and value lengths, header count) is decoded
   for all records at once by vectorised varint decoding, each step at positions the previous
   step gave;
4. key and value become Arrow ``binary_view`` arrays pointing into that buffer (no per-record
   Python) and are cast to ``binary``, the type Spark expects, by Arrow's C++.

Headers are rare, so when asked for they are decoded per record.

The result is a ``pyarrow.RecordBatch`` with exactly the schema Spark derives from the source's
``StructType`` (``partition`` int32, ``timestamp`` microseconds in UTC, ...), which Spark takes
without converting rows.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from odradek.protocol import compression as codecs
from odradek.protocol.record_batch import HEADER_SIZE, MAGIC, crc_of, iter_headers
from odradek.protocol.records import RecordDecodeError

Int64s = npt.NDArray[np.int64]
Pool = bytes | memoryview

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
KAFKA_SCHEMA = pa.schema(_BASE_FIELDS)
KAFKA_SCHEMA_WITH_HEADERS = pa.schema([*_BASE_FIELDS, pa.field("headers", HEADERS_TYPE)])

_AR12 = np.arange(12)
_AR4 = np.arange(4)
_RUN_MIN_RECORDS = 8


def kafka_schema(include_headers: bool) -> pa.Schema:
    return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA


@dataclass(frozen=True, slots=True)
class _Batches:
    """The wanted batches of a fetch: their record sections joined, and per-batch fields."""

    pool: bytes | memoryview
    starts: list[int]  # where each batch's records begin in ``pool``
    ends: list[int]
    counts: Int64s
    base_offsets: Int64s
    base_timestamps: Int64s
    max_timestamps: Int64s
    log_append_time: npt.NDArray[np.bool_]


def _collect(
    records: bytes | memoryview,
    start: int,
    end: int,
    verify_crc: bool,
    skip: Collection[int] = (),
) -> _Batches:
    pieces: list[bytes | memoryview] = []
    starts: list[int] = []
    ends: list[int] = []
    fields: list[tuple[int, int, int, int, bool]] = []
    view = memoryview(records)
    compressed = False
    for header in iter_headers(records):
        if header.is_control or header.next_offset <= start or header.base_offset >= end:
            continue
        if header.position in skip:
            continue
        if header.magic != MAGIC:
            raise RecordDecodeError(f"record batch magic {header.magic} is not 2")
        if header.record_count <= 0:
            continue
        if verify_crc and crc_of(records, header) != header.crc:
            raise RecordDecodeError(
                f"record batch at offset {header.base_offset} fails its CRC check"
            )
        body_start = header.position + HEADER_SIZE
        body: bytes | memoryview = view[body_start : header.position + header.size]
        if header.compression != codecs.NONE:
            compressed = True
            try:
                body = codecs.decompress(header.compression, body)
            except codecs.CompressionError as e:
                raise RecordDecodeError(f"cannot decompress record batch: {e}") from e
        pieces.append(body)
        starts.append(body_start)
        ends.append(header.position + header.size)
        fields.append(
            (
                header.record_count,
                header.base_offset,
                header.base_timestamp,
                header.max_timestamp,
                header.is_log_append_time,
            )
        )
    pool: Pool
    if compressed:
        # Decompressed sections live apart: join them all into one pool.
        pool = b"".join(pieces)
        ends = np.cumsum([len(p) for p in pieces]).tolist()
        starts = [0, *ends[:-1]]
    else:
        pool = records  # the records are read where the fetch put them
    table = np.array(fields, dtype=np.int64).reshape(-1, 5)
    return _Batches(
        pool,
        starts,
        ends,
        table[:, 0].copy(),
        table[:, 1].copy(),
        table[:, 2].copy(),
        table[:, 3].copy(),
        table[:, 4].astype(bool),
    )


def _record_ends(
    pool_np: npt.NDArray[np.uint8], pool: Pool, position: int, count: int, end: int
) -> Int64s:
    """End positions of the ``count`` records from ``position`` to ``end``.

    Each record starts with its length, so finding record ``i + 1`` needs record ``i``. Within a
    batch, neighbouring records often have the same length (the varints of the deltas grow only
    at 64, 8192, ...); so from each record walked, the ends of a run of records with that same
    length are guessed at once and the guess is checked with one vectorised comparison: record
    ``j`` of the run really starts where guessed if records before it did and the bytes there
    spell the same length varint. The run stops at the first mismatch, where walking resumes.
    When runs turn out short (records of varied sizes), the rest is walked one by one.
    """
    ends = np.empty(count, dtype=np.int64)
    done = 0
    gallop = count >= _RUN_MIN_RECORDS
    try:
        while done < count:
            size = 1
            while pool[position + size - 1] >= 0x80:
                size += 1
                if size > 10:
                    raise RecordDecodeError("record length varint is too long")
            raw = 0
            for i in range(size):
                raw |= (pool[position + i] & 0x7F) << (7 * i)
            length = (raw >> 1) ^ -(raw & 1)
            stride = size + length
            if length < 6 or position + stride > end:
                raise RecordDecodeError(f"record length {length} does not fit its batch")
            run = 1
            if gallop:
                most = min(count - done, (end - position) // stride)
                if most > 1:
                    heads = position + np.arange(1, most, dtype=np.int64) * stride
                    same = _take(pool_np, heads) == pool[position]
                    for i in range(1, size):
                        same &= _take(pool_np, heads + i) == pool[position + i]
                    misses = np.flatnonzero(~same)
                    run = int(misses[0]) + 1 if misses.size else most
                    if run < _RUN_MIN_RECORDS:
                        gallop = False  # varied sizes: walking is cheaper than guessing
            ends[done : done + run] = position + np.arange(1, run + 1, dtype=np.int64) * stride
            position += run * stride
            done += run
            if not gallop:
                break
        if done < count:
            ends[done:] = _walk(pool, position, count - done, end)
            position = int(ends[-1])
    except IndexError:
        raise RecordDecodeError("record batch ends inside a record") from None
    if position != end:
        raise RecordDecodeError(f"records of a batch end at {position}, not at {end}")
    return ends


def _walk(pool: Pool, position: int, count: int, end: int) -> list[int]:
    """End positions of ``count`` records from ``position``, one record at a time."""
    ends: list[int] = []
    append = ends.append
    for _ in range(count):
        b = pool[position]
        if b < 0x80:
            position += 1 + ((b >> 1) ^ -(b & 1))
        else:
            raw = b & 0x7F
            shift = 7
            position += 1
            while True:
                b = pool[position]
                position += 1
                raw |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise RecordDecodeError("record length varint is too long")
            position += (raw >> 1) ^ -(raw & 1)
        if position > end:
            raise RecordDecodeError("a record overruns its batch")
        append(position)
    return ends


def _take(pool_np: npt.NDArray[np.uint8], positions: Int64s) -> npt.NDArray[np.uint8]:
    # Clipped, so reading a little past the last record needs no padding; what is read there
    # is never used (it is masked, or caught by the length checks).
    return np.take(pool_np, positions, mode="clip")


def _varints(pool_np: npt.NDArray[np.uint8], positions: Int64s) -> tuple[Int64s, Int64s | int]:
    """The zigzag varints at ``positions``: their values and their sizes in bytes (one size
    for all when every varint is one byte, as null keys, equal timestamps and no headers give)."""
    b = _take(pool_np, positions)
    if len(b) == 0 or int(b.max()) < 0x80:
        small = b.astype(np.int64)
        return (small >> 1) ^ -(small & 1), 1
    raw = (b & 0x7F).astype(np.uint64)
    more = b >= 0x80
    size = more.astype(np.int64) + 1
    k = 1
    while more.any():
        if k > 9:
            raise RecordDecodeError("varint longer than 10 bytes")
        b = _take(pool_np, positions + k) * more  # 0 where the varint already ended
        raw |= (b & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        more = b >= 0x80
        size += more
        k += 1
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, size


def _plus(positions: Int64s, sizes: Int64s | int) -> Int64s:
    result: Int64s = np.add(positions, sizes, dtype=np.int64)
    return result


def _binary_column(
    pool_np: npt.NDArray[np.uint8], pool_buffer: pa.Buffer, starts: Int64s, lengths: Int64s
) -> pa.Array:
    """A ``binary`` array of the byte ranges ``starts``/``lengths`` (-1: null) of the pool.

    Built as a ``binary_view`` array — 16 bytes per value: the length, then either the value
    itself when it fits in 12 bytes, or its first 4 bytes, a buffer index and an offset — over
    the pool, then cast (a plain copy of each value in Arrow's C++).
    """
    n = len(starts)
    valid = lengths >= 0
    if not valid.any():
        return pa.nulls(n, pa.binary())
    length32 = np.where(valid, lengths, 0).astype(np.int32)
    views = np.empty((n, 4), dtype=np.int32)
    views[:, 0] = length32
    if np.all(length32 > 12):
        views[:, 1] = _take(pool_np, starts[:, None] + _AR4).view(np.int32)[:, 0]
        views[:, 2] = 0
        views[:, 3] = starts
    else:
        inline = _take(pool_np, starts[:, None] + _AR12)
        inline *= np.minimum(length32, 12)[:, None] > _AR12  # zero what is not the value's
        words = inline.view(np.int32)  # (n, 3): prefix or inline data, then index and offset
        long = length32 > 12
        if long.any():
            words[:, 1] = np.where(long, 0, words[:, 1])
            words[:, 2] = np.where(long, starts.astype(np.int32), words[:, 2])
        views[:, 1:] = words
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), pool_buffer])
    # Unchecked: the views were built from validated positions, and checking costs 20x the copy.
    return pc.cast(array, pa.binary(), safe=False)


def _constant_string(value: str, n: int) -> pa.Array:
    data = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
    )


def _headers_column(pool: Pool, positions: Int64s, counts: Int64s, record_ends: Int64s) -> pa.Array:
    n = len(positions)
    if not counts.any():
        return pa.nulls(n, HEADERS_TYPE)
    rows: list[list[tuple[str, bytes | None]] | None] = []
    for position, count, end in zip(
        positions.tolist(), counts.tolist(), record_ends.tolist(), strict=True
    ):
        if count == 0:
            rows.append(None)
            continue
        if count < 0:
            raise RecordDecodeError(f"header count {count} is negative")
        items = []
        for _ in range(count):
            key, position = _read_bytes(pool, position)
            if key is None:
                raise RecordDecodeError("header key is null")
            value, position = _read_bytes(pool, position)
            try:
                items.append((key.decode(), value))
            except UnicodeDecodeError as e:
                raise RecordDecodeError(f"header key is not UTF-8: {e}") from None
        if position != end:
            raise RecordDecodeError("record length disagrees with its headers")
        rows.append(items)
    return pa.array(
        [None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows],
        type=HEADERS_TYPE,
    )


def _read_bytes(pool: Pool, position: int) -> tuple[bytes | None, int]:
    raw = 0
    shift = 0
    while True:
        b = pool[position]
        position += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint longer than 10 bytes")
    length = (raw >> 1) ^ -(raw & 1)
    if length < 0:
        if length == -1:
            return None, position
        raise RecordDecodeError(f"length {length} is negative")
    return bytes(pool[position : position + length]), position + length


def records_to_arrow(
    records: bytes | memoryview,
    topic: str,
    partition: int,
    start: int = 0,
    end: int = 2**63 - 1,
    *,
    include_headers: bool = False,
    verify_crc: bool = True,
    skip: Collection[int] = (),
) -> pa.RecordBatch:
    """The records with offsets in ``start``..``end - 1`` of the whole batches in ``records``
    (a cut-off batch at the end is ignored; control batches are skipped, and so are the batches
    at the positions in ``skip``: aborted transactions, for a read_committed reader) as one
    Arrow batch in :func:`kafka_schema` order. Raises :class:`RecordDecodeError` for malformed
    bytes.
    """
    schema = kafka_schema(include_headers)
    batches = _collect(records, start, end, verify_crc, skip)
    if not batches.starts:
        return _empty(schema)
    pool = batches.pool
    pool_np = np.frombuffer(pool, dtype=np.uint8)

    # 2. record boundaries
    record_ends = np.concatenate(
        [
            _record_ends(pool_np, pool, position, count, stop)
            for position, stop, count in zip(
                batches.starts, batches.ends, batches.counts.tolist(), strict=True
            )
        ]
    )
    heads = np.empty_like(record_ends)
    heads[1:] = record_ends[:-1]
    firsts = np.cumsum(batches.counts) - batches.counts
    heads[firsts] = batches.starts
    batch_of = np.repeat(np.arange(len(batches.counts)), batches.counts)

    # 3. fields, vectorised
    lengths, size = _varints(pool_np, heads)
    bodies = _plus(heads, size)
    if np.any(lengths < 6) or np.any(bodies + lengths != record_ends):
        raise RecordDecodeError("a record length does not fit its batch")
    position = bodies + 1  # attributes: unused
    timestamp_deltas, size = _varints(pool_np, position)
    position = _plus(position, size)
    offset_deltas, size = _varints(pool_np, position)
    position = _plus(position, size)
    key_lengths, size = _varints(pool_np, position)
    key_starts = _plus(position, size)
    position = key_starts + np.maximum(key_lengths, 0)
    value_lengths, size = _varints(pool_np, position)
    value_starts = _plus(position, size)
    position = value_starts + np.maximum(value_lengths, 0)
    if np.any(key_lengths < -1) or np.any(value_lengths < -1) or np.any(position >= record_ends):
        raise RecordDecodeError("a record's key or value overruns the record")
    header_counts, size = _varints(pool_np, position)
    header_starts = _plus(position, size)
    if not include_headers and np.any((header_counts == 0) & (header_starts != record_ends)):
        raise RecordDecodeError("a record's fields disagree with its length")

    offsets = batches.base_offsets[batch_of] + offset_deltas
    log_append = batches.log_append_time[batch_of]
    timestamps = np.where(
        log_append,
        batches.max_timestamps[batch_of],
        batches.base_timestamps[batch_of] + timestamp_deltas,
    )
    wanted = (offsets >= start) & (offsets < end)
    if not wanted.all():
        offsets = offsets[wanted]
        log_append = log_append[wanted]
        timestamps = timestamps[wanted]
        key_starts = key_starts[wanted]
        key_lengths = key_lengths[wanted]
        value_starts = value_starts[wanted]
        value_lengths = value_lengths[wanted]
        header_starts = header_starts[wanted]
        header_counts = header_counts[wanted]
        record_ends = record_ends[wanted]
    n = len(offsets)

    # 4. columns
    pool_buffer = pa.py_buffer(pool)
    columns = [
        _binary_column(pool_np, pool_buffer, key_starts, key_lengths),
        _binary_column(pool_np, pool_buffer, value_starts, value_lengths),
        _constant_string(topic, n),
        pa.Array.from_buffers(
            pa.int32(), n, [None, pa.py_buffer(np.full(n, partition, dtype=np.int32))]
        ),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(offsets)]),
        pa.Array.from_buffers(TIMESTAMP_TYPE, n, [None, pa.py_buffer(timestamps * 1000)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(log_append.astype(np.int32))]),
    ]
    if include_headers:
        columns.append(_headers_column(pool, header_starts, header_counts, record_ends))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)
