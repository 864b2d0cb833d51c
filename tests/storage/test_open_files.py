"""The bounded set of open segment files: reopened on demand, never closed under a user."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager, PartitionLog
from odradek.storage.open_files import OpenFiles

from .conftest import append, headers_of, make_batch


def files_with(tmp_path: Path, count: int) -> list[Path]:
    paths = []
    for i in range(count):
        path = tmp_path / f"{i}.log"
        path.write_bytes(b"%d" % i)
        paths.append(path)
    return paths


def read_through(fd: int) -> bytes:
    return os.pread(fd, 16, 0)


def test_no_more_than_the_capacity_stay_open(tmp_path: Path) -> None:
    files = OpenFiles(capacity=3, clock=ManualClock())
    handles = [files.file(p) for p in files_with(tmp_path, 10)]
    for i, handle in enumerate(handles):
        with handle.use() as fd:
            assert read_through(fd) == b"%d" % i
        assert files.open_count <= 3
    # The least recently used went first, and each reopens when used again.
    assert [h.is_open for h in handles] == [False] * 7 + [True] * 3
    with handles[0].use() as fd:
        assert read_through(fd) == b"0"
    assert not handles[7].is_open


def test_a_file_in_use_is_closed_only_once_let_go(tmp_path: Path) -> None:
    files = OpenFiles(capacity=1, clock=ManualClock())
    first, second = (files.file(p) for p in files_with(tmp_path, 2))
    with first.use() as fd:
        with second.use():
            pass  # evicts the first, which is still in use
        assert first.is_open and read_through(fd) == b"0"
    assert not first.is_open


def test_a_lent_fd_stays_open_until_its_time(tmp_path: Path) -> None:
    clock = ManualClock()
    files = OpenFiles(capacity=1, clock=clock)
    first, second, third = (files.file(p) for p in files_with(tmp_path, 3))
    fd = first.lend(clock.monotonic_ms() + 5_000)
    with second.use():
        pass
    assert first.is_open and read_through(fd) == b"0"
    clock.advance(5_000)
    with third.use():
        pass  # a later use closes what is due
    assert not first.is_open


def test_a_pinned_file_outlives_its_name(tmp_path: Path) -> None:
    files = OpenFiles(capacity=1, clock=ManualClock())
    first, second = (files.file(p) for p in files_with(tmp_path, 2))
    first.pin()
    first.path.unlink()
    with second.use():
        pass
    with first.use() as fd:
        assert read_through(fd) == b"0"
    first.close()
    assert not first.is_open


def test_giving_back_half(tmp_path: Path) -> None:
    files = OpenFiles(capacity=100, clock=ManualClock())
    handles = [files.file(p) for p in files_with(tmp_path, 40)]
    for handle in handles:
        with handle.use():
            pass
    files.give_back_half()
    assert files.capacity == 20
    assert files.open_count == 20


def test_a_closed_file_cannot_be_used(tmp_path: Path) -> None:
    files = OpenFiles(capacity=2, clock=ManualClock())
    handle = files.file(files_with(tmp_path, 1)[0])
    handle.close()
    with pytest.raises(ValueError), handle.use():
        pass


def test_many_logs_under_few_descriptors(tmp_path: Path) -> None:
    """Every log of a manager shares the bound: appends, reads, a clean close and a reopen
    of 60 logs with at most 8 segment files open, and no index file kept open."""
    clock = ManualClock()
    config = LogConfig(segment_bytes=2 * len(make_batch()), index_interval_bytes=0)
    manager = LogManager([tmp_path], clock, open_files=OpenFiles(capacity=8, clock=clock))
    manager.open(lambda topic: config)
    logs = [manager.create("t", p, config) for p in range(60)]
    for round_ in range(5):  # rolls a segment every two batches
        for partition_log in logs:
            append(partition_log, make_batch(timestamp=1000 + round_))
    # The flusher holds the file it fsyncs a rolled segment through, and one evicted while held
    # closes when let go: once it is idle, the bound holds.
    manager.wait_for_flushes()
    assert manager.open_files.open_count <= 8
    assert files_open_under(tmp_path) <= 8 + 2  # the flusher's fds, at most
    for partition_log in logs:
        assert [h.base_offset for h in headers_of(read_log(partition_log))] == list(range(5))
    manager.close()
    reopened = LogManager([tmp_path], clock, open_files=OpenFiles(capacity=8, clock=clock))
    reopened.open(lambda topic: config)
    for p in range(60):
        partition_log = reopened.get("t", p)
        assert partition_log is not None and partition_log.log_end_offset == 5
        assert [h.base_offset for h in headers_of(read_log(partition_log))] == list(range(5))
    reopened.close()


def files_open_under(directory: Path) -> int:
    """This process's descriptors of files below ``directory`` (those other tests left open
    elsewhere, or that close meanwhile, are not counted)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed between the listing and the reading
        if target.startswith(f"{directory}/"):
            count += 1
    return count


def read_log(partition_log: PartitionLog) -> bytes:
    data = b""
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        piece = partition_log.read(offset, 1 << 20)
        assert piece is not None
        chunk = piece.read_bytes()
        data += chunk
        offset = headers_of(chunk)[-1].last_offset + 1
    return data
