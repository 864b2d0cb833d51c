from __future__ import annotations

import dataclasses
import struct
from typing import Any

import crc32c
import pytest

from odradek.protocol.record_batch import (
    HEADER_SIZE,
    TIMESTAMP_TYPE_BIT,
    InvalidBatch,
    copied_batches,
    crc_of,
    iter_headers,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)
from odradek.protocol.records import Header, NewRecord, decode_batch, encode_batch

NOW = 1_700_000_000_000
LIMIT = 1 << 20


def batch(n: int = 3, **kwargs: Any) -> bytes:
    items = [NewRecord(b"k%d" % i, b"v" * 50, (Header("h", b"x"),), NOW + i) for i in range(n)]
    return encode_batch(items, now_ms=NOW, **kwargs)


def reseal(buf: bytearray) -> bytes:
    """Recompute the CRC after an edit, so the edit is the only fault."""
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def invalid(buf: bytes | bytearray, limit: int = LIMIT) -> str:
    with pytest.raises(InvalidBatch) as info:
        validate_batches(buf, limit)
    return info.value.error


def test_header_layout() -> None:
    b = batch(3, base_offset=42, producer_id=9, producer_epoch=4, base_sequence=17, compression=1)
    h = read_header(b)
    assert h.position == 0 and h.magic == 2 and h.size == len(b)
    assert h.batch_length == len(b) - 12
    assert (h.base_offset, h.last_offset_delta, h.record_count) == (42, 2, 3)
    assert (h.last_offset, h.next_offset) == (44, 45)
    assert (h.base_timestamp, h.max_timestamp) == (NOW, NOW + 2)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 4, 17)
    assert h.compression == 1
    assert not (h.is_control or h.is_transactional or h.is_log_append_time)
    assert crc_of(b, h) == h.crc


def test_header_read_from_a_chunk_records_its_file_position() -> None:
    first, second = batch(1), batch(2, base_offset=1)
    chunk = b"\0" * 7 + second  # as read from a file at position 1000 - 7
    h = read_header(chunk, 7, at=1000)
    assert h.position == 1000 and (h.base_offset, h.record_count) == (1, 2)
    in_place = read_header(first + second, len(first))
    assert h == dataclasses.replace(in_place, position=1000)


def test_valid_batches_pass() -> None:
    a, b, c = batch(1), batch(5, compression=3), batch(2, compression=4)
    headers = validate_batches(a + b + c, LIMIT)
    assert [h.position for h in headers] == [0, len(a), len(a) + len(b)]
    assert [h.record_count for h in headers] == [1, 5, 2]
    assert validate_batches(memoryview(a), LIMIT)[0].size == len(a)
    assert validate_batches(bytearray(a), len(a))[0].size == len(a)  # limit is inclusive


def test_flipped_byte_is_corrupt() -> None:
    b = batch()
    for i in range(17, len(b)):  # the CRC itself and everything it covers
        bad = bytearray(b)
        bad[i] ^= 0x10
        assert invalid(bad) == "corrupt_message", i


def test_flipped_byte_in_second_batch_is_corrupt() -> None:
    b = bytearray(batch() + batch())
    b[-5] ^= 0x01
    assert invalid(b) == "corrupt_message"


def test_magic_1_is_invalid_record() -> None:
    bad = bytearray(batch())
    bad[16] = 1
    assert invalid(bad) == "invalid_record"
    assert invalid(bad[:30]) == "invalid_record"  # even when the header is cut short


def test_record_count_mismatch_is_invalid_record() -> None:
    bad = bytearray(batch(3))
    struct.pack_into(">i", bad, 57, 4)
    assert invalid(reseal(bad)) == "invalid_record"
    bad = bytearray(batch(3))
    struct.pack_into(">i", bad, 23, 1)  # lastOffsetDelta
    assert invalid(reseal(bad)) == "invalid_record"


def test_no_records_is_invalid_record() -> None:
    bad = bytearray(batch(1))
    struct.pack_into(">i", bad, 57, 0)
    struct.pack_into(">i", bad, 23, -1)
    assert invalid(reseal(bad)) == "invalid_record"


def test_empty_record_set_is_invalid_record() -> None:
    assert invalid(b"") == "invalid_record"


def test_oversize_is_message_too_large() -> None:
    b = batch(10)
    assert invalid(b, len(b) - 1) == "message_too_large"
    assert invalid(batch(1) + b, len(b) - 1) == "message_too_large"


