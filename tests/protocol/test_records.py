from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import cramjam
import crc32c
import kafka.codec  # type: ignore[import-untyped]
import kafka.record.default_records as kafka_default_records  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords  # type: ignore[import-untyped]
from kafka.record.memory_records import MemoryRecordsBuilder  # type: ignore[import-untyped]

from odradek.protocol import compression as c
from odradek.protocol.record_batch import (
    CONTROL_BIT,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    read_header,
    set_base_offset,
    set_log_append_time,
    validate_batches,
)
from odradek.protocol.records import (
    Header,
    InvalidRecords,
    NewRecord,
    Record,
    RecordDecodeError,
    RecordsScan,
    check_records,
    decode_batch,
    encode_batch,
    iter_records,
)

CODECS = [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
NOW = 1_700_000_000_000


# -- kafka-python as an independent implementation ----------------------------------------------


class _RawSnappy:
    """Stands in for python-snappy so kafka-python's own xerial framing code runs."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Give kafka-python every codec.

    kafka-python uses python-snappy, lz4 and zstandard when installed; where they are not, plug in
    cramjam's plain codecs (block-linked LZ4 frames with checksums, default zstd), which are
    configured unlike odradek's and so still exercise our decoder on foreign output. Snappy keeps
    kafka-python's own xerial framing.
    """
    if not kafka.codec.has_snappy():
        monkeypatch.setattr(kafka.codec, "snappy", _RawSnappy)
    if not kafka.codec.has_lz4():
        monkeypatch.setattr(kafka.codec, "has_lz4", lambda: True)
        monkeypatch.setattr(
            kafka_default_records, "lz4_encode", lambda d: bytes(cramjam.lz4.compress(d))
        )
        monkeypatch.setattr(
            kafka_default_records, "lz4_decode", lambda d: bytes(cramjam.lz4.decompress(d))
        )
    if not kafka.codec.has_zstd():
        monkeypatch.setattr(kafka.codec, "has_zstd", lambda: True)
        monkeypatch.setattr(
            kafka_default_records, "zstd_encode", lambda d: bytes(cramjam.zstd.compress(d))
        )
        monkeypatch.setattr(
            kafka_default_records, "zstd_decode", lambda d: bytes(cramjam.zstd.decompress(d))
        )
    yield


def kafka_python_batch(
    records: Sequence[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: int,
    **producer: Any,
) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 24, **producer)
    for timestamp, key, value, headers in records:
        assert builder.append(timestamp, key, value, headers) is not None
    builder.close()
    return bytes(builder.buffer())


def kafka_python_read(buf: bytes) -> list[tuple[int, int, Any, Any, list[Any]]]:
    records = MemoryRecords(buf)
    out: list[tuple[int, int, Any, Any, list[Any]]] = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch)
    return out


# -- strategies ---------------------------------------------------------------------------------

maybe_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.builds(Header, st.text(max_size=20), maybe_bytes), max_size=4).map(tuple)
new_records = st.lists(
    st.builds(
        NewRecord,
        key=maybe_bytes,
        value=maybe_bytes,
        headers=headers,
        timestamp=st.none() | st.integers(0, 2**45),
    ),
    min_size=1,
    max_size=20,
)


def expected(items: Sequence[NewRecord], base_offset: int, now_ms: int) -> list[Record]:
    return [
        Record(
            base_offset + i,
            now_ms if r.timestamp is None else r.timestamp,
            r.key,
            r.value,
            tuple(r.headers),
        )
        for i, r in enumerate(items)
    ]


# -- round trips --------------------------------------------------------------------------------


@settings(max_examples=200)
@given(
    items=new_records,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    now_ms=st.integers(0, 2**45),
)
def test_round_trip(items: list[NewRecord], codec: int, base_offset: int, now_ms: int) -> None:
    batch = encode_batch(items, compression=codec, base_offset=base_offset, now_ms=now_ms)
    assert decode_batch(batch) == expected(items, base_offset, now_ms)
    assert validate_batches(batch, 1 << 30)[0].compression == codec


