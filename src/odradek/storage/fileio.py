"""Small helpers over raw file descriptors; storage never goes through Python's buffered files,
so that a write the broker has acknowledged is in the page cache, not in a process buffer."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from pathlib import Path


def pwrite_all(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def pread_upto(fd: int, size: int, position: int) -> bytes:
    """``size`` bytes at ``position``, fewer only where the file ends."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, position)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        position += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_file(path: Path) -> bytes:
    """The whole of a small file: as ``Path.read_bytes``, without a buffered file object (a
    log opens several small files, and a broker may open tens of thousands of logs)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return pread_upto(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def fsync_directory(path: Path) -> None:
    """Make creations, renames and deletions of entries in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(
    path: Path, data: bytes, *, sync: bool = True, sync_directory: bool = True
) -> None:
    """Replace ``path`` with ``data`` so that after any crash it holds the old or the new bytes.

    With ``sync=False`` nothing is fsynced: a killed process still leaves the old or the new
    file (the page cache keeps the rename), but after a power loss it may be neither, so only
    files that are rebuilt when missing or unreadable are written that way.  With
    ``sync_directory=False`` the file is fsynced but not its directory, for a caller that
    writes several files there and fsyncs the directory once after them."""
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    if sync and sync_directory:
        fsync_directory(path.parent)


def _load_syncfs() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    call: Callable[[int], int] = function
    return call


# syncfs(2): one call commits every dirty page and inode of a file system, where a clean stop
# of a broker with tens of thousands of partitions would otherwise make several fsyncs per
# partition.  Linux only; since Linux 5.8 it reports a writeback error of the file system that
# happened after the descriptor it is given was opened.
_SYNCFS = _load_syncfs()


def open_file_system(path: Path) -> int | None:
    """A descriptor on directory ``path`` for :func:`sync_file_system`, opened before the writes
    it is to make durable (so that it sees their writeback errors); None where the system has no
    syncfs (then the caller fsyncs file by file)."""
    if _SYNCFS is None:
        return None
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def sync_file_system(fd: int) -> None:
    """Make everything written to the file system holding ``fd`` durable (syncfs(2)), as an
    fsync of every file and directory in it would; raises OSError as fsync would."""
    assert _SYNCFS is not None
    if _SYNCFS(fd) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