@pytest.mark.parametrize("cut", [1, 12, 16, 17, 40, HEADER_SIZE - 1, HEADER_SIZE, -1])
def test_truncated_is_corrupt(cut: int) -> None:
    b = batch()
    assert invalid(b[:cut]) == "corrupt_message"
    assert invalid(b + b[:cut]) == "corrupt_message"


def test_batch_length_too_small_is_corrupt() -> None:
    bad = bytearray(batch())
    struct.pack_into(">i", bad, 8, HEADER_SIZE - 13)
    assert invalid(bad) == "corrupt_message"


def test_set_base_offset_keeps_crc_valid() -> None:
    buf = bytearray(batch(3) + batch(2))
    headers = validate_batches(buf, LIMIT)
    set_base_offset(buf, headers[0].position, 1000)
    set_base_offset(buf, headers[1].position, 1003)
    set_partition_leader_epoch(buf, headers[1].position, 7)
    after = validate_batches(buf, LIMIT)
    assert [(h.base_offset, h.last_offset) for h in after] == [(1000, 1002), (1003, 1004)]
    assert after[1].partition_leader_epoch == 7
    assert [r.offset for r in decode_batch(buf[after[1].position :])] == [1003, 1004]


def test_set_log_append_time_recomputes_crc() -> None:
    b = batch(2, compression=2)
    buf = bytearray(batch(1) + b)
    second = validate_batches(buf, LIMIT)[1]
    set_log_append_time(buf, second, NOW + 500)
    h = validate_batches(buf, LIMIT)[1]
    assert h.attributes == second.attributes | TIMESTAMP_TYPE_BIT
    assert h.compression == 2 and h.is_log_append_time
    assert h.max_timestamp == NOW + 500 and h.base_timestamp == NOW
    assert buf[: len(buf) - len(b)] == batch(1)  # the batch before is untouched
    assert [r.timestamp for r in decode_batch(buf[h.position :])] == [NOW + 500] * 2


def test_iter_headers_stops_at_partial_batch() -> None:
    a, b = batch(1), batch(2)
    assert [h.position for h in iter_headers(a + b)] == [0, len(a)]
    assert [h.position for h in iter_headers(a + b[:-1])] == [0]
    assert [h.position for h in iter_headers(a + b[:HEADER_SIZE])] == [0]
    assert list(iter_headers(b"")) == []


@pytest.mark.parametrize("source", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("target", [0, 1, 4])
def test_with_compression_keeps_records_and_offsets(source: int, target: int) -> None:
    from odradek.protocol.record_batch import with_compression
    from odradek.protocol.records import Header, decode_batch, encode_batch

    original = encode_batch(
        [(b"k1", b"v1", [Header("h", b"x")], 1000), (None, b"v2", [], 1005)],
        compression=source,
        base_offset=42,
        now_ms=2000,
    )
    header = read_header(original)
    rewritten = with_compression(original, header, target)
    new_header = validate_batches(rewritten, 1 << 20)[0]
    assert new_header.compression == target
    assert new_header.base_offset == 42
    assert new_header.max_timestamp == header.max_timestamp
    assert decode_batch(rewritten) == decode_batch(original)


def emptied(records: int = 3) -> bytes:
    """A batch as compaction leaves an idempotent producer's last one: no records, its offsets
    (lastOffsetDelta) kept."""
    buf = bytearray(batch(records)[:HEADER_SIZE])
    struct.pack_into(">i", buf, 8, HEADER_SIZE - 12)  # batchLength
    struct.pack_into(">i", buf, 57, 0)  # recordCount
    return reseal(buf)


def test_a_follower_takes_what_producers_may_not_send() -> None:
    copied = emptied() + batch(2)
    assert invalid(copied) == "invalid_record"  # from a producer
    headers = copied_batches(copied)
    assert [(h.record_count, h.last_offset_delta) for h in headers] == [(0, 2), (2, 1)]


def test_a_follower_leaves_out_a_batch_cut_off_at_the_end() -> None:
    whole = batch(2)
    for cut in (1, HEADER_SIZE - 1, HEADER_SIZE, len(whole) - 1):
        (header,) = copied_batches(whole + whole[:cut])
        assert header.size == len(whole)
    assert copied_batches(whole[:10]) == []


def test_a_follower_refuses_a_corrupt_copy() -> None:
    bad = bytearray(batch(2) + batch(3))
    bad[-1] ^= 0xFF
    with pytest.raises(InvalidBatch) as info:
        copied_batches(bad)
    assert info.value.error == "corrupt_message"
    with pytest.raises(InvalidBatch):
        copied_batches(b"\0" * 16 + b"\1" + b"\0" * (HEADER_SIZE - 17))  # magic 1
