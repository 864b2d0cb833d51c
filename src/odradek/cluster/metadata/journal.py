"""The local metadata store's journal: one framed record per change, appended to a file.

Format of ``odradek-metadata.journal``: records one after the other, each

    length   uint32, big-endian: bytes of the payload
    crc      uint32, big-endian: CRC-32C of the payload
    payload  ``length`` bytes: one change, a UTF-8 JSON object (its fields are the store's)

and nothing else (no file header: an empty file is an empty journal). A record is appended whole
with one ``write`` and then ``fdatasync``\\ ed; a change is acknowledged only after that.

Crash: a write cut short (a crash or power loss mid-append, a full disk) leaves a torn record at
the end: fewer bytes than a header, a length past the end of the file, or a payload whose CRC
does not match. :func:`read_records` stops at the first such record and says where the good
records end; the store truncates the file there before it appends again, so a torn record is
never followed by good ones. What is lost is at most the change being written, which no caller
was told had happened. Compaction (the store's snapshot) is not this module's business.

Caller: :class:`~odradek.cluster.metadata.store.LocalMetadataStore`, on the thread that owns it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

# length (uint32), CRC-32C of the payload (uint32)
RECORD_HEADER = struct.Struct(">II")


def frame(payload: bytes) -> bytes:
    """One record: header and payload."""
    return RECORD_HEADER.pack(len(payload), crc32c.crc32c(payload)) + payload


@dataclass(frozen=True, slots=True)
class JournalContents:
    """The good records of a journal file and where they end (``torn`` when bytes follow)."""

    payloads: list[bytes]
    good_end: int
    size: int

    @property
    def torn(self) -> bool:
        return self.good_end < self.size


def parse_records(data: bytes) -> JournalContents:
    """The records of ``data`` up to the first torn one."""
    payloads: list[bytes] = []
    position = 0
    end = len(data)
    while end - position >= RECORD_HEADER.size:
        length, crc = RECORD_HEADER.unpack_from(data, position)
        start = position + RECORD_HEADER.size
        if length > end - start:
            break
        payload = data[start : start + length]
        if crc32c.crc32c(payload) != crc:
            break
        payloads.append(payload)
        position = start + length
    return JournalContents(payloads, position, end)


def read_records(path: Path) -> JournalContents:
    """The records of the journal at ``path`` (none if it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return JournalContents([], 0, 0)
    return parse_records(data)


class JournalFile:
    """The journal at ``path``, open for appending (created if missing) until :meth:`close`.
    Held open so that a change needs no new descriptor (a broker out of descriptors still
    records it)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # A FileIO, not a bare descriptor: a store dropped without close() still lets it go.
        self._file = open(path, "ab", buffering=0)  # noqa: SIM115 - held for the store's life

    def append(self, payload: bytes) -> int:
        """Append one record and fdatasync it; returns the file's new size. On an error the
        file is cut back to where the record began (best effort) so that no torn record stays
        in front of later ones, and the error is raised."""
        record = frame(payload)
        fd = self._file.fileno()
        before = os.fstat(fd).st_size
        try:
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view) :]
            os.fdatasync(fd)
        except OSError:
            # Failing that, the next open reads up to the torn record and truncates there.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
            raise
        return before + len(record)

    def truncate(self, size: int) -> None:
        """Cut the journal to ``size`` bytes, durably (a torn tail, or after a compaction)."""
        fd = self._file.fileno()
        os.ftruncate(fd, size)
        os.fsync(fd)

    def close(self) -> None:
        self._file.close()
