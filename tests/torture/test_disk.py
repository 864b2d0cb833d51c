"""A broker's bounded log dir: filled to ENOSPC, freed, and removed (needs root, as a campaign
does)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.torture.disk import BALLAST, BoundedDisk, DiskError, DiskErrors, remove_stale

SIZE = 4 << 20


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[BoundedDisk]:
    assert os.geteuid() == 0, "a bounded disk is a tmpfs mount: root only (as a campaign)"
    bounded = BoundedDisk(tmp_path / "broker-1", SIZE).mount()
    try:
        yield bounded
    finally:
        bounded.unmount()
    assert not bounded.is_mounted()


def test_the_log_dir_is_a_filesystem_of_the_size_asked(disk: BoundedDisk) -> None:
    assert disk.is_mounted()
    assert disk.free_bytes() == SIZE


def test_a_filled_disk_refuses_every_write_until_freed(disk: BoundedDisk) -> None:
    # Whole pages: a write into the rest of a page the file already has would still fit.
    (disk.path / "segment.log").write_bytes(b"x" * 8192)
    held = disk.fill()
    assert held == SIZE - 8192
    assert disk.free_bytes() == 0
    with pytest.raises(OSError) as refused, open(disk.path / "segment.log", "ab") as f:
        f.write(b"y" * 8192)
        f.flush()
    assert refused.value.errno == errno.ENOSPC
    disk.free()
    assert not (disk.path / BALLAST).exists()
    with open(disk.path / "segment.log", "ab") as f:
        f.write(b"y" * 8192)
    assert (disk.path / "segment.log").stat().st_size == 2 * 8192


def test_filling_again_takes_what_was_freed_meanwhile(disk: BoundedDisk) -> None:
    (disk.path / "old.log").write_bytes(b"x" * 100_000)
    disk.fill()
    (disk.path / "old.log").unlink()
    assert disk.free_bytes() > 0
    disk.fill()
    assert disk.free_bytes() == 0


def test_unmounting_removes_everything_on_it(disk: BoundedDisk) -> None:
    (disk.path / "segment.log").write_bytes(b"x")
    disk.fill()
    disk.unmount()
    assert not disk.is_mounted()
    assert list(disk.path.iterdir()) == []


def test_a_file_still_open_does_not_keep_the_filesystem(disk: BoundedDisk) -> None:
    with open(disk.path / "segment.log", "wb"):
        disk.unmount()
        assert not disk.is_mounted()


def test_only_a_mounted_disk_is_filled(tmp_path: Path) -> None:
    with pytest.raises(DiskError):
        BoundedDisk(tmp_path, SIZE).fill()


def test_a_killed_campaigns_filesystems_are_removed_and_no_others(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a process id no process has now
    left = BoundedDisk(tmp_path / "left", SIZE, owner=dead.pid).mount()
    running = BoundedDisk(tmp_path / "running", SIZE).mount()  # this process's: alive
    try:
        left.fill()
        assert left.path in remove_stale()  # (and any other killed campaign's)
        assert not left.is_mounted()
        assert running.is_mounted()
    finally:
        running.unmount()
        if left.is_mounted():
            left.unmount()


WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for line in sys.stdin:
    try:
        os.pwrite(fd, b"x", 0)
        os.fsync(fd)
        print("ok", flush=True)
    except OSError as e:
        print(e.errno, flush=True)
"""


def test_a_failing_disk_answers_writes_and_flushes_eio_until_healthy(tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "segment.log")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdin is not None and writer.stdout is not None

    def write() -> str:
        assert writer.stdin is not None and writer.stdout is not None
        writer.stdin.write("w\n")
        writer.stdin.flush()
        return writer.stdout.readline().strip()

    try:
        assert write() == "ok"
        errors = DiskErrors(writer.pid)
        errors.start()
        try:
            assert write() == str(errno.EIO)
            assert write() == str(errno.EIO)
        finally:
            assert errors.stop() == ""
        assert write() == "ok"  # and the process goes on as before
    finally:
        writer.kill()
        writer.wait()
