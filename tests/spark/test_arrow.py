"""Record batches to Arrow: the vectorised decoder against the record-by-record one.

No Spark here: :func:`records_to_arrow` must give exactly what :func:`decode_batch` gives, for
any records, codecs, batch sizes and offset windows, in Spark's exact Arrow schema.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import compression as codecs
from odradek.protocol.record_batch import set_base_offset
from odradek.protocol.records import (
    Header,
    NewRecord,
    Record,
    RecordDecodeError,
    encode_batch,
    iter_records,
)
from odradek.spark.arrow import KAFKA_SCHEMA, KAFKA_SCHEMA_WITH_HEADERS, records_to_arrow

NOW = 1_700_000_000_000

small_bytes = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(
    st.builds(Header, st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))),
    max_size=3,
).map(tuple)
records = st.builds(
    NewRecord,
    small_bytes,
    st.one_of(small_bytes, st.binary(min_size=100, max_size=300)),
    headers,
    st.integers(NOW - 10**6, NOW + 10**6),
)


def fetch_of(batches: list[list[NewRecord]], codec: int, start: int = 0) -> bytes:
    """Batches as a broker stores them: consecutive base offsets from ``start``."""
    out = bytearray()
    offset = start
    for items in batches:
        raw = bytearray(encode_batch(items, compression=codec, now_ms=NOW))
        set_base_offset(raw, 0, offset)
        offset += len(items)
        out += raw
    return bytes(out)


def expected_rows(data: bytes, start: int, end: int) -> list[Record]:
    return [r for _, rs in iter_records(data) for r in rs if start <= r.offset < end]


def as_rows(batch: pa.RecordBatch) -> list[dict[str, object]]:
    return batch.to_pylist()


def assert_same(batch: pa.RecordBatch, expected: list[Record], topic: str, partition: int) -> None:
    assert batch.num_rows == len(expected)
    columns = batch.to_pydict()
    assert columns["key"] == [r.key for r in expected]
    assert columns["value"] == [r.value for r in expected]
    assert columns["offset"] == [r.offset for r in expected]
    assert columns["topic"] == [topic] * len(expected)
    assert columns["partition"] == [partition] * len(expected)
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [r.timestamp * 1000 for r in expected]
    assert columns["timestampType"] == [0] * len(expected)
    if "headers" in columns:
        assert columns["headers"] == [
            [{"key": h.key, "value": h.value} for h in r.headers] if r.headers else None
            for r in expected
        ]


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(st.lists(records, min_size=1, max_size=30), min_size=1, max_size=4),
    codec=st.sampled_from([codecs.NONE, codecs.GZIP, codecs.ZSTD, codecs.LZ4, codecs.SNAPPY]),
    window=st.tuples(st.integers(0, 130), st.integers(0, 130)),
    include_headers=st.booleans(),
)
def test_matches_the_record_by_record_decoder(
    batches: list[list[NewRecord]],
    codec: int,
    window: tuple[int, int],
    include_headers: bool,
) -> None:
    data = fetch_of(batches, codec, start=5)
    start, end = min(window), max(window)
    batch = records_to_arrow(data, "t", 7, start, end, include_headers=include_headers)
    assert batch.schema == (KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA)
    assert_same(batch, expected_rows(data, start, end), "t", 7)


@pytest.mark.parametrize("count", [1, 7, 63, 64, 65, 500, 9000])
def test_many_records_of_one_size_and_of_varied_sizes(count: int) -> None:
    same = [NewRecord(None, bytes([i % 251]) * 100, (), NOW + i) for i in range(count)]
    varied = [NewRecord(b"k" * (i % 5), b"v" * (i % 97), (), NOW - i) for i in range(count)]
    for items in (same, varied):
        data = fetch_of([items, items[: count // 2 + 1]], codecs.NONE)
        assert_same(records_to_arrow(data, "x", 0), expected_rows(data, 0, 2**62), "x", 0)


def test_spark_derives_the_same_arrow_schema() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import to_arrow_schema

    from odradek.spark.source import SCHEMA, SCHEMA_WITH_HEADERS

    assert to_arrow_schema(SCHEMA, timezone="UTC") == KAFKA_SCHEMA
    assert to_arrow_schema(SCHEMA_WITH_HEADERS, timezone="UTC") == KAFKA_SCHEMA_WITH_HEADERS


def test_a_cut_off_batch_at_the_end_is_ignored() -> None:
    items = [NewRecord(None, b"v%d" % i, (), NOW) for i in range(10)]
    data = fetch_of([items, items], codecs.NONE)
    batch = records_to_arrow(data[:-5], "t", 0)
    assert batch.column("offset").to_pylist() == list(range(10))


def test_control_batches_are_skipped_and_log_append_time_applies() -> None:
    marker = bytearray(encode_batch([NewRecord(b"\0\0\0\0", b"", ())], control=True, now_ms=NOW))
    set_base_offset(marker, 0, 0)
    data = bytearray(
        encode_batch(
            [NewRecord(None, b"a", (), NOW - 5)], timestamp_type_log_append=True, now_ms=NOW + 9
        )
    )
    set_base_offset(data, 0, 1)
    batch = records_to_arrow(bytes(marker + data), "t", 0)
    assert batch.column("offset").to_pylist() == [1]
    assert batch.column("timestampType").to_pylist() == [1]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [(NOW + 9) * 1000]


def test_nothing_in_range_gives_an_empty_batch_of_the_schema() -> None:
    data = fetch_of([[NewRecord(None, b"v", (), NOW)] * 3], codecs.NONE)
    batch = records_to_arrow(data, "t", 0, 10, 20, include_headers=True)
    assert batch.num_rows == 0
    assert batch.schema == KAFKA_SCHEMA_WITH_HEADERS
    assert records_to_arrow(b"", "t", 0).num_rows == 0


def test_corruption_is_reported_not_decoded() -> None:
    data = bytearray(fetch_of([[NewRecord(None, b"value", (), NOW)] * 3], codecs.NONE))
    data[-3] ^= 0xFF
    with pytest.raises(RecordDecodeError, match="CRC"):
        records_to_arrow(bytes(data), "t", 0)


def test_a_record_length_that_overruns_its_batch_is_refused() -> None:
    raw = bytearray(encode_batch([NewRecord(None, b"v" * 10, (), NOW)] * 2, now_ms=NOW))
    raw[61] = 0x7E  # first record claims 63 bytes
    import crc32c

    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(RecordDecodeError):
        records_to_arrow(bytes(raw), "t", 0)


def test_batches_at_skipped_positions_give_no_rows() -> None:
    first = bytearray(encode_batch([NewRecord(None, b"aborted", (), NOW)] * 2, now_ms=NOW))
    second = bytearray(encode_batch([NewRecord(None, b"kept", (), NOW)], now_ms=NOW))
    set_base_offset(second, 0, 2)
    batch = records_to_arrow(bytes(first + second), "t", 0, skip={0})
    assert batch.column("value").to_pylist() == [b"kept"]
    assert batch.column("offset").to_pylist() == [2]
