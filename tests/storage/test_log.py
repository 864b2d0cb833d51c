from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.record_batch import crc_of, set_base_offset, validate_batches
from odradek.server.connection import SENDFILE_MIN_BYTES
from odradek.storage import LogConfig, OffsetOutOfRange, PartitionLog
from odradek.storage.log import COPIED_READ_BYTES, TAIL_BOUNDARIES_KEPT

from .conftest import BATCH_SIZE, append, headers_of, make_batch, read_all

Opener = Callable[..., PartitionLog]


def log_files(directory: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(suffix))


def test_append_assigns_offsets_and_reads_back_the_stored_bytes(open_log: Opener) -> None:
    log = open_log()
    first = append(log, make_batch(2), make_batch(3), leader_epoch=7)
    second = append(log, make_batch(1))
    assert (first.first_offset, first.last_offset) == (0, 4)
    assert (second.first_offset, second.last_offset) == (5, 5)
    assert first.log_append_time is None and first.log_start_offset == 0
    assert log.log_end_offset == 6

    piece = log.read(0, 1 << 20)
    assert piece is not None
    data = piece.read_bytes()
    headers = validate_batches(data, 1 << 20)  # CRCs still hold after the offset rewrite
    assert [h.base_offset for h in headers] == [0, 2, 5]
    assert [h.partition_leader_epoch for h in headers] == [7, 7, 0]
    assert data[61:].startswith(make_batch(2)[61:])  # records are stored as they came
    assert log.size_bytes() == len(data) == sum(len(make_batch(n)) for n in (2, 3, 1))


def test_log_append_time_is_stamped_under_the_crc(open_log: Opener) -> None:
    log = open_log()
    info = append(log, make_batch(2, timestamp=5), log_append_time=1234)
    assert info.log_append_time == 1234
    piece = log.read(0, 1 << 20)
    assert piece is not None
    [header] = validate_batches(piece.read_bytes(), 1 << 20)
    assert header.is_log_append_time and header.max_timestamp == 1234
    assert log.max_timestamp_offset() == (1, 1234)


def test_read_from_inside_a_batch_starts_at_that_batch(open_log: Opener) -> None:
    log = open_log()
    append(log, make_batch(2))
    append(log, make_batch(3))
    append(log, make_batch(1))
    for offset, base in [(0, 0), (1, 0), (2, 2), (3, 2), (4, 2), (5, 5)]:
        piece = log.read(offset, 1 << 20)
        assert piece is not None
        assert headers_of(piece.read_bytes())[0].base_offset == base


def test_read_limits_by_whole_batches_and_max_bytes(open_log: Opener) -> None:
    log = open_log()
    for _ in range(4):
        append(log, make_batch())
    piece = log.read(0, 3 * BATCH_SIZE - 1)
    assert piece is not None and piece.size == 2 * BATCH_SIZE
    piece = log.read(1, 3 * BATCH_SIZE)
    assert piece is not None and piece.size == 3 * BATCH_SIZE
    assert piece.position == BATCH_SIZE

    # A first batch larger than the limit comes whole (KIP-74), or cut when not asked for whole.
    whole = log.read(0, 10)
    assert whole is not None and whole.size == BATCH_SIZE
    cut = log.read(0, 10, min_one_batch=False)
    assert cut is not None and cut.size == 10
    assert cut.read_bytes() == whole.read_bytes()[:10]


def test_read_never_returns_batches_from_max_offset_on(open_log: Opener) -> None:
    log = open_log()
    append(log, make_batch(2))
    append(log, make_batch(3))
    append(log, make_batch(1))
    piece = log.read(0, 1 << 20, max_offset=5)
    assert piece is not None
    assert [h.base_offset for h in headers_of(piece.read_bytes())] == [0, 2]
    # A batch that starts below the bound is whole, even if it ends past it.
    piece = log.read(0, 1 << 20, max_offset=3)
    assert piece is not None
    assert [h.base_offset for h in headers_of(piece.read_bytes())] == [0, 2]
    assert log.read(5, 1 << 20, max_offset=5) is None
    assert log.read(0, 1 << 20, max_offset=0) is None


