"""The two sparse indexes of a segment, kept in memory and written to their files in batches."""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from odradek.storage.fileio import pwrite_all, read_file
from odradek.storage.formats import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY


class _IndexFile:
    """The file side shared by both indexes: entries live in memory and reach the file in
    batches, by :meth:`write_pending` (when the segment is flushed, sealed, renamed or closed),
    so an index holds no file descriptor between those calls.

    The file is therefore a prefix of the index in memory, or (after a truncation not yet
    written) a longer, stale version of it, until the next write.  Both are safe: a prefix only
    makes :meth:`LogSegment.load` scan more batch headers after the last entry, and a segment
    whose index file may be stale is never trusted after a crash (it lies past the recovery
    point, which only a flush moves, and a flush writes the index first).  An index without
    entries has no file: none is created for it (a broker with many small partitions would
    otherwise make two empty files per partition), and a missing file reads as the empty
    prefix.
    """

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.entry.size)
        # Entries below _written are in the file; with _stale the file may hold more after them
        # (a truncation, or a torn entry), to be cut at the next write.
        self._written = 0
        self._stale = False
        self._exists = False
        self._deleted = False
        # What open() found on disk, for problem(): a missing file or a torn last entry.
        self._missing = False
        self._torn = False

    def __len__(self) -> int:
        raise NotImplementedError

    def _pack_from(self, start: int) -> bytes:
        raise NotImplementedError

    def _load(self, exists: bool) -> list[tuple[int, int]]:
        if not exists:  # the caller listed the directory: no system call to learn it again
            self._missing = True
            return []
        try:
            data = read_file(self.path)
        except FileNotFoundError:
            self._missing = True
            return []
        self._exists = True
        whole = len(data) - len(data) % self.entry.size
        self._torn = self._stale = whole != len(data)
        entries = [(a, b) for a, b in self.entry.iter_unpack(memoryview(data)[:whole])]
        self._written = len(entries)
        return entries

    def _truncated(self, count: int) -> None:
        """The index in memory now has ``count`` entries."""
        if count < self._written:
            self._written = count
            self._stale = True
        # The file will be rewritten from the entries in memory, whatever open() found in it.
        self._missing = self._torn = False

    @property
    def pending(self) -> bool:
        """Whether the file lags behind the index in memory."""
        return not self._deleted and (
            self._written != len(self) or self._stale or (not self._exists and len(self) > 0)
        )

    @property
    def missing(self) -> bool:
        """Whether opening found no file (read as empty)."""
        return self._missing

    def write_pending(self, *, sync: bool = False) -> None:
        """Bring the file up to the index in memory (creating it if missing), with one open,
        one write and one close; ``sync`` fsyncs it too."""
        if self._deleted or not (self.pending or (sync and self._exists)):
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if self._stale:
                os.ftruncate(fd, self._written * self.entry.size)
            count = len(self)
            if count > self._written:
                pwrite_all(fd, self._pack_from(self._written), self._written * self.entry.size)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._written = count
        self._exists = True
        self._stale = self._missing = self._torn = False

    def flush(self) -> None:
        self.write_pending(sync=True)

    def release(self) -> None:
        """Write what is pending: the segment is sealed, renamed or closed."""
        self.write_pending()

    def delete(self) -> None:
        self._deleted = True
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """Sparse map from offset to byte position in one segment's ``.log`` file.

    Format: ``<base>.index``, entries of :data:`~odradek.storage.formats.OFFSET_INDEX_ENTRY`
    (the last offset of a batch relative to the base offset, and the batch's position).  The whole
    index is held in memory for lookups, and written to its file in batches (see
    :class:`_IndexFile`), which keeps no descriptor open: Kafka memory-maps its indexes for the
    same reason, a broker with tens of thousands of partitions.  Crash: the file holds entries
    up to the last write, each written after the log bytes it points at, so a killed process
    leaves entries that point at real batches (a prefix of the index, or stale entries of a
    segment past the recovery point, which recovery rebuilds); an OS crash may leave a torn or
    stale file, which :meth:`problem` detects when the log opens, and the segment then rebuilds
    the index.  Caller: its :class:`LogSegment` only, on one thread at a time.
    """

    entry = OFFSET_INDEX_ENTRY

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self._offsets = array("i")
        self._positions = array("i")

    @classmethod
    def open(
        cls, path: Path, base_offset: int, max_bytes: int, *, exists: bool = True
    ) -> OffsetIndex:
        """The index in ``path``; ``exists=False``: the caller knows there is no file."""
        index = cls(path, base_offset, max_bytes)
        for relative_offset, position in index._load(exists):
            index._offsets.append(relative_offset)
            index._positions.append(position)
        return index

    def __len__(self) -> int:
        return len(self._offsets)

    def _pack_from(self, start: int) -> bytes:
        pack = self.entry.pack
        return b"".join(
            pack(o, p) for o, p in zip(self._offsets[start:], self._positions[start:], strict=True)
        )

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    @property
    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._offsets[-1] if self._offsets else -1

    def problem(self, log_size: int) -> str | None:
        """Why this index cannot be trusted for a log file of ``log_size`` bytes, if it cannot."""
        if self._torn:
            return "index file size is not a multiple of the entry size"
        previous_offset = previous_position = -1
        for relative_offset, position in zip(self._offsets, self._positions, strict=True):
            if relative_offset <= previous_offset or position <= previous_position:
                return "index entries do not increase"
            if position >= log_size:
                return f"index entry points at position {position}, past the log's {log_size} bytes"
            previous_offset, previous_position = relative_offset, position
        return None

    def append(self, offset: int, position: int) -> None:
        relative_offset = offset - self.base_offset
        if self._offsets and (
            relative_offset <= self._offsets[-1] or position <= self._positions[-1]
        ):
            raise ValueError(f"index entry for offset {offset} does not follow the last one")
        self._offsets.append(relative_offset)
        self._positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of a batch at or before the first batch holding an offset >= ``offset``."""
        slot = bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[slot] if slot >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of offsets >= ``offset``."""
        keep = bisect_right(self._offsets, offset - self.base_offset - 1)
        del self._offsets[keep:]
        del self._positions[keep:]
        self._truncated(keep)

    def reset(self) -> None:
        self.truncate_to(self.base_offset)


