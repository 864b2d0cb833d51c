"""Delete retention: retention.ms and retention.bytes remove whole segments, oldest first."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager, OffsetOutOfRange, PartitionLog
from odradek.storage.log import COPIED_READ_BYTES

from .conftest import BATCH_SIZE, append, headers_of, make_batch, read_all

Opener = Callable[..., PartitionLog]
HOUR = 3_600_000


def log_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".log"))


def test_time_retention_deletes_old_segments_oldest_first(
    open_log: Opener, clock: ManualClock, tmp_path: Path
) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH_SIZE, retention_ms=HOUR))
    start = clock.time_ms()
    for i in range(6):  # segments [0, 1] [2, 3] [4, 5], timestamps one minute apart
        append(log, make_batch(timestamp=start + i * 60_000))
    append(log, make_batch(timestamp=start))  # an old timestamp in the active segment
    assert log.segment_count() == 4

    assert log.apply_retention() == 0
    clock.advance(HOUR + 60_001)  # segment [0, 1] is now over an hour old, [2, 3] is not
    assert log.apply_retention() == 1
    assert log.log_start_offset == 2
    assert log_files(tmp_path / "topic-0") == [f"{b:020d}.log" for b in (2, 4, 6)]
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 100)

    clock.advance(10 * HOUR)
    # Every segment has expired, but the active one stays, even with an expired record in it.
    assert log.apply_retention() == 2
    assert (log.log_start_offset, log.log_end_offset, log.segment_count()) == (6, 7, 1)
    assert [h.base_offset for h in read_all(log)] == [6]
    assert append(log, make_batch(timestamp=clock.time_ms())).first_offset == 7


def test_time_retention_stops_at_the_first_segment_to_keep(
    open_log: Opener, clock: ManualClock
) -> None:
    log = open_log(LogConfig(segment_bytes=BATCH_SIZE, retention_ms=HOUR))
    now = clock.time_ms()
    # A segment with a future timestamp shields older ones after it: retention only cuts a prefix.
    for timestamp in (now - 2 * HOUR, now + HOUR, now - 2 * HOUR, now):
        append(log, make_batch(timestamp=timestamp))
    assert log.apply_retention() == 1
    assert log.log_start_offset == 1


def test_a_segment_without_timestamps_ages_by_its_file_time(
    open_log: Opener, clock: ManualClock
) -> None:
    log = open_log(LogConfig(segment_bytes=BATCH_SIZE, retention_ms=HOUR))
    append(log, make_batch(timestamp=-1))
    append(log, make_batch(timestamp=clock.time_ms()))
    first = log.segments[0]
    two_hours_ago = (clock.time_ms() - 2 * HOUR) / 1000
    assert log.apply_retention() == 0  # the file was written just now
    os.utime(first.log_path, (two_hours_ago, two_hours_ago))
    assert log.apply_retention() == 1
    assert log.log_start_offset == 1


def test_size_retention_keeps_at_least_retention_bytes(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH_SIZE, retention_bytes=3 * BATCH_SIZE))
    for _ in range(9):  # segments of 2 batches: [0,1] [2,3] [4,5] [6,7] [8]
        append(log, make_batch())
    assert log.apply_retention() == 3
    # Without [6, 7] the log would hold 1 batch, below retention.bytes: it stays.
    assert (log.log_start_offset, log.size_bytes()) == (6, 3 * BATCH_SIZE)
    assert [h.base_offset for h in read_all(log)] == [6, 7, 8]
    assert log.apply_retention() == 0


def test_size_retention_never_deletes_the_active_segment(open_log: Opener) -> None:
    log = open_log(LogConfig(segment_bytes=2 * BATCH_SIZE, retention_bytes=0))
    for _ in range(5):
        append(log, make_batch())
    assert log.apply_retention() == 2
    assert (log.log_start_offset, log.segment_count()) == (4, 1)


def test_a_compact_only_log_keeps_everything(open_log: Opener, clock: ManualClock) -> None:
    log = open_log(LogConfig(segment_bytes=BATCH_SIZE, retention_ms=1, delete=False, compact=True))
    for _ in range(3):
        append(log, make_batch())
    clock.advance(HOUR)
    assert log.apply_retention() == 0
    assert log.log_start_offset == 0


def test_deleted_segments_stay_readable_until_the_delete_delay(
    open_log: Opener, clock: ManualClock
) -> None:
    # Big enough to be handed out as the segment's fd rather than copied.
    value = b"x" * COPIED_READ_BYTES
    size = len(make_batch(value=value))
    config = LogConfig(segment_bytes=size, retention_ms=HOUR, file_delete_delay_ms=5_000)
    log = open_log(config)
    append(log, make_batch(timestamp=clock.time_ms(), value=value))
    append(log, make_batch(timestamp=clock.time_ms(), value=value))
    piece = log.read(0, size)  # a Fetch response being sent while retention runs
    assert piece is not None and piece.data is None
    clock.advance(HOUR + 1)
    assert not log.has_retired
    assert log.apply_retention() == 1
    assert log.has_retired and log.take_retired() == []
    assert headers_of(piece.read_bytes())[0].base_offset == 0
    clock.advance(5_000)
    [retired] = log.take_retired()
    assert not log.has_retired
    retired.close()
    with pytest.raises(OSError):
        piece.read_bytes()


def test_the_manager_checkpoints_the_new_log_start(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=2 * BATCH_SIZE, retention_bytes=2 * BATCH_SIZE)
    manager = LogManager([tmp_path], clock)
    manager.open(lambda topic: config)
    log = manager.create("events", 0, config)
    other = manager.create("other", 0, LogConfig(segment_bytes=BATCH_SIZE))
    for _ in range(7):
        append(log, make_batch())
        append(other, make_batch())
    assert manager.apply_retention() == 2
    manager.wait_for_flushes()  # the checkpoint is written by the flusher thread
    assert "events 0 4" in (tmp_path / "log-start-offset-checkpoint").read_text()
    assert other.log_start_offset == 0  # no retention.bytes: kept whole
    # Unflushed, then killed: the start offset survives through the checkpoint.
    for partition_log in manager.all_logs():
        for segment in partition_log.segments:
            segment.close()
    manager = LogManager([tmp_path], clock)
    manager.open(lambda topic: config)
    reopened = manager.get("events", 0)
    assert reopened is not None
    assert (reopened.log_start_offset, reopened.log_end_offset) == (4, 7)
    assert [h.base_offset for h in read_all(reopened)] == [4, 5, 6]
    manager.close()