@given(
    items=st.lists(
        st.tuples(maybe_bytes, maybe_bytes, headers, st.none() | st.integers(-(2**40), 2**40)),
        min_size=1,
        max_size=5,
    )
)
def test_tuples_are_accepted(
    items: list[tuple[bytes | None, bytes | None, tuple[Header, ...], int | None]],
) -> None:
    batch = encode_batch(items, now_ms=NOW)
    assert decode_batch(batch) == expected([NewRecord(*i) for i in items], 0, NOW)


def test_header_fields() -> None:
    items = [NewRecord(b"k", b"v", (), NOW + 5), NewRecord(None, None, (), NOW - 3)]
    batch = encode_batch(
        items,
        compression=c.ZSTD,
        base_offset=100,
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
        partition_leader_epoch=3,
        transactional=True,
        now_ms=NOW,
    )
    h = read_header(batch)
    assert h.size == len(batch)
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (100, 3, 2)
    assert (h.last_offset_delta, h.record_count) == (1, 2)
    assert (h.base_timestamp, h.max_timestamp) == (NOW + 5, NOW + 5)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 40)
    assert h.compression == c.ZSTD and h.is_transactional
    assert not h.is_control and not h.is_log_append_time
    assert h.crc == crc32c.crc32c(batch[21:])
    assert [r.timestamp for r in decode_batch(batch)] == [NOW + 5, NOW - 3]


def test_defaults() -> None:
    batch = encode_batch([(b"k", b"v", [], None)], now_ms=NOW)
    h = read_header(batch)
    assert (h.base_offset, h.partition_leader_epoch, h.attributes) == (0, -1, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert (h.base_timestamp, h.max_timestamp) == (NOW, NOW)


def test_control_flag() -> None:
    batch = encode_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", (), None)],
        transactional=True,
        control=True,
        now_ms=NOW,
    )
    h = read_header(batch)
    assert h.attributes == TRANSACTIONAL_BIT | CONTROL_BIT
    assert decode_batch(batch)[0].key == b"\x00\x00\x00\x01"


def test_log_append_time_batch_gives_every_record_max_timestamp() -> None:
    items = [NewRecord(b"a", b"1", (), 10), NewRecord(b"b", b"2", (), 20)]
    batch = encode_batch(items, timestamp_type_log_append=True, now_ms=NOW)
    h = read_header(batch)
    assert h.attributes & TIMESTAMP_TYPE_BIT and h.max_timestamp == NOW
    assert [r.timestamp for r in decode_batch(batch)] == [NOW, NOW]


def test_log_append_time_set_by_broker() -> None:
    batch = bytearray(encode_batch([NewRecord(b"a", b"1", (), 10)] * 3, now_ms=NOW))
    set_log_append_time(batch, read_header(batch), NOW + 99)
    set_base_offset(batch, 0, 500)
    assert [(r.offset, r.timestamp) for r in decode_batch(batch)] == [
        (500, NOW + 99),
        (501, NOW + 99),
        (502, NOW + 99),
    ]


def test_varint_edges() -> None:
    big = b"x" * 70_000  # a 3-byte length varint
    extremes = [-(2**63), 2**63 - 1]
    for ts in [*extremes, -1, 0, 63, 64, -64, -65, 2**31]:
        items = [NewRecord(None, b"v", (), 0), NewRecord(big, None, (Header("h", big),), ts)]
        if ts in extremes:
            continue  # the delta from 0 must itself fit a varlong; checked below
        assert decode_batch(encode_batch(items, now_ms=0))[1].timestamp == ts
    items = [NewRecord(None, None, (), 2**63 - 1), NewRecord(None, None, (), 0)]
    assert [r.timestamp for r in decode_batch(encode_batch(items, now_ms=0))] == [2**63 - 1, 0]


def test_record_bytes_are_kafkas() -> None:
    """One record laid out by hand, field by field, as Kafka's DefaultRecord."""
    batch = encode_batch(
        [NewRecord(b"ab", None, (Header("h", b"z"),), NOW + 2), NewRecord(None, b"", (), NOW)],
        now_ms=NOW,
    )
    body = batch[61:]
    first = bytes([0, 0, 0, 4]) + b"ab" + bytes([1, 2, 2]) + b"h" + bytes([2]) + b"z"
    second = bytes([0, 3, 2, 1, 0, 0])  # ts delta -2, offset delta 1, null key, empty value
    assert body == bytes([2 * len(first)]) + first + bytes([2 * len(second)]) + second


