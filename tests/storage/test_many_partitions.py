"""A log manager holding many partitions: made in batches, stopped cleanly (one sync of the file
system per log dir where the system has syncfs) or not at all, and opened again with every record
where it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager, fileio
from odradek.storage import log as log_module
from odradek.storage.formats import CLEAN_SHUTDOWN_MARKER, RECOVERY_POINT_CHECKPOINT

from .conftest import BATCH_SIZE, append, make_batch, read_all

TOPICS = 4
PER_TOPIC = 50  # 200 logs: enough for every open and close worker to take many
CONFIG = LogConfig(segment_bytes=3 * BATCH_SIZE, index_interval_bytes=BATCH_SIZE)


def two_dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "a", tmp_path / "b"]


def opened(log_dirs: list[Path], clock: ManualClock) -> LogManager:
    manager = LogManager(log_dirs, clock)
    manager.open(lambda topic: CONFIG)
    return manager


def fill(manager: LogManager) -> dict[tuple[str, int], int]:
    """Make every log in batches of a topic, as a creation does, and append to each a number
    of batches of its own (some roll); returns how many each got."""
    written: dict[tuple[str, int], int] = {}
    for t in range(TOPICS):
        topic = f"t{t}"
        for partition_log in manager.prepare(topic, list(range(PER_TOPIC)), CONFIG, leader_epoch=0):
            manager.add(partition_log)
            count = 1 + (partition_log.partition + t) % 5
            for _ in range(count):
                append(partition_log, make_batch())
            written[(topic, partition_log.partition)] = count
    return written


def assert_holds(manager: LogManager, written: dict[tuple[str, int], int]) -> None:
    assert {(p.topic, p.partition) for p in manager.all_logs()} == set(written)
    for (topic, partition), count in written.items():
        partition_log = manager.get(topic, partition)
        assert partition_log is not None
        assert [h.base_offset for h in read_all(partition_log)] == list(range(count))
        assert partition_log.leader_epochs[0].epoch == 0


@pytest.fixture(params=["syncfs", "fsync-each-file"])
def sync_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with the clean stop's one sync per file system, and without it (a system
    that has no syncfs: every log fsyncs its own files)."""
    kind: str = request.param
    if kind == "syncfs" and fileio._SYNCFS is None:
        pytest.skip("no syncfs here")
    if kind == "fsync-each-file":
        monkeypatch.setattr(fileio, "_SYNCFS", None)
    return kind