class TimeIndex(_IndexFile):
    """Sparse map from timestamp to offset for one segment.

    Format: ``<base>.timeindex``, entries of :data:`~odradek.storage.formats.TIME_INDEX_ENTRY`:
    the largest timestamp seen so far in the segment and the (relative) last offset of the batch
    that carries it; an entry is appended only when that timestamp grows, so both columns grow.
    When the segment stops being active a last entry records its final largest timestamp, which
    is how an inactive segment knows its largest timestamp without being read.  Crash: as for
    :class:`OffsetIndex`.  Caller: its :class:`LogSegment` only.
    """

    entry = TIME_INDEX_ENTRY

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self._timestamps = array("q")
        self._offsets = array("i")

    @classmethod
    def open(
        cls, path: Path, base_offset: int, max_bytes: int, *, exists: bool = True
    ) -> TimeIndex:
        """The index in ``path``; ``exists=False``: the caller knows there is no file."""
        index = cls(path, base_offset, max_bytes)
        for timestamp, relative_offset in index._load(exists):
            index._timestamps.append(timestamp)
            index._offsets.append(relative_offset)
        return index

    def __len__(self) -> int:
        return len(self._timestamps)

    def _pack_from(self, start: int) -> bytes:
        pack = self.entry.pack
        return b"".join(
            pack(t, o) for t, o in zip(self._timestamps[start:], self._offsets[start:], strict=True)
        )

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """``(timestamp, absolute offset)`` of the last entry."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def problem(self, next_offset: int) -> str | None:
        """Why this index cannot be trusted for a segment ending before ``next_offset``."""
        if self._torn:
            return "time index file size is not a multiple of the entry size"
        previous_timestamp = previous_offset = -1
        for timestamp, relative_offset in zip(self._timestamps, self._offsets, strict=True):
            if timestamp <= previous_timestamp or relative_offset < previous_offset:
                return "time index entries do not increase"
            if self.base_offset + relative_offset >= next_offset:
                return "time index entry points past the segment's last offset"
            previous_timestamp, previous_offset = timestamp, relative_offset
        return None

    def maybe_append(self, timestamp: int, offset: int, *, force: bool = False) -> None:
        """Record ``timestamp`` at ``offset`` if it is a new largest; ``force`` ignores fullness
        (for the last entry a segment writes when it stops being active)."""
        if timestamp <= (self._timestamps[-1] if self._timestamps else -1):
            return
        if self.is_full and not force:
            return
        relative_offset = offset - self.base_offset
        self._timestamps.append(timestamp)
        self._offsets.append(relative_offset)

    def lookup(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is <= ``timestamp``, if any.

        Every batch up to and including the one ending at that offset has timestamps <= the
        entry's, and all batches before it have smaller ones, so the first record at or after
        ``timestamp`` cannot be in a batch before it.
        """
        slot = bisect_right(self._timestamps, timestamp) - 1
        return self.base_offset + self._offsets[slot] if slot >= 0 else None

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of offsets >= ``offset``."""
        relative_offset = offset - self.base_offset
        keep = len(self._offsets)
        while keep and self._offsets[keep - 1] >= relative_offset:
            keep -= 1
        del self._timestamps[keep:]
        del self._offsets[keep:]
        self._truncated(keep)

    def reset(self) -> None:
        self.truncate_to(self.base_offset)
