"""Kafka's flush on roll, and the other fsyncs the log flusher's thread does for the logs.

Nothing here sleeps: a test that needs a flush to be still pending holds the flusher's thread in
a job of its own (:func:`held`) and lets it go when it wants; one that needs it done waits for
the flusher to be idle.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager, PartitionLog, fileio
from odradek.storage.cleaner import LogCleaner
from odradek.storage.flusher import BackgroundJob, LogFlusher
from odradek.storage.segment import LogSegment

from .conftest import BATCH_SIZE, append, held, keyed_batch, make_batch, read_all, records_of

WAIT_S = 30  # a bound on waiting for the flusher thread, never a delay
CONFIG = LogConfig(segment_bytes=2 * BATCH_SIZE, index_interval_bytes=BATCH_SIZE)


def idle(flusher: LogFlusher) -> None:
    assert flusher.wait_idle(WAIT_S), "the flusher did not finish"


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> set[tuple[int, int]]:
    """(device, inode) of every file fsynced from now on, by any thread; a sync of a whole file
    system (a clean stop's) counts for every file and directory under the directory synced."""
    seen: set[tuple[int, int]] = set()
    real_fsync = os.fsync
    real_syncfs = fileio._SYNCFS

    def recording_fsync(fd: int) -> None:
        real_fsync(fd)
        st = os.fstat(fd)
        seen.add((st.st_dev, st.st_ino))

    def recording_syncfs(fd: int) -> int:
        assert real_syncfs is not None
        result = real_syncfs(fd)
        if result == 0:
            top = Path(os.readlink(f"/proc/self/fd/{fd}"))
            for path in [top, *top.rglob("*")]:
                seen.add(inode(path))
        return result

    monkeypatch.setattr(os, "fsync", recording_fsync)
    if real_syncfs is not None:
        monkeypatch.setattr(fileio, "_SYNCFS", recording_syncfs)
    return seen


def inode(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


def segment_files(segment: LogSegment) -> list[Path]:
    """The segment's files on disk (an index without entries has none)."""
    paths = [segment.log_path, segment.offset_index.path, segment.time_index.path]
    return [p for p in paths if p.exists()]


@pytest.fixture
def flusher() -> Iterator[LogFlusher]:
    flusher = LogFlusher()
    yield flusher
    idle(flusher)


@pytest.fixture
def open_flushed_log(
    tmp_path: Path, clock: ManualClock, flusher: LogFlusher
) -> Callable[..., PartitionLog]:
    def opener(config: LogConfig = CONFIG, **kwargs: int | bool) -> PartitionLog:
        return PartitionLog.open(
            tmp_path / "topic-0",
            config,
            clock,
            flusher=flusher,
            **kwargs,  # type: ignore[arg-type]
        )

    return opener


def opened_manager(tmp_path: Path, clock: ManualClock, config: LogConfig = CONFIG) -> LogManager:
    manager = LogManager([tmp_path], clock)
    manager.open(lambda topic: config)
    return manager


# -- flush on roll ------------------------------------------------------------------------------


def test_a_roll_flushes_the_sealed_segments_and_moves_the_recovery_point(
    open_flushed_log: Callable[..., PartitionLog],
    flusher: LogFlusher,
    fsynced: set[tuple[int, int]],
    tmp_path: Path,
) -> None:
    log = open_flushed_log()
    for _ in range(5):  # segments 0-1, 2-3, 4
        append(log, make_batch())
    idle(flusher)
    assert log.recovery_point == 4  # the base offset of the active segment, as Kafka's roll
    sealed, active = log.segments[:-1], log.segments[-1]
    assert not any(s.dirty for s in sealed) and active.dirty
    for segment in sealed:
        assert {inode(p) for p in segment_files(segment)} <= fsynced
    assert inode(tmp_path / "topic-0") in fsynced  # new segment files: the directory too
    assert inode(active.log_path) not in fsynced
    assert log.has_unflushed  # the active segment's record


def test_the_recovery_point_waits_for_the_fsyncs_while_appends_go_on(
    open_flushed_log: Callable[..., PartitionLog], flusher: LogFlusher
) -> None:
    log = open_flushed_log()
    with held(flusher):
        for _ in range(3):
            append(log, make_batch())
        assert log.flushes_pending == 1
        assert log.recovery_point == 0
        for _ in range(4):  # two more rolls, appends unhindered by the queued flushes
            append(log, make_batch())
        assert log.log_end_offset == 7 and log.recovery_point == 0
    idle(flusher)
    assert log.recovery_point == 6
    assert log.flushes_pending == 0
    assert [h.base_offset for h in read_all(log)] == list(range(7))


def test_a_failed_fsync_leaves_the_recovery_point_and_the_next_flush_retries(
    open_flushed_log: Callable[..., PartitionLog],
    flusher: LogFlusher,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = open_flushed_log()
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    with held(flusher):
        for _ in range(3):
            append(log, make_batch())
        monkeypatch.setattr(os, "fsync", failing_fsync)
    idle(flusher)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert "failed" in caplog.text
    assert log.recovery_point == 0
    assert log.segments[0].dirty
    for _ in range(2):  # the next roll takes the first segment again
        append(log, make_batch())
    idle(flusher)
    assert log.recovery_point == 4
    assert not log.segments[0].dirty and not log.segments[1].dirty


def test_a_log_without_a_flusher_flushes_only_when_told(tmp_path: Path, clock: ManualClock) -> None:
    log = PartitionLog.open(tmp_path / "topic-0", CONFIG, clock)
    for _ in range(5):
        append(log, make_batch())
    assert log.recovery_point == 0 and log.flushes_pending == 0
    log.flush()
    assert log.recovery_point == 5


# -- what can happen to a log while its flush waits ---------------------------------------------


def test_retention_while_a_flush_is_pending_resurrects_nothing(
    open_flushed_log: Callable[..., PartitionLog],
    flusher: LogFlusher,
    clock: ManualClock,
    tmp_path: Path,
) -> None:
    config = LogConfig(segment_bytes=2 * BATCH_SIZE, retention_bytes=2 * BATCH_SIZE)
    log = open_flushed_log(config)
    directory = tmp_path / "topic-0"
    with held(flusher):
        for _ in range(7):  # segments 0, 2, 4, 6; three rolls queued
            append(log, make_batch())
        doomed = [p for s in log.segments[:2] for p in segment_files(s)]
        assert log.apply_retention() == 2
        assert log.log_start_offset == 4
        clock.advance(config.file_delete_delay_ms)
        for segment in log.take_retired():
            segment.close()  # the segment's own fd; the flush holds fds of its own
        before = sorted(p.name for p in directory.iterdir())
    idle(flusher)
    assert not any(p.exists() for p in doomed)
    assert sorted(p.name for p in directory.iterdir()) == before
    assert log.recovery_point == 6
    assert [h.base_offset for h in read_all(log)] == [4, 5, 6]


def test_delete_records_while_a_flush_is_pending(
    open_flushed_log: Callable[..., PartitionLog], flusher: LogFlusher, tmp_path: Path
) -> None:
    log = open_flushed_log()
    with held(flusher):
        for _ in range(5):
            append(log, make_batch())
        assert log.delete_records_before(3) == 3
    idle(flusher)
    assert not (tmp_path / "topic-0" / f"{0:020d}.log").exists()
    assert not (tmp_path / "topic-0" / f"{0:020d}.index").exists()
    assert log.recovery_point == 4


def test_truncation_discards_pending_flushes(
    open_flushed_log: Callable[..., PartitionLog], flusher: LogFlusher
) -> None:
    log = open_flushed_log()
    with held(flusher):
        for _ in range(7):
            append(log, make_batch())  # flushes below 2, 4 and 6 queued
        log.truncate_to(3)
        assert log.flushes_pending == 0
        append(log, make_batch())  # offset 3 again, a different record
    idle(flusher)
    assert log.log_end_offset == 4
    assert log.recovery_point <= 2  # never past what a flush saw of this log
    assert [h.base_offset for h in read_all(log)] == [0, 1, 2, 3]


def test_deleting_a_topic_while_its_flush_is_pending(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    manager = opened_manager(tmp_path, clock)
    doomed = manager.create("doomed", 0, CONFIG)
    kept = manager.create("kept", 0, CONFIG)
    with held(manager.flusher):
        for _ in range(5):
            append(doomed, make_batch())
            append(kept, make_batch())
        assert doomed.flushes_pending == 2
        manager.delete("doomed", 0)
        assert not (tmp_path / "doomed-0").exists()
    assert manager.wait_for_flushes(WAIT_S)
    assert not (tmp_path / "doomed-0").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("doomed")]
    assert "failed" not in caplog.text
    assert kept.recovery_point == 4
    manager.close()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nkept 0 5\n"


def test_the_cleaner_replacing_segments_while_their_flush_is_pending(
    tmp_path: Path, clock: ManualClock
) -> None:
    compact = LogConfig(
        segment_bytes=1000,
        index_interval_bytes=0,
        delete=False,
        compact=True,
        min_cleanable_dirty_ratio=0.0,
    )
    manager = opened_manager(tmp_path, clock, compact)
    log = manager.create("table", 0, compact)
    with held(manager.flusher):
        for r in range(40):
            pairs: list[tuple[bytes | None, bytes | None]] = [
                (f"k{k}".encode(), f"v{k}-{r}".encode()) for k in range(5)
            ]
            append(log, keyed_batch(pairs, timestamp=clock.time_ms()))
        rolled_to = log.segments[-1].base_offset
        assert log.flushes_pending > 1
        [result] = LogCleaner(manager, clock).clean_until_done()
        assert result.end_offset == rolled_to
        names = sorted(p.name for p in log.directory.iterdir())
    assert manager.wait_for_flushes(WAIT_S)
    assert sorted(p.name for p in log.directory.iterdir()) == names  # no old segment came back
    assert log.recovery_point == rolled_to
    expected = records_of(log)
    manager.close()
    reopened = opened_manager(tmp_path, clock, compact)
    table = reopened.get("table", 0)
    assert table is not None and records_of(table) == expected
    reopened.close()


# -- after a crash: recovery from the recovery point only ---------------------------------------


def test_a_crash_recovers_only_what_was_written_after_the_last_flushed_roll(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = opened_manager(tmp_path, clock)
    log = manager.create("t", 0, CONFIG)
    for _ in range(9):  # segments 0, 2, 4, 6, 8
        append(log, make_batch())
    assert manager.wait_for_flushes(WAIT_S)
    assert manager.checkpoint_in_background().wait(WAIT_S)
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 8\n"
    append(log, make_batch())  # the unflushed tail: offsets 8 and 9
    # kill -9: no close, no final flush, no clean-shutdown marker.
    assert manager.wait_for_flushes(WAIT_S)
    for segment in log.segments:
        segment.close()

    recovered: list[tuple[int, int]] = []
    real_recover = LogSegment.recover

    def recording_recover(
        segment: LogSegment, index_interval_bytes: int, recovery_point: int = 0
    ) -> int:
        recovered.append((segment.base_offset, recovery_point))
        return real_recover(segment, index_interval_bytes, recovery_point)

    monkeypatch.setattr(LogSegment, "recover", recording_recover)
    reopened = opened_manager(tmp_path, clock)
    again = reopened.get("t", 0)
    assert again is not None
    # Kafka's rule: from the segment holding the recovery point on (CRCs from the point itself).
    assert recovered == [(8, 8)]
    assert (again.log_end_offset, again.recovery_point) == (10, 8)
    assert [h.base_offset for h in read_all(again)] == list(range(10))
    # The recovered tail is dirty: the next roll flushes it and the recovery point passes it.
    append(again, make_batch())
    assert reopened.wait_for_flushes(WAIT_S)
    assert again.recovery_point == 10
    reopened.close()


def test_a_checkpoint_never_holds_a_recovery_point_not_yet_fsynced(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = opened_manager(tmp_path, clock)
    log = manager.create("t", 0, CONFIG)
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    with held(manager.flusher):
        for _ in range(5):
            append(log, make_batch())
        manager.checkpoint()
        assert checkpoint.read_text() == "0\n1\nt 0 0\n"
    assert manager.wait_for_flushes(WAIT_S)
    manager.checkpoint()
    assert checkpoint.read_text() == "0\n1\nt 0 4\n"
    manager.close()


def test_an_older_background_checkpoint_does_not_overwrite_a_newer_one(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = opened_manager(tmp_path, clock)
    log = manager.create("t", 0, CONFIG)
    for _ in range(3):
        append(log, make_batch())
    starts = tmp_path / "log-start-offset-checkpoint"
    with held(manager.flusher):
        job: BackgroundJob = manager.checkpoint_in_background()  # taken with the start at 0
        log.delete_records_before(2)
        manager.checkpoint()  # DeleteRecords writes at once
        assert starts.read_text() == "0\n1\nt 0 2\n"
    assert job.wait(WAIT_S) and job.succeeded
    assert starts.read_text() == "0\n1\nt 0 2\n"
    manager.close()


# -- flush.ms and clean shutdown ----------------------------------------------------------------


def test_flush_ms_hands_the_whole_log_to_the_flusher(
    tmp_path: Path, clock: ManualClock, fsynced: set[tuple[int, int]]
) -> None:
    config = LogConfig(segment_bytes=2 * BATCH_SIZE, flush_ms=1000)
    manager = opened_manager(tmp_path, clock, config)
    log = manager.create("t", 0, config)
    with held(manager.flusher):
        append(log, make_batch())
        clock.advance(1000)
        manager.flush_due()
        assert log.flushes_pending == 1
        append(log, make_batch())  # after the flush was handed out: not covered by it
        manager.flush_due()  # flushed less than flush.ms ago: nothing more queued
        assert log.flushes_pending == 1
        assert log.recovery_point == 0
    assert manager.wait_for_flushes(WAIT_S)
    assert log.recovery_point == 1
    assert log.segments[-1].dirty  # grew after the flush was handed out
    assert inode(log.segments[-1].log_path) in fsynced
    manager.close()


def test_clean_shutdown_waits_for_pending_flushes_and_flushes_the_rest(
    tmp_path: Path, clock: ManualClock, fsynced: set[tuple[int, int]]
) -> None:
    manager = opened_manager(tmp_path, clock)
    logs = [manager.create("t", p, CONFIG) for p in range(3)]
    for _ in range(7):
        for log in logs:
            append(log, make_batch())
    segments = [s for log in logs for s in log.segments]
    manager.close()  # some roll flushes may still be queued here
    assert manager.flusher.wait_idle(0)
    for segment in segments:
        assert {inode(p) for p in segment_files(segment)} <= fsynced
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == (
        "0\n3\nt 0 7\nt 1 7\nt 2 7\n"
    )
    assert (tmp_path / ".kafka_cleanshutdown").exists()