def test_a_clean_stop_of_many_logs_keeps_every_record_and_reopens_them_clean(
    tmp_path: Path, clock: ManualClock, sync_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = two_dirs(tmp_path)
    manager = opened(dirs, clock)
    written = fill(manager)
    synced: list[str] = []
    real_syncfs = fileio._SYNCFS
    if real_syncfs is not None:

        def recording_syncfs(fd: int) -> int:
            assert real_syncfs is not None
            # Every log has written what it had left before its dir is synced, and the
            # checkpoint and the clean-shutdown marker come only after.
            assert not manager.all_logs() or all(p.closed for p in manager.all_logs())
            directory = Path(os.readlink(f"/proc/self/fd/{fd}"))
            assert not (directory / CLEAN_SHUTDOWN_MARKER).exists()
            synced.append(directory.name)
            return real_syncfs(fd)

        monkeypatch.setattr(fileio, "_SYNCFS", recording_syncfs)
    manager.close()
    assert sorted(synced) == (["a", "b"] if sync_kind == "syncfs" else [])
    for log_dir in dirs:
        assert (log_dir / CLEAN_SHUTDOWN_MARKER).exists()
        # Every log's recovery point is its log end: the next open rereads nothing.
        points = (log_dir / RECOVERY_POINT_CHECKPOINT).read_text().splitlines()[2:]
        assert points
        for line in points:
            topic, partition, offset = line.split()
            assert int(offset) == written[(topic, int(partition))]

    manager = opened(dirs, clock)
    try:
        assert_holds(manager, written)
    finally:
        manager.close()


def test_many_logs_never_closed_are_recovered_with_every_record(
    tmp_path: Path, clock: ManualClock, sync_kind: str
) -> None:
    dirs = two_dirs(tmp_path)
    manager = opened(dirs, clock)
    written = fill(manager)
    manager.checkpoint()
    # A killed broker: nothing closed, nothing flushed but what the rolls handed the flusher.
    assert manager.wait_for_flushes(30)
    assert not any((d / CLEAN_SHUTDOWN_MARKER).exists() for d in dirs)

    manager = opened(dirs, clock)
    try:
        assert_holds(manager, written)
        for partition_log in manager.all_logs():
            append(partition_log, make_batch())
    finally:
        manager.close()
    manager = opened(dirs, clock)
    try:
        assert_holds(manager, {key: count + 1 for key, count in written.items()})
    finally:
        manager.close()


def test_the_manager_hands_out_the_retired_segments_of_every_log_that_has_them(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=BATCH_SIZE, retention_ms=1000, file_delete_delay_ms=500)
    manager = LogManager([tmp_path], clock)
    manager.open(lambda topic: config)
    try:
        logs = [manager.create("t", p, config) for p in range(10)]
        for partition_log in logs[:3]:
            for _ in range(3):
                append(partition_log, make_batch(timestamp=clock.time_ms()))
        clock.advance(1001)
        assert manager.apply_retention() == 6
        assert manager.take_retired() == []  # not due before file.delete.delay.ms
        clock.advance(500)
        retired = manager.take_retired()
        assert sorted((s.directory.name, s.base_offset) for s in retired) == [
            (f"t-{p}", offset) for p in range(3) for offset in (0, 1)
        ]
        for segment in retired:
            segment.close()
        assert manager.take_retired() == []
        # A log that retires segments later is visited again.
        append(logs[5], make_batch(timestamp=clock.time_ms()))
        append(logs[5], make_batch(timestamp=clock.time_ms()))
        clock.advance(1001)
        assert manager.apply_retention() == 1
        clock.advance(500)
        assert [(s.directory.name, s.base_offset) for s in manager.take_retired()] == [("t-5", 0)]
    finally:
        manager.close()


def test_a_clean_stop_rewrites_nothing_of_a_log_unchanged_since_it_opened(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(log_module, "SNAPSHOTLESS_LOG_BYTES", -1)  # every log gets snapshots
    manager = opened([tmp_path], clock)
    idle, busy = (manager.create("t", p, CONFIG) for p in range(2))
    append(idle, make_batch())
    append(busy, make_batch())
    manager.close()
    snapshots = {p: tmp_path / f"t-{p}" / f"{1:020d}.snapshot" for p in range(2)}
    first = {p: path.stat().st_ino for p, path in snapshots.items()}
    epochs = tmp_path / "t-0" / "leader-epoch-checkpoint"
    epochs_inode = epochs.stat().st_ino

    manager = opened([tmp_path], clock)
    busy = manager.get("t", 1)
    assert busy is not None
    append(busy, make_batch())
    manager.close()
    # The idle log's snapshot at its log end is the one the first stop wrote; the busy log's
    # log end moved, and its new snapshot is there.
    assert snapshots[0].stat().st_ino == first[0]
    assert (tmp_path / "t-1" / f"{2:020d}.snapshot").exists()
    # Nor its leader epochs, which the open left as they were.
    assert epochs.stat().st_ino == epochs_inode

    # Killed after opening: the next clean stop writes the snapshot again (what a recovered
    # log opened from may not be durable).
    manager = opened([tmp_path], clock)
    manager = opened([tmp_path], clock)
    manager.close()
    assert snapshots[0].stat().st_ino != first[0]


def test_small_logs_without_producers_stop_and_start_with_few_files(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A clean stop of a small log no producer wrote to makes no snapshot, no empty index file
    and writes its epochs once; opening it again writes nothing, and every record is there,
    after a clean stop and after a kill."""
    manager = opened([tmp_path], clock)
    made = manager.prepare("t", [0, 1], CONFIG, leader_epoch=0)
    for partition_log in made:
        manager.add(partition_log)
    append(made[0], make_batch())
    manager.close()
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == [
        f"{0:020d}.log",
        "leader-epoch-checkpoint",
    ]
    assert sorted(p.name for p in (tmp_path / "t-1").iterdir()) == [
        f"{0:020d}.log",
        "leader-epoch-checkpoint",
    ]
    before = {p: p.stat().st_mtime_ns for p in tmp_path.glob("t-*/*")}
    manager = opened([tmp_path], clock)
    for partition_log in manager.all_logs():
        partition_log.assign_epoch_start_offset(0, partition_log.log_end_offset)  # make_leader
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("t-*/*")} == before
    first = manager.get("t", 0)
    assert first is not None
    assert [h.base_offset for h in read_all(first)] == [0]
    assert first.producers.is_empty
    append(first, make_batch())
    manager.checkpoint()
    # kill -9: reopened without a clean stop, the logs recover from their recovery points.
    manager = opened([tmp_path], clock)
    first = manager.get("t", 0)
    assert first is not None
    assert [h.base_offset for h in read_all(first)] == [0, 1]
    assert first.leader_epochs[0].epoch == 0
    manager.close()
