"""What log compaction reads and writes of batches: record spans and rebuilt batches."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import compression
from odradek.protocol.record_batch import crc_of, read_header
from odradek.protocol.records import (
    Header,
    NewRecord,
    RecordDecodeError,
    decode_batch,
    encode_batch,
    key_value_prefixes,
    rebuild_batch,
    records_section,
    scan_records,
)

records = st.lists(
    st.builds(
        NewRecord,
        key=st.one_of(st.none(), st.binary(max_size=100)),
        value=st.one_of(st.none(), st.binary(max_size=300)),
        headers=st.lists(
            st.builds(Header, st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
            max_size=2,
        ),
        timestamp=st.integers(1_600_000_000_000, 1_800_000_000_000),
    ),
    min_size=1,
    max_size=200,
)
codecs = st.sampled_from(sorted(compression.CODEC_NAMES.values()))


@settings(max_examples=80, deadline=None)
@given(
    items=records,
    codec=codecs,
    new_codec=codecs,
    base=st.integers(0, 1 << 40),
    keep=st.data(),
    horizon=st.one_of(st.none(), st.integers(1_600_000_000_000, 1_900_000_000_000)),
)
def test_spans_and_rebuilt_batches_agree_with_the_decoder(
    items: list[NewRecord],
    codec: int,
    new_codec: int,
    base: int,
    keep: st.DataObject,
    horizon: int | None,
) -> None:
    batch = encode_batch(items, compression=codec, base_offset=base, now_ms=0)
    header = read_header(batch)
    decoded = decode_batch(batch)
    section = records_section(batch, header)
    spans = scan_records(section, header.record_count)
    assert [(base + s[0], header.base_timestamp + s[1], s[2], s[3]) for s in spans] == [
        (r.offset, r.timestamp, r.key, r.value is None) for r in decoded
    ]
    chosen = sorted(keep.draw(st.sets(st.integers(0, len(spans) - 1), min_size=1)))
    rebuilt = rebuild_batch(
        header,
        section,
        [spans[i] for i in chosen],
        compression=new_codec,
        delete_horizon_ms=horizon,
    )
    new_header = read_header(rebuilt)
    assert new_header.size == len(rebuilt) and crc_of(rebuilt, new_header) == new_header.crc
    assert new_header.base_offset == header.base_offset
    assert new_header.last_offset == header.last_offset
    assert new_header.compression == new_codec
    assert new_header.delete_horizon == horizon
    assert new_header.record_count == len(chosen)
    assert decode_batch(rebuilt) == [decoded[i] for i in chosen]
    assert new_header.max_timestamp == max(decoded[i].timestamp for i in chosen)


def test_a_truncated_record_is_an_error() -> None:
    batch = encode_batch([(b"k", b"v" * 50, (), 5)], now_ms=5)
    section = records_section(batch, read_header(batch))
    with pytest.raises(RecordDecodeError):
        scan_records(section[:-3], 1)
    with pytest.raises(RecordDecodeError):
        scan_records(section + b"\x00", 1)


@settings(max_examples=60, deadline=None)
@given(items=records, codec=codecs, size=st.integers(0, 8))
def test_key_value_prefixes_agree_with_the_decoder(
    items: list[NewRecord], codec: int, size: int
) -> None:
    batch = encode_batch(items, compression=codec, now_ms=0)
    header = read_header(batch)
    prefixes = key_value_prefixes(records_section(batch, header), header.record_count, size)
    assert prefixes == [
        (None if r.key is None else r.key[:size], None if r.value is None else r.value[:size])
        for r in decode_batch(batch)
    ]


def test_key_value_prefixes_of_a_cut_section_are_a_decode_error() -> None:
    batch = encode_batch([NewRecord(b"key", b"value")], now_ms=0)
    section = records_section(batch, read_header(batch))
    with pytest.raises(RecordDecodeError):
        key_value_prefixes(section[:-3], 1, 5)
