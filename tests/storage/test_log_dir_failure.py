"""A log dir whose disk fails goes offline; the other dirs go on; a restart brings it back."""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.storage import LogConfig, LogManager, PartitionLog, fileio
from odradek.storage import manager as manager_module
from odradek.storage import segment as segment_module
from odradek.storage.formats import CLEAN_SHUTDOWN_MARKER
from odradek.storage.log_dir_failure import KafkaStorageError, LogDirFailureChannel

from .conftest import FLUSHER_WAIT_S, append, make_batch, read_all

CONFIG = LogConfig(segment_bytes=1 << 20)


def two_dirs(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "full", tmp_path / "healthy"


def open_two(tmp_path: Path, clock: ManualClock) -> tuple[LogManager, PartitionLog, PartitionLog]:
    """A manager over two dirs with ``a-0`` in the first and ``b-0`` in the second."""
    manager = LogManager(list(two_dirs(tmp_path)), clock)
    manager.open(lambda topic: CONFIG)
    a = manager.get("a", 0) or manager.create("a", 0, CONFIG)
    b = manager.get("b", 0) or manager.create("b", 0, CONFIG)
    assert a.directory.parent == two_dirs(tmp_path)[0]
    assert b.directory.parent == two_dirs(tmp_path)[1]
    return manager, a, b


def heard(channel: LogDirFailureChannel) -> list[Path]:
    seen: list[Path] = []
    channel.add_listener(lambda log_dir, reason: seen.append(log_dir))
    return seen


def disk_full_after(
    monkeypatch: pytest.MonkeyPatch, fraction: float
) -> Callable[[int, bytes | bytearray | memoryview, int], None]:
    """Segment writes that put ``fraction`` of their bytes on disk, then fail with ENOSPC."""

    def write(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
        view = memoryview(data)
        os.pwrite(fd, view[: int(len(view) * fraction)], position)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_module, "pwrite_all", write)
    return write


def test_a_full_disk_takes_only_its_dir_offline_and_a_restart_brings_it_back(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, healthy = two_dirs(tmp_path)
    manager, a, b = open_two(tmp_path, clock)
    offline = heard(manager.failures)
    acknowledged = [append(a, make_batch(3)).first_offset for _ in range(4)]
    assert acknowledged == [0, 3, 6, 9]
    append(b, make_batch(2))

    with monkeypatch.context() as disk_full:
        disk_full_after(disk_full, 0.5)
        with pytest.raises(KafkaStorageError) as refused:
            append(a, make_batch(3))
    assert refused.value.code == ErrorCode.kafka_storage_error
    assert offline == [full]
    assert manager.online_dirs() == [healthy]
    assert a.offline and not b.offline
    # Nothing more is written to or read from the offline dir, even with space back.
    for call in (lambda: append(a, make_batch(1)), lambda: a.read(0, 1 << 20), a.flush):
        with pytest.raises(KafkaStorageError):
            call()
    assert a.log_end_offset == 12  # the failed append took no offsets
    # The healthy dir goes on, new partitions go there, and the failure is heard once.
    assert append(b, make_batch(2)).first_offset == 2
    assert manager.create("c", 0, CONFIG).directory.parent == healthy
    manager.checkpoint()
    assert offline == [full]

    manager.close()
    assert not (full / CLEAN_SHUTDOWN_MARKER).exists()  # so the next open recovers it
    assert (healthy / CLEAN_SHUTDOWN_MARKER).exists()

    manager, a, b = open_two(tmp_path, clock)
    try:
        assert manager.online_dirs() == [full, healthy]
        assert [h.base_offset for h in read_all(a)] == acknowledged
        assert [h.base_offset for h in read_all(b)] == [0, 2]
        assert append(a, make_batch(1)).first_offset == 12
    finally:
        manager.close()


def test_a_torn_batch_the_failed_append_could_not_cut_is_cut_by_recovery(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager, a, _ = open_two(tmp_path, clock)
    append(a, make_batch(2))
    size = a.segments[-1].size

    def cannot_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as failing:
        disk_full_after(failing, 0.7)
        failing.setattr(segment_module.os, "ftruncate", cannot_truncate)
        with pytest.raises(KafkaStorageError):
            append(a, make_batch(5))
    assert a.segments[-1].log_path.stat().st_size > size  # the torn bytes are on disk
    manager.close()

    manager, a, _ = open_two(tmp_path, clock)
    try:
        assert [h.base_offset for h in read_all(a)] == [0]
        assert a.segments[-1].log_path.stat().st_size == size
    finally:
        manager.close()


def test_a_failed_background_fsync_takes_the_dir_offline(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, healthy = two_dirs(tmp_path)
    manager, a, b = open_two(tmp_path, clock)
    offline = heard(manager.failures)
    append(a, make_batch(1))
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if threading.current_thread().name.startswith("odradek-log-flusher"):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    with monkeypatch.context() as failing:
        failing.setattr(os, "fsync", fsync)
        assert a.flush_in_background()
        assert manager.wait_for_flushes(FLUSHER_WAIT_S)
    assert a.recovery_point == 0  # taking in the failed flush
    assert offline == [full]
    with pytest.raises(KafkaStorageError):
        append(a, make_batch(1))
    append(b, make_batch(1))
    manager.close()
    assert (healthy / CLEAN_SHUTDOWN_MARKER).exists()
    assert not (full / CLEAN_SHUTDOWN_MARKER).exists()


def test_a_checkpoint_that_cannot_be_written_takes_only_that_dir_offline(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, healthy = two_dirs(tmp_path)
    manager, a, b = open_two(tmp_path, clock)
    real_write = manager_module.write_checkpoint

    def write(path: Path, entries: dict[tuple[str, int], int]) -> None:
        if path.parent == full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(path, entries)

    append(a, make_batch(1))
    append(b, make_batch(1))
    b.flush()
    with monkeypatch.context() as failing:
        failing.setattr(manager_module, "write_checkpoint", write)
        manager.checkpoint()
    assert manager.online_dirs() == [healthy]
    assert "b 0 1" in (healthy / "recovery-point-offset-checkpoint").read_text()
    manager.close()


def test_running_out_of_descriptors_is_not_a_log_dir_failure(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager, a, _ = open_two(tmp_path, clock)

    def write(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    with monkeypatch.context() as failing:
        failing.setattr(segment_module, "pwrite_all", write)
        with pytest.raises(OSError) as raised:
            append(a, make_batch(1))
    assert not isinstance(raised.value, KafkaStorageError)
    assert manager.online_dirs() == list(two_dirs(tmp_path))
    assert append(a, make_batch(1)).first_offset == 0
    manager.close()


def test_a_dir_that_cannot_be_opened_is_offline_and_the_others_open(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, healthy = two_dirs(tmp_path)
    manager, a, b = open_two(tmp_path, clock)
    append(a, make_batch(1))
    append(b, make_batch(1))
    manager.close()
    real_read = manager_module.read_checkpoint

    def read(path: Path) -> dict[tuple[str, int], int]:
        if path.parent == full:
            raise OSError(errno.EIO, "Input/output error")
        return real_read(path)

    monkeypatch.setattr(manager_module, "read_checkpoint", read)
    manager = LogManager([full, healthy], clock)
    manager.open(lambda topic: CONFIG)
    assert manager.online_dirs() == [healthy]
    assert manager.get("a", 0) is None
    b = manager.get("b", 0)
    assert b is not None and [h.base_offset for h in read_all(b)] == [0]
    manager.close()

    nothing = LogManager([full], clock)
    with pytest.raises(KafkaStorageError, match="every log dir is offline"):
        nothing.open(lambda topic: CONFIG)


def test_no_log_is_created_afresh_for_a_partition_in_a_dir_offline_since_open(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, healthy = two_dirs(tmp_path)
    manager, a, _ = open_two(tmp_path, clock)
    append(a, make_batch(1))
    manager.close()
    real_read = manager_module.read_checkpoint

    def read(path: Path) -> dict[tuple[str, int], int]:
        if path.parent == full:
            raise OSError(errno.EIO, "Input/output error")
        return real_read(path)

    with monkeypatch.context() as failing:
        failing.setattr(manager_module, "read_checkpoint", read)
        manager = LogManager([full, healthy], clock)
        manager.open(lambda topic: CONFIG)
    with pytest.raises(KafkaStorageError):
        manager.create("a", 0, CONFIG)
    assert manager.create("new", 0, CONFIG).directory.parent == healthy
    # Held offline instead: a stand-in that refuses every call and writes nothing.
    stand_in = manager.hold_offline("a", 0, CONFIG)
    assert stand_in is not None and stand_in.offline
    assert stand_in.directory == full / "a-0" and manager.get("a", 0) is stand_in
    with pytest.raises(KafkaStorageError) as refused:
        append(stand_in, make_batch(1))
    assert refused.value.code == ErrorCode.kafka_storage_error
    stand_in.assign_epoch_start_offset(1, 0)
    assert stand_in.log_end_offset == 0 and stand_in.latest_epoch is None
    assert manager.hold_offline("new", 1, CONFIG) is None  # never in the failed dir
    manager.close()
    assert (full / "a-0" / "00000000000000000000.log").stat().st_size > 0

    manager, a, _ = open_two(tmp_path, clock)  # the dir is healthy again: a-0 is back
    try:
        assert [h.base_offset for h in read_all(a)] == [0]
    finally:
        manager.close()


def test_deleting_a_partition_of_an_offline_dir_leaves_its_files_for_after_the_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    full, _ = two_dirs(tmp_path)
    manager, a, _ = open_two(tmp_path, clock)
    append(a, make_batch(1))
    manager.failures.mark_offline(full, "a test")
    manager.delete("a", 0)
    assert manager.get("a", 0) is None and a.closed
    assert (full / "a-0").is_dir()
    manager.close()


@pytest.mark.parametrize("syncfs", [True, False], ids=["syncfs", "fsync-each-file"])
def test_an_fsync_failing_at_a_clean_stop_leaves_that_dir_to_recovery(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, syncfs: bool
) -> None:
    if syncfs and fileio._SYNCFS is None:
        pytest.skip("no syncfs here")
    full, healthy = two_dirs(tmp_path)
    manager, a, b = open_two(tmp_path, clock)
    append(a, make_batch(2))
    append(b, make_batch(2))
    real_fsync = os.fsync
    real_syncfs = fileio._SYNCFS

    def in_full(fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}").startswith(str(full))

    def fsync(fd: int) -> None:
        if in_full(fd):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    def failing_syncfs(fd: int) -> int:
        assert real_syncfs is not None
        if in_full(fd):
            ctypes.set_errno(errno.EIO)
            return -1
        return real_syncfs(fd)

    with monkeypatch.context() as failing:
        failing.setattr(os, "fsync", fsync)
        failing.setattr(fileio, "_SYNCFS", failing_syncfs if syncfs else None)
        manager.close()
    assert manager.online_dirs() == [healthy]
    assert not (full / CLEAN_SHUTDOWN_MARKER).exists()
    assert (healthy / CLEAN_SHUTDOWN_MARKER).exists()

    manager, a, b = open_two(tmp_path, clock)
    try:
        assert [h.base_offset for h in read_all(a)] == [0]
        assert [h.base_offset for h in read_all(b)] == [0]
    finally:
        manager.close()
