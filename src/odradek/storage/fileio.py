"""Small helpers over raw file descriptors; storage never goes through Python's buffered files,
so that a write the broker has acknowledged is in the page cache, not in a process buffer."""

from __future__ import annotations

import os
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