def test_read_at_and_outside_the_log_range(open_log: Opener) -> None:
    log = open_log()
    assert log.read(0, 100) is None  # an empty log
    append(log, make_batch(3))
    assert log.read(3, 100) is None
    with pytest.raises(OffsetOutOfRange) as caught:
        log.read(4, 100)
    assert (caught.value.log_start_offset, caught.value.log_end_offset) == (0, 3)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_segments_roll_by_size_and_reads_cross_them(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(LogConfig(segment_bytes=3 * BATCH_SIZE))
    for _ in range(7):
        append(log, make_batch())
    assert log.segment_count() == 3
    assert log_files(tmp_path / "topic-0", ".log") == [f"{base:020d}.log" for base in (0, 3, 6)]
    assert [h.base_offset for h in read_all(log)] == list(range(7))
    # A read stays within one segment; one at a segment's end moves on to the next.
    piece = log.read(1, 1 << 20)
    assert piece is not None
    assert [h.base_offset for h in headers_of(piece.read_bytes())] == [1, 2]
    piece = log.read(3, 1 << 20)
    assert piece is not None and piece.position == 0
    assert [h.base_offset for h in headers_of(piece.read_bytes())] == [3, 4, 5]


def test_an_oversized_batch_goes_into_its_own_segment(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=100))
    append(log, make_batch(5))
    append(log, make_batch(5))
    assert log.segment_count() == 2
    assert log.log_end_offset == 10


def test_segments_roll_by_time(open_log: Opener, clock: ManualClock) -> None:
    log = open_log(LogConfig(segment_ms=1000))
    append(log, make_batch(timestamp=clock.time_ms()))
    clock.advance(1000)
    append(log, make_batch(timestamp=clock.time_ms()))
    assert log.segment_count() == 1
    clock.advance(1)
    append(log, make_batch(timestamp=clock.time_ms()))
    assert log.segment_count() == 2
    assert [h.base_offset for h in read_all(log)] == [0, 1, 2]


def test_segments_roll_when_the_index_is_full(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(LogConfig(index_interval_bytes=0, segment_index_bytes=24))  # 2 time entries
    for i in range(5):
        append(log, make_batch(timestamp=1000 + i))
    assert log.segment_count() == 3
    directory = tmp_path / "topic-0"
    assert (directory / f"{0:020d}.index").stat().st_size == 2 * 8
    assert [h.base_offset for h in read_all(log)] == list(range(5))


def test_index_entries_every_interval_bytes(open_log: Opener, tmp_path: Path) -> None:
    size = len(make_batch(2))
    log = open_log(LogConfig(index_interval_bytes=2 * size))
    for i in range(6):
        append(log, make_batch(2, timestamp=1000 + i))
    directory = tmp_path / "topic-0"
    assert not (directory / f"{0:020d}.index").exists()  # written in batches, by a flush
    log.flush()
    index = (directory / f"{0:020d}.index").read_bytes()
    # Entries name a batch's last offset and its position, once 2 batches' bytes have passed.
    assert list(struct.iter_unpack(">ii", index)) == [(5, 2 * size), (9, 4 * size)]
    timeindex = (directory / f"{0:020d}.timeindex").read_bytes()
    assert list(struct.iter_unpack(">qi", timeindex)) == [(1002, 5), (1004, 9)]
    for offset in range(12):
        piece = log.read(offset, BATCH_SIZE)
        assert piece is not None
        assert headers_of(piece.read_bytes())[0].base_offset == offset - offset % 2


def test_time_index_grows_only_with_the_max_timestamp(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(LogConfig(index_interval_bytes=0))
    for ts in (1000, 900, 1000, 1100, 1050):
        append(log, make_batch(timestamp=ts))
    log.flush()
    timeindex = (tmp_path / "topic-0" / f"{0:020d}.timeindex").read_bytes()
    assert list(struct.iter_unpack(">qi", timeindex)) == [(1000, 0), (1100, 3)]
    assert log.max_timestamp_offset() == (3, 1100)


def test_reopen_keeps_everything(open_log: Opener) -> None:
    config = LogConfig(segment_bytes=3 * BATCH_SIZE, index_interval_bytes=BATCH_SIZE)
    log = open_log(config)
    for i in range(8):
        append(log, make_batch(timestamp=2000 + i))
    before = log.read(0, 1 << 20)
    assert before is not None
    before_bytes = before.read_bytes()
    log.flush()
    log.close()

    log = open_log(config, recovery_point=8)
    assert (log.log_end_offset, log.segment_count(), log.recovery_point) == (8, 3, 8)
    after = log.read(0, 1 << 20)
    assert after is not None and after.read_bytes() == before_bytes
    assert log.max_timestamp_offset() == (7, 2007)
    assert append(log, make_batch()).first_offset == 8
    assert [h.base_offset for h in read_all(log)] == list(range(9))


def test_delete_records_before(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH_SIZE))
    for _ in range(6):
        append(log, make_batch())
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(7)
    assert log.delete_records_before(3) == 3
    assert log.log_start_offset == 3
    assert log_files(tmp_path / "topic-0", ".log") == [f"{b:020d}.log" for b in (2, 4)]
    assert log.delete_records_before(1) == 3  # never moves back
    with pytest.raises(OffsetOutOfRange) as caught:
        log.read(2, 100)
    assert caught.value.log_start_offset == 3
    piece = log.read(3, 100)
    assert piece is not None and headers_of(piece.read_bytes())[0].base_offset == 3
    assert append(log, make_batch()).log_start_offset == 3

    # The active segment stays even when every offset is below the start.
    assert log.delete_records_before(7) == 7
    assert log.segment_count() == 1 and log.read(7, 100) is None
    assert append(log, make_batch()).first_offset == 7


def test_a_read_slice_outlives_the_deletion_of_its_segment(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=BATCH_SIZE))
    append(log, make_batch())
    append(log, make_batch())
    piece = log.read(0, 100)
    assert piece is not None
    log.delete_records_before(1)
    assert headers_of(piece.read_bytes())[0].base_offset == 0