def test_encode_rejects_empty_and_unknown_codec() -> None:
    with pytest.raises(ValueError):
        encode_batch([], now_ms=NOW)
    with pytest.raises(ValueError):
        encode_batch([(None, None, (), None)], compression=5, now_ms=NOW)


# -- against kafka-python -----------------------------------------------------------------------

KP_RECORDS: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (NOW, b"key-0", b"value " * 200, []),
    (NOW + 7, None, b"no key " * 100, [("trace", b"abc"), ("empty", None)]),
    (NOW - 3, b"tombstone", None, [("h\u00e9", b"\x00\xff")]),
    *[(NOW + i, f"k{i}".encode(), bytes(range(256)) * 2, []) for i in range(300)],
]


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", CODECS)
def test_decode_kafka_python_batch(codec: int) -> None:
    batch = kafka_python_batch(KP_RECORDS, codec, producer_id=12, producer_epoch=1, base_sequence=5)
    assert read_header(batch).compression == codec  # kafka-python kept it compressed
    assert kafka_python_read(batch)  # and can read it back itself
    records = decode_batch(batch)
    assert records == [
        Record(i, ts, k, v, tuple(Header(hk, hv) for hk, hv in hs))
        for i, (ts, k, v, hs) in enumerate(KP_RECORDS)
    ]
    h = validate_batches(batch, 1 << 30)[0]
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (12, 1, 5)


@pytest.mark.usefixtures("kafka_python_codecs")
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batch(codec: int) -> None:
    items = [NewRecord(k, v, tuple(Header(*h) for h in hs), ts) for ts, k, v, hs in KP_RECORDS]
    batch = encode_batch(items, compression=codec, base_offset=1000, now_ms=NOW)
    got = kafka_python_read(batch)
    assert got == [(1000 + i, ts, k, v, hs) for i, (ts, k, v, hs) in enumerate(KP_RECORDS)]


def test_kafka_python_reads_xerial_snappy_framing_we_decode(
    kafka_python_codecs: None,
) -> None:
    batch = kafka_python_batch(KP_RECORDS, c.SNAPPY)
    assert batch[61:69] == b"\x82SNAPPY\x00"  # kafka-python writes xerial framing
    assert len(decode_batch(batch)) == len(KP_RECORDS)


def test_uncompressed_bytes_identical_to_kafka_python() -> None:
    batch = kafka_python_batch(KP_RECORDS[:20], c.NONE)
    items = [NewRecord(k, v, tuple(Header(*h) for h in hs), ts) for ts, k, v, hs in KP_RECORDS[:20]]
    assert encode_batch(items, partition_leader_epoch=0, now_ms=0) == batch


