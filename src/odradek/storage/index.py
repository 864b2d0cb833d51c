"""The two sparse indexes of a segment, kept in memory and appended to their files."""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from odradek.storage.fileio import pwrite_all
from odradek.storage.formats import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY


class _IndexFile:
    """The file side shared by both indexes: an fd opened when first needed, entry-sized writes."""

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_bytes // self.entry.size)
        self._fd: int | None = None
        # What open() found on disk, for problem(): a missing file or a torn last entry.
        self._missing = False
        self._torn = False

    def _load(self) -> list[tuple[int, int]]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._missing = True
            return []
        whole = len(data) - len(data) % self.entry.size
        self._torn = whole != len(data)
        return [(a, b) for a, b in self.entry.iter_unpack(memoryview(data)[:whole])]

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _write_entry(self, count_before: int, *fields: int) -> None:
        pwrite_all(self._file(), self.entry.pack(*fields), count_before * self.entry.size)

    def _truncate_file(self, count: int) -> None:
        os.ftruncate(self._file(), count * self.entry.size)
        self._missing = self._torn = False

    def flush(self) -> None:
        os.fsync(self._file())

    def release(self) -> None:
        """Close the fd; an inactive segment's index is only read, and that from memory."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.release()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """Sparse map from offset to byte position in one segment's ``.log`` file.

    Format: ``<base>.index``, entries of :data:`~odradek.storage.formats.OFFSET_INDEX_ENTRY`
    (the last offset of a batch relative to the base offset, and the batch's position), appended
    as the segment grows; the whole index is also held in memory for lookups.  Crash: an entry is
    written after the log bytes it points at, so a killed process leaves entries that point at
    real batches; an OS crash may leave a torn or stale file, which :meth:`problem` detects when
    the log opens, and the segment then rebuilds the index.  Caller: its :class:`LogSegment` only.
    """

    entry = OFFSET_INDEX_ENTRY

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        super().__init__(path, base_offset, max_bytes)
        self._offsets = array("i")
        self._positions = array("i")

    @classmethod
    def open(cls, path: Path, base_offset: int, max_bytes: int) -> OffsetIndex:
        index = cls(path, base_offset, max_bytes)
        for relative_offset, position in index._load():
            index._offsets.append(relative_offset)
            index._positions.append(position)
        return index

    def __len__(self) -> int:
        return len(self._offsets)

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
        if self._missing:
            return "index file is missing"
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
        self._write_entry(len(self._offsets), relative_offset, position)
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
        self._truncate_file(keep)

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
    def open(cls, path: Path, base_offset: int, max_bytes: int) -> TimeIndex:
        index = cls(path, base_offset, max_bytes)
        for timestamp, relative_offset in index._load():
            index._timestamps.append(timestamp)
            index._offsets.append(relative_offset)
        return index

    def __len__(self) -> int:
        return len(self._timestamps)

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
        if self._missing:
            return "time index file is missing"
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
        self._write_entry(len(self._timestamps), timestamp, relative_offset)
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
        self._truncate_file(keep)

    def reset(self) -> None:
        self.truncate_to(self.base_offset)
