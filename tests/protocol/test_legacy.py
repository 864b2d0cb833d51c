"""Message sets v0/v1: conversion to RecordBatch v2 and down from it.

Message sets are built and read with kafka-python's legacy record code, an implementation
written independently of odradek's, as old clients use it.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode
from odradek.protocol.legacy import (
    LegacyFormatError,
    down_convert,
    magic_of,
    to_record_batch,
    xxh32,
)
from odradek.protocol.record_batch import read_header
from odradek.protocol.records import Header, NewRecord, decode_batch, encode_batch

KAFKA_PYTHON_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


def message_set(
    magic: int, codec: str, items: list[tuple[int, bytes | None, bytes | None]]
) -> bytes:
    """(timestamp, key, value) items as kafka-python's producer writes a message set."""
    builder = LegacyRecordBatchBuilder(magic, KAFKA_PYTHON_CODECS[codec], 1 << 20)
    for offset, (timestamp, key, value) in enumerate(items):
        builder.append(offset, timestamp if magic else None, key, value)
    return bytes(builder.build())


def read_message_set(data: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None, int]]:
    """(offset, timestamp, key, value, magic) of each message, as kafka-python's consumer reads."""
    out = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, batch.magic))
    return out


ITEMS = [(1_700_000_000_000 + i, f"k{i}".encode(), b"value-%d" % i * 5) for i in range(20)] + [
    (1_700_000_000_100, None, b"keyless"),
    (1_700_000_000_101, b"tombstone", None),
]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("magic", [0, 1])
def test_message_set_becomes_one_batch_in_the_producers_codec(magic, codec):
    converted = to_record_batch(message_set(magic, codec, ITEMS))

    header = read_header(converted)
    assert header.magic == 2
    assert header.compression == KAFKA_PYTHON_CODECS[codec]
    assert header.record_count == len(ITEMS)
    assert header.producer_id == -1
    records = decode_batch(converted)
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, key, value) for i, (_, key, value) in enumerate(ITEMS)
    ]
    # v0 messages have no timestamp: -1, as Kafka converts them.
    expected = [ts if magic else -1 for ts, _, _ in ITEMS]
    assert [r.timestamp for r in records] == expected
    assert header.max_timestamp == max(expected)


def test_wrong_crc_is_corrupt_message():
    data = bytearray(message_set(0, "none", ITEMS[:3]))
    data[-1] ^= 0xFF  # last byte of the last value
    with pytest.raises(LegacyFormatError) as e:
        to_record_batch(data)
    assert e.value.code == ErrorCode.corrupt_message


def test_wrong_crc_inside_a_compressed_wrapper_is_corrupt_message():
    inner = bytearray(message_set(1, "none", ITEMS[:3]))
    inner[-1] ^= 0xFF
    data = wrapper(1, compression.GZIP, compression.compress(compression.GZIP, inner))
    with pytest.raises(LegacyFormatError) as e:
        to_record_batch(data)
    assert e.value.code == ErrorCode.corrupt_message


def wrapper(magic: int, codec: int, value: bytes, offset: int = 0) -> bytes:
    """One message with a null key and ``value``, attributes = ``codec``."""
    body = struct.pack(">bb", magic, codec)
    if magic:
        body += struct.pack(">q", 1_700_000_000_000)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def test_zstd_in_an_old_message_is_unsupported_compression_type():
    inner = message_set(1, "none", ITEMS[:2])
    data = wrapper(1, compression.ZSTD, compression.compress(compression.ZSTD, inner))
    with pytest.raises(LegacyFormatError) as e:
        to_record_batch(data)
    assert e.value.code == ErrorCode.unsupported_compression_type


def test_nested_compression_is_invalid_record():
    inner = message_set(1, "gzip", ITEMS[:2])
    data = wrapper(1, compression.GZIP, compression.compress(compression.GZIP, inner))
    with pytest.raises(LegacyFormatError) as e:
        to_record_batch(data)
    assert e.value.code == ErrorCode.invalid_record


@pytest.mark.parametrize("cut", [5, 17, 30])
def test_truncated_message_set_is_corrupt_message(cut):
    data = message_set(1, "none", ITEMS[:2])
    with pytest.raises(LegacyFormatError) as e:
        to_record_batch(data[: len(data) - cut])
    assert e.value.code == ErrorCode.corrupt_message


def test_xxh32_known_values():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    # over 16 bytes (the four-lane loop): checked against the lz4 package's frame checksum
    lz4 = pytest.importorskip("lz4.frame")
    frame = lz4.compress(b"x" * 1000, content_checksum=True, store_size=False)
    (content_checksum,) = struct.unpack("<I", frame[-4:])
    assert xxh32(b"x" * 1000) == content_checksum


def lz4_v0_frame(data: bytes) -> bytes:
    """An LZ4 frame with the header checksum Kafka 0.8-0.9 wrote: hashed from the frame magic."""
    compressor = cramjam.lz4.Compressor(block_linked=False)
    compressor.compress(data)
    frame = bytearray(compressor.finish())
    assert frame[4] & 0x09 == 0  # no content size nor dictionary id: HC at byte 6
    frame[6] = (xxh32(bytes(frame[:6])) >> 8) & 0xFF
    return bytes(frame)


