"""The leader's checks of a produced record set (Kafka's LogValidator), on bytes alone."""

from __future__ import annotations

import pytest

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import (
    NO_TIMESTAMP,
    iter_headers,
    set_max_timestamp,
    validate_batches,
)
from odradek.protocol.records import NewRecord, decode_batch, encode_batch
from odradek.storage import LogConfig
from odradek.storage.validator import RecordsRejected, validate_for_leader

NOW = 1_700_000_000_000


def batch(*keys: bytes | None, timestamp: int = NOW, codec: int = compression.NONE) -> bytes:
    return encode_batch(
        [NewRecord(k, b"v", timestamp=timestamp) for k in keys], now_ms=NOW, compression=codec
    )


def rejected(records: bytes | None, config: LogConfig) -> RecordsRejected:
    with pytest.raises(RecordsRejected) as caught:
        validate_for_leader(records, config, NOW, "t-0")
    return caught.value


def test_a_valid_set_keeps_the_writable_view_it_came_in() -> None:
    data = bytearray(batch(b"k") + batch(None, None))
    view = memoryview(data)
    valid = validate_for_leader(view, LogConfig(), NOW, "t-0")
    assert valid.buffer is view
    assert [h.record_count for h in valid.headers] == [1, 2]
    assert valid.log_append_time is None


def test_read_only_bytes_are_copied_so_offsets_can_be_assigned() -> None:
    data = batch(b"k")
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert isinstance(valid.buffer, bytearray)
    assert bytes(valid.buffer) == data


def test_empty_corrupt_and_oversized_sets_get_kafkas_codes() -> None:
    assert rejected(None, LogConfig()).code == ErrorCode.invalid_record
    corrupt = bytearray(batch(b"k"))
    corrupt[-1] ^= 0xFF
    assert rejected(bytes(corrupt), LogConfig()).code == ErrorCode.corrupt_message
    big = batch(b"k")
    assert rejected(big, LogConfig(max_message_bytes=len(big) - 1)).code == (
        ErrorCode.message_too_large
    )


def test_a_compacted_log_refuses_the_first_keyless_record_by_its_index() -> None:
    error = rejected(batch(b"a", None, None), LogConfig(compact=True))
    assert error.code == ErrorCode.invalid_record
    assert [i for i, _ in error.record_errors] == [1]
    assert "t-0" in error.message
    assert validate_for_leader(batch(b"a", b"b"), LogConfig(compact=True), NOW, "t-0").headers


def test_timestamps_outside_the_topics_bounds_are_refused() -> None:
    config = LogConfig(timestamp_after_max_ms=1000, timestamp_before_max_ms=5000)
    assert rejected(batch(b"k", timestamp=NOW + 1001), config).code == ErrorCode.invalid_timestamp
    assert rejected(batch(b"k", timestamp=NOW - 5001), config).code == ErrorCode.invalid_timestamp
    assert validate_for_leader(batch(b"k", timestamp=NOW + 1000), config, NOW, "t-0").headers


def test_log_append_time_takes_the_brokers_clock_and_skips_the_bounds() -> None:
    config = LogConfig(log_append_time=True, timestamp_before_max_ms=0)
    valid = validate_for_leader(batch(b"k", timestamp=1), config, NOW, "t-0")
    assert valid.log_append_time == NOW


def test_a_topic_codec_rewrites_batches_in_it() -> None:
    config = LogConfig(compression=compression.codec_id("zstd"))
    valid = validate_for_leader(batch(b"a", b"b"), config, NOW, "t-0")
    assert [h.compression for h in valid.headers] == [compression.codec_id("zstd")]
    assert [h.compression for h in iter_headers(valid.buffer)] == [compression.codec_id("zstd")]
    assert valid.headers[0].record_count == 2


def without_max_timestamp(data: bytes) -> bytearray:
    """The batch as sarama before 1.23 writes it: maxTimestamp -1 (CRC made to match)."""
    out = bytearray(data)
    (header,) = iter_headers(out)
    set_max_timestamp(out, header, NO_TIMESTAMP)
    return out


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_a_batch_without_max_timestamp_gets_its_records_greatest(codec: str) -> None:
    records = [NewRecord(b"k", b"v", timestamp=NOW + delta) for delta in (5, 40, 12)]
    data = without_max_timestamp(
        encode_batch(records, now_ms=NOW, compression=compression.codec_id(codec))
    )
    assert [h.max_timestamp for h in iter_headers(data)] == [NO_TIMESTAMP]
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert [h.max_timestamp for h in valid.headers] == [NOW + 40]
    # the rewritten batch is whole: its CRC covers the new field
    assert [h.max_timestamp for h in validate_batches(valid.buffer, 1 << 20)] == [NOW + 40]
    assert [r.timestamp for r in decode_batch(bytes(valid.buffer))] == [NOW + 5, NOW + 40, NOW + 12]


def test_a_batch_without_any_timestamp_is_left_as_it_came() -> None:
    data = bytearray(encode_batch([NewRecord(b"k", b"v", timestamp=NO_TIMESTAMP)], now_ms=NOW))
    (header,) = iter_headers(data)
    assert (header.base_timestamp, header.max_timestamp) == (NO_TIMESTAMP, NO_TIMESTAMP)
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert valid.buffer == data
    assert [h.max_timestamp for h in valid.headers] == [NO_TIMESTAMP]
