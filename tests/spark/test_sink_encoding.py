"""The sink's encoders and partitioner: column-wise equals record-wise equals Kafka's."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2  # type: ignore[import-untyped]

from odradek.protocol import compression as codecs
from odradek.protocol.partitioner import key_partition, murmur2
from odradek.protocol.records import decode_batch
from odradek.spark.sink import encode_arrow_records, encode_records, murmur2_many

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(maybe_bytes, maybe_bytes), min_size=1, max_size=200),
    st.booleans(),
    st.sampled_from([codecs.NONE, codecs.ZSTD, codecs.GZIP]),
)
def test_column_wise_encoding_is_byte_identical(
    rows: list[tuple[bytes | None, bytes | None]], keyed: bool, codec: int
) -> None:
    keys = [k for k, _ in rows] if keyed else [None] * len(rows)
    values = [v for _, v in rows]
    column_wise = encode_arrow_records(
        pa.array(keys, pa.binary()) if keyed else None,
        pa.array(values, pa.binary()),
        timestamp_ms=1_700_000_000_000,
        compression=codec,
    )
    record_wise = encode_records(
        keys, values, None, timestamp_ms=1_700_000_000_000, compression=codec
    )
    assert column_wise == record_wise
    decoded = decode_batch(column_wise)
    assert [(r.key, r.value) for r in decoded] == list(zip(keys, values, strict=True))
    assert [r.offset for r in decoded] == list(range(len(rows)))


def test_slices_encode_like_fresh_arrays() -> None:
    values = pa.array([b"v%d" % i for i in range(100)], pa.binary())
    keys = pa.array([None if i % 2 else b"k%d" % i for i in range(100)], pa.binary())
    sliced = encode_arrow_records(keys.slice(10, 20), values.slice(10, 20), timestamp_ms=5)
    fresh = encode_records(keys.to_pylist()[10:30], values.to_pylist()[10:30], None, timestamp_ms=5)
    assert sliced == fresh


@given(st.lists(st.binary(max_size=40), max_size=100))
def test_murmur2_like_kafkas(keys: list[bytes]) -> None:
    ours = [murmur2(k) for k in keys]
    assert [h & 0xFFFFFFFF for h in ours] == [kafka_python_murmur2(k) & 0xFFFFFFFF for k in keys]
    assert murmur2_many(pa.array(keys, pa.binary())).tolist() == ours


def test_murmur2_gives_the_java_clients_values() -> None:
    # Utils.murmur2 of Kafka's Java client for these keys.
    java = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {k: murmur2(k) for k in java} == java
    assert murmur2_many(pa.array(list(java), pa.binary())).tolist() == list(java.values())
    assert key_partition(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7


def test_transactional_batches_carry_the_producer_and_a_valid_crc() -> None:
    from odradek.protocol.record_batch import read_header, validate_batches
    from odradek.spark.sink import ProducerStamp

    stamp = ProducerStamp(producer_id=4242, producer_epoch=3, base_sequence=17)
    values = pa.array([b"a", b"bb", None], pa.binary())
    column_wise = encode_arrow_records(None, values, timestamp_ms=5, producer=stamp)
    record_wise = encode_records(
        [None] * 3, values.to_pylist(), None, timestamp_ms=5, producer=stamp
    )
    assert column_wise == record_wise
    (header,) = validate_batches(column_wise, 1 << 20)  # the CRC covers the producer fields
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert header.is_transactional and not header.is_control
    assert [r.value for r in decode_batch(column_wise)] == [b"a", b"bb", None]
    plain = read_header(encode_arrow_records(None, values, timestamp_ms=5))
    assert (plain.producer_id, plain.is_transactional) == (-1, False)