def test_lz4_v0_with_kafkas_broken_header_checksum_is_read():
    inner = message_set(0, "none", ITEMS[:4])
    data = wrapper(0, compression.LZ4, lz4_v0_frame(inner))
    records = decode_batch(to_record_batch(data))
    assert [r.value for r in records] == [v for _, _, v in ITEMS[:4]]


def test_down_converted_lz4_v0_has_kafkas_broken_header_checksum():
    batch = encode_batch([(b"k", b"v" * 100, (), 5)] * 3, compression=compression.LZ4, now_ms=0)
    out = down_convert(batch, 0, 0)
    (_, size, _, magic, attributes) = struct.unpack_from(">qiIbb", out)
    assert (magic, attributes) == (0, compression.LZ4)
    assert size == len(out) - 12  # one wrapper message
    frame = out[12 + 4 + 2 + 4 + 4 :]  # crc, magic, attributes, null key, value length
    assert frame[6] == (xxh32(frame[:6]) >> 8) & 0xFF
    fixed = bytearray(frame)
    fixed[6] = (xxh32(frame[4:6]) >> 8) & 0xFF
    inner = bytes(cramjam.lz4.decompress(bytes(fixed)))
    assert [m[3] for m in read_message_set(inner)] == [b"v" * 100] * 3


def stored_batches() -> bytes:
    """What a log holds: an uncompressed batch at 0-2, a gzip one at 3-5, a control batch at 6,
    a LogAppendTime batch at 7-8."""
    plain = encode_batch(
        [
            NewRecord(b"a", b"0", (Header("h", b"x"),), 1000),
            (None, b"1", (), 1001),
            (b"c", None, (), 1002),
        ],
        now_ms=0,
    )
    gzip = encode_batch(
        [(b"d", b"3", (), 2000), (b"e", b"4", (), 2003), (b"f", b"5", (), 2001)],
        compression=compression.GZIP,
        base_offset=3,
        now_ms=0,
    )
    control = encode_batch(
        [(b"\0\0\0\0", b"\0\0\0\0\0\0", (), 3000)], base_offset=6, control=True, now_ms=0
    )
    log_append = encode_batch(
        [(b"g", b"7", (), 10), (b"h", b"8", (), 11)],
        base_offset=7,
        timestamp_type_log_append=True,
        now_ms=5000,
    )
    return plain + gzip + control + log_append


@pytest.mark.parametrize("magic", [0, 1])
def test_down_convert_reads_back_as_old_clients_read(magic):
    got = read_message_set(down_convert(stored_batches(), magic, 0))
    assert [(o, k, v) for o, _, k, v, _ in got] == [
        (0, b"a", b"0"),
        (1, None, b"1"),
        (2, b"c", None),
        (3, b"d", b"3"),
        (4, b"e", b"4"),
        (5, b"f", b"5"),
        (7, b"g", b"7"),
        (8, b"h", b"8"),
    ]
    assert {m for *_, m in got} == {magic}
    timestamps = [t for _, t, *_ in got]
    if magic == 1:
        assert timestamps == [1000, 1001, 1002, 2000, 2003, 2001, 5000, 5000]
    else:
        assert timestamps == [None] * 8


def test_down_convert_starts_at_the_fetch_offset_and_stops_after_the_size_hint():
    data = stored_batches()
    # a compressed batch comes whole, as Kafka's downConvert sends it
    got = read_message_set(down_convert(data, 1, 4))
    assert [o for o, *_ in got] == [3, 4, 5, 7, 8]
    got = read_message_set(down_convert(data, 1, 1))
    assert [o for o, *_ in got] == [1, 2, 3, 4, 5, 7, 8]
    first_only = read_message_set(down_convert(data, 1, 0, size_hint=1))
    assert [o for o, *_ in first_only] == [0, 1, 2]


def test_down_convert_leaves_out_a_cut_short_last_batch():
    data = stored_batches()
    got = read_message_set(down_convert(data[:-10], 1, 0))
    assert [o for o, *_ in got] == [0, 1, 2, 3, 4, 5]


def test_down_convert_refuses_zstd():
    batch = encode_batch([(b"k", b"v", (), 1)], compression=compression.ZSTD, now_ms=0)
    with pytest.raises(LegacyFormatError) as e:
        down_convert(batch, 1, 0)
    assert e.value.code == ErrorCode.unsupported_compression_type


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_old_format_round_trip_through_the_log_format(codec):
    """v1 in, v2 stored, v1 out: the records come back as they went in."""
    original = message_set(1, codec, ITEMS)
    stored = to_record_batch(original)
    back = read_message_set(down_convert(stored, 1, 0))
    assert [(o, t, k, v) for o, t, k, v, _ in back] == [
        (i, ts, key, value) for i, (ts, key, value) in enumerate(ITEMS)
    ]


def test_magic_of():
    assert magic_of(message_set(0, "none", ITEMS[:1])) == 0
    assert magic_of(message_set(1, "none", ITEMS[:1])) == 1
    assert magic_of(encode_batch([(None, b"v", (), 1)], now_ms=0)) == 2
    assert magic_of(b"short") == -1