@pytest.mark.usefixtures("kafka_python_codecs")
@given(items=new_records, codec=st.sampled_from(CODECS))
@settings(max_examples=50)
def test_kafka_python_reads_generated(items: list[NewRecord], codec: int) -> None:
    batch = encode_batch(items, compression=codec, now_ms=NOW)
    assert kafka_python_read(batch) == [
        (r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
        for r in expected(items, 0, NOW)
    ]


# -- several batches ----------------------------------------------------------------------------


def test_iter_records_skips_trailing_partial_batch() -> None:
    a = encode_batch([(b"a", b"1", (), None)], base_offset=0, now_ms=NOW)
    b = encode_batch([(b"b", b"2", (), None)] * 2, base_offset=1, compression=c.LZ4, now_ms=NOW)
    d = encode_batch([(b"d", b"4", (), None)], base_offset=3, now_ms=NOW)
    for cut in (0, 1, 12, 60, 61, len(d) - 1):
        got = list(iter_records(a + b + d[:cut]))
        assert [h.base_offset for h, _ in got] == [0, 1]
        assert [r.offset for _, rs in got for r in rs] == [0, 1, 2]
        assert got[1][0].position == len(a)
    assert [r.key for _, rs in iter_records(memoryview(a + b + d)) for r in rs] == [
        b"a",
        b"b",
        b"b",
        b"d",
    ]
    assert list(iter_records(b"")) == []


def test_iter_records_raises_on_corrupt_batch() -> None:
    a = encode_batch([(b"a", b"1", (), None)], now_ms=NOW)
    bad = bytearray(a)
    bad[-1] ^= 0xFF
    with pytest.raises(RecordDecodeError, match="CRC"):
        list(iter_records(a + bad))


# -- malformed input ----------------------------------------------------------------------------


def _reseal(batch: bytearray) -> bytes:
    """Fix the length and CRC after editing ``batch``, so only the edit is wrong."""
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


GOOD = encode_batch([(b"key", b"value", (Header("h", b"v"),), None)], now_ms=NOW)


def test_flipped_byte_fails_crc() -> None:
    for i in range(21, len(GOOD)):
        bad = bytearray(GOOD)
        bad[i] ^= 0x01
        with pytest.raises(RecordDecodeError):
            decode_batch(bad)


def test_crc_check_can_be_skipped() -> None:
    bad = bytearray(GOOD)
    bad[-1] ^= 0x01  # last byte of the header value
    assert decode_batch(bad, verify_crc=False)[0].headers == (Header("h", b"w"),)


@pytest.mark.parametrize("cut", [0, 10, 60, 61, len(GOOD) - 1])
def test_truncated_batch(cut: int) -> None:
    with pytest.raises(RecordDecodeError):
        decode_batch(GOOD[:cut])


def test_trailing_bytes_after_batch() -> None:
    with pytest.raises(RecordDecodeError):
        decode_batch(GOOD + b"\x00")


def test_magic_1() -> None:
    bad = bytearray(GOOD)
    bad[16] = 1
    with pytest.raises(RecordDecodeError, match="magic"):
        decode_batch(bad, verify_crc=False)


def test_record_count_more_than_records() -> None:
    bad = bytearray(GOOD)
    struct.pack_into(">i", bad, 57, 2)
    with pytest.raises(RecordDecodeError):
        decode_batch(_reseal(bad))


def test_bytes_after_last_record() -> None:
    with pytest.raises(RecordDecodeError, match="follow"):
        decode_batch(_reseal(bytearray(GOOD) + b"\x00"))


@pytest.mark.parametrize(
    "record",
    [
        bytes([0, 0, 0, 0, 0]),  # fewer than six bytes
        bytes([0, 0, 0, 20, 1, 0]),  # key of 10 bytes overruns the record
        bytes([0, 0, 0, 5, 1, 0]),  # key length -3
        bytes([0, 0, 0, 1, 1, 1]),  # header count -1
        bytes([0, 0, 0, 1, 1, 2, 1, 1]),  # null header key
        bytes([0, 0, 0, 1, 1, 2, 2, 0xFF, 1]),  # header key not UTF-8
        bytes([0, 0, 0, 1, 1, 0, 0]),  # one byte more than its fields
        bytes([0, *([0xFF] * 10), 0x01, 0, 1, 1, 0]),  # varlong of 11 bytes
        bytes([0, 0, 0, 1, 1, 0x80]),  # ends inside a varint
    ],
)
def test_malformed_record(record: bytes) -> None:
    body = bytearray()
    n = len(record)
    body.append(n << 1)
    body += record
    batch = bytearray(GOOD[:61]) + body
    with pytest.raises(RecordDecodeError):
        decode_batch(_reseal(batch))


def test_undecompressible_body() -> None:
    bad = bytearray(GOOD)
    struct.pack_into(">h", bad, 21, c.GZIP)
    with pytest.raises(RecordDecodeError, match="decompress"):
        decode_batch(_reseal(bad))


def test_errors_are_value_errors() -> None:
    assert issubclass(RecordDecodeError, ValueError)


def test_records_scan_in_parts_learns_and_refuses_what_check_records_does() -> None:
    section = encode_batch([NewRecord(None, b"v", timestamp=i) for i in range(10)], now_ms=0)[61:]
    scan = RecordsScan(section, 0, len(section), 10)
    assert [scan.advance(4) for _ in range(2)] == [None, None]
    assert scan.advance(4) == check_records(section, 0, len(section), 10)
    with pytest.raises(InvalidRecords, match="record count 99 does not fit"):
        RecordsScan(section, 0, len(section), 99)
    short = RecordsScan(section, 0, len(section), 11)
    assert short.advance(10) is None
    with pytest.raises(InvalidRecords, match="end inside a record"):
        short.advance(10)
