"""The aborted transactions of one segment: Kafka's ``.txnindex`` (TransactionIndex)."""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.fileio import pread_upto, pwrite_all

# version int16 (0), producer id int64, first offset int64, last offset int64 (the ABORT marker's),
# last stable offset int64 (the partition's LSO once the marker was appended): 34 bytes.
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Aborted transactions whose ABORT marker lies in one segment, in marker order.

    Format: ``<20-digit base offset>.txnindex``, a sequence of 34-byte big-endian entries (see
    ``_ENTRY``), written only at its end.  The file exists only once a segment holds an ABORT
    marker.  The entries are kept in memory too: a segment holds few aborted transactions.

    Crash: entries reach the page cache on :meth:`append` and the disk with the segment's flush;
    a torn last entry is dropped when the file is read, and the log rebuilds the entries of the
    segments it replays after a crash (:meth:`truncate_to` first, then appends).

    Caller: its :class:`~odradek.storage.segment.LogSegment`, on the event-loop thread; the
    cleaner reads and writes the index of a segment it builds in its own thread.
    """

    def __init__(self, path: Path, *, exists: bool = True) -> None:
        """``exists=False``: the caller listed the directory and the file is not there."""
        self.path = path
        # Loaded on first need; a file known to be missing is not looked for.
        self._entries: list[AbortedTxn] | None = None if exists else []
        self.dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            data = pread_upto(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
        entries = []
        for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, position)
            if version != _VERSION:
                break
            entries.append(AbortedTxn(*fields))
        return entries

    def append(self, entry: AbortedTxn) -> None:
        entries = self.entries
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            pwrite_all(
                fd,
                _ENTRY.pack(
                    _VERSION,
                    entry.producer_id,
                    entry.first_offset,
                    entry.last_offset,
                    entry.last_stable_offset,
                ),
                len(entries) * ENTRY_SIZE,
            )
        finally:
            os.close(fd)
        entries.append(entry)
        self.dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        entries = self.entries
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._entries = keep
        if not keep:
            self.unlink()
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.ftruncate(fd, len(keep) * ENTRY_SIZE)
        finally:
            os.close(fd)
        self.dirty = True

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Entries of transactions that may hold records in ``[fetch_offset, upper_bound)``."""
        return [
            e
            for e in self.entries
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound
        ]

    def flush(self) -> None:
        if not self.dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.dirty = False

    def unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def rename(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, path)
        self.path = path