def test_truncate_to(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(LogConfig(segment_bytes=3 * len(make_batch(2)), index_interval_bytes=0))
    for i in range(3):
        append(log, make_batch(2, timestamp=100 + i))
    for i in range(3):
        append(log, make_batch(1, timestamp=200 + i))
    assert (log.log_end_offset, log.segment_count()) == (9, 2)

    log.truncate_to(8)
    assert log.log_end_offset == 8
    log.truncate_to(3)  # inside the batch 2..3: the whole batch goes
    assert (log.log_end_offset, log.segment_count()) == (2, 1)
    assert log_files(tmp_path / "topic-0", ".log") == [f"{0:020d}.log"]
    log.flush()  # the index file is cut at its next write
    assert list(
        struct.iter_unpack(">ii", (tmp_path / "topic-0" / f"{0:020d}.index").read_bytes())
    ) == [(1, 0)]
    assert log.max_timestamp_offset() == (1, 100)
    assert append(log, make_batch()).first_offset == 2
    assert [h.base_offset for h in read_all(log)] == [0, 2]

    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes()) == (0, 0, 0)
    assert log.read(0, 100) is None


def test_truncation_survives_reopen(open_log: Opener) -> None:
    log = open_log(LogConfig(index_interval_bytes=0))
    for _ in range(5):
        append(log, make_batch())
    log.truncate_to(3)
    log.close()
    log = open_log(LogConfig(index_interval_bytes=0))
    assert log.log_end_offset == 3
    assert [h.base_offset for h in read_all(log)] == [0, 1, 2]


def test_flush_messages_moves_the_recovery_point(open_log: Opener) -> None:
    log = open_log(LogConfig(flush_messages=3))
    append(log, make_batch(2))
    assert log.recovery_point == 0
    append(log, make_batch(2))
    assert log.recovery_point == 4
    append(log, make_batch(1))
    assert log.recovery_point == 4


def test_delete_removes_the_directory(open_log: Opener, tmp_path: Path) -> None:
    log = open_log()
    append(log, make_batch())
    log.delete()
    assert list(tmp_path.iterdir()) == []


def test_a_small_read_comes_as_bytes(open_log: Opener) -> None:
    log = open_log()
    append(log, make_batch(3))
    piece = log.read(0, 1 << 20)
    assert piece is not None and piece.fd == -1 and piece.data is not None
    assert headers_of(piece.read_bytes())[0].record_count == 3


def test_the_copied_reads_are_all_below_what_the_server_sends_with_sendfile() -> None:
    assert COPIED_READ_BYTES <= SENDFILE_MIN_BYTES


def test_the_read_fd_serves_sendfile(open_log: Opener, tmp_path: Path) -> None:
    log = open_log()
    append(log, make_batch(3, value=b"x" * COPIED_READ_BYTES))
    piece = log.read(0, 1 << 20)
    assert piece is not None and piece.data is None
    out = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        assert os.sendfile(out, piece.fd, piece.position, piece.size) == piece.size
    finally:
        os.close(out)
    data = (tmp_path / "out").read_bytes()
    [header] = headers_of(data)
    assert crc_of(data, header) == header.crc


def test_reads_over_big_and_small_batches(open_log: Opener) -> None:
    log = open_log(LogConfig(index_interval_bytes=10_000))
    values = [b"x" * 5000, b"y", b"z" * 3000, b"w" * 10, b"v" * 20_000, b"u"]
    for value in values:
        append(log, make_batch(2, value=value))
    sizes = [len(make_batch(2, value=v)) for v in values]
    assert [h.base_offset for h in read_all(log)] == [0, 2, 4, 6, 8, 10]
    piece = log.read(3, sum(sizes[1:4]))
    assert piece is not None
    assert (piece.position, piece.size) == (sizes[0], sum(sizes[1:4]))
    piece = log.read(9, 10)
    assert piece is not None and piece.size == sizes[4]


def every_read(log: PartitionLog) -> dict[tuple[int, int, int], tuple[int, bytes] | None]:
    """Every read the log can be asked for: from each offset to the end and to each offset
    before it, under a few byte limits; (position, bytes) of each."""
    found: dict[tuple[int, int, int], tuple[int, bytes] | None] = {}
    end = log.log_end_offset
    for offset in range(log.log_start_offset, end + 1):
        for limit in range(offset, end + 1):
            for max_bytes in (1, 2 * BATCH_SIZE, 1 << 20):
                piece = log.read(offset, max_bytes, max_offset=limit)
                found[offset, limit, max_bytes] = (
                    None if piece is None else (piece.position, piece.read_bytes())
                )
    return found


def test_reads_at_the_tail_answer_as_the_index_and_headers_of_a_reopened_log(
    open_log: Opener,
) -> None:
    """The log remembers where its latest batches start (reads at the tail skip the index
    and the walk of headers); a reopened log knows none of it, so it reads the other way."""
    config = LogConfig(segment_bytes=5 * BATCH_SIZE)
    log = open_log(config)
    for count in (1, 3, 2, 1, 4, 1, 2):
        append(log, make_batch(count))
    assert len(log.segments) > 1  # boundaries in sealed segments and in the active one
    rolled = every_read(log)
    log.close()
    log = open_log(config)
    assert every_read(log) == rolled
    for counts in ((1,), (3, 2, 1, 4)):  # into the active segment the log opened with, then on
        for count in counts:
            append(log, make_batch(count))
        rolled = every_read(log)
        log.close()
        log = open_log(config)
        assert every_read(log) == rolled
    log.truncate_to(9)  # inside the batch of offsets 7-10: the log ends at 7
    for count in (2, 1):
        append(log, make_batch(count))
    before = every_read(log)
    assert before[7, 10, 1 << 20] is not None
    log.close()
    assert every_read(open_log(config)) == before


def test_a_followers_reads_at_the_tail_past_gaps_in_its_offsets(open_log: Opener) -> None:
    def copied(base_offset: int, count: int) -> bytearray:
        batch = bytearray(make_batch(count))
        set_base_offset(batch, 0, base_offset)
        return batch

    log = open_log()
    for batches in ([copied(0, 2), copied(5, 1)], [copied(8, 2)], [copied(12, 1), copied(13, 3)]):
        records = bytearray(b"".join(batches))
        log.append_as_follower(records, validate_batches(records, 1 << 30))
    before = every_read(log)
    piece = before[2, 8, 1 << 20]  # from inside the gap: the batch after it
    assert piece is not None and [h.base_offset for h in headers_of(piece[1])] == [5]
    log.close()
    assert every_read(open_log()) == before


def test_bytes_between_recent_batches_are_known_across_segments_until_truncation(
    open_log: Opener,
) -> None:
    three, two = make_batch(3), make_batch(2)
    log = open_log(LogConfig(segment_bytes=len(three)))
    assert log.bytes_between(0, 0) == 0
    append(log, three)
    append(log, two)
    assert len(log.segments) == 2
    assert log.bytes_between(0, 5) == len(three) + len(two)
    assert log.bytes_between(3, 5) == len(two)
    assert log.bytes_between(1, 5) is None  # inside a batch
    log.truncate_to(3)
    assert log.bytes_between(0, 3) is None and log.bytes_between(3, 5) is None
    append(log, two)
    assert log.bytes_between(3, 5) == len(two)


def test_the_log_remembers_only_its_latest_batch_boundaries(open_log: Opener) -> None:
    log = open_log()
    for _ in range(2 * TAIL_BOUNDARIES_KEPT):
        append(log, make_batch(1))
    end = log.log_end_offset
    assert log.bytes_between(0, end) is None  # forgotten: a parked Fetch counts by reading
    recent = end - TAIL_BOUNDARIES_KEPT + 1
    assert log.bytes_between(recent, end) == (TAIL_BOUNDARIES_KEPT - 1) * BATCH_SIZE
    piece = log.read(0, 1 << 20)  # read the other way, all the same
    assert piece is not None and headers_of(piece.read_bytes())[0].base_offset == 0
