"""One segment of a partition log: a ``.log`` file of batches and its two indexes."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Container, Iterator, Sequence
from pathlib import Path

from odradek.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_TIMESTAMP,
    BatchHeader,
    crc_of,
    read_header,
)
from odradek.storage.fileio import pread_upto, pwrite_all
from odradek.storage.formats import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file_name,
)
from odradek.storage.index import OffsetIndex, TimeIndex
from odradek.storage.open_files import OpenFiles, SegmentFile
from odradek.storage.txn_index import TransactionIndex

log = logging.getLogger(__name__)

# Headers of small batches are read in chunks of this size, so that one pread yields several;
# after a batch bigger than _BIG_BATCH only the next header is read, so that a scan over big
# batches (a Fetch finding batch boundaries) does not copy their bodies into memory.
_SCAN_CHUNK = 16 * 1024
_BIG_BATCH = 2 * 1024
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD


@dataclasses.dataclass(frozen=True, slots=True)
class AppendedBatch:
    """Where one batch of an append sits in the appended bytes, and what the indexes need."""

    position: int
    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A contiguous run of offsets of one partition: ``<base>.log``, ``.index`` and
    ``.timeindex`` once they have entries (a missing one reads as empty, see
    :mod:`odradek.storage.index`), and ``.txnindex`` once it holds an ABORT marker.

    Format: see :mod:`odradek.storage.formats`.  The log file is written only at its end, with
    ``os.pwrite`` on a raw fd, and read with ``os.pread``.  Its fd comes from the broker's
    :class:`~odradek.storage.open_files.OpenFiles`: open while the segment is among the files
    used most recently, reopened on demand after, and lent to reads handed to the network
    (``sendfile``) for ``file_delete_delay_ms`` (:meth:`lend_fd`).  The indexes are held in
    memory and hold no fd: their files are written when the segment is flushed, sealed,
    renamed or closed (:mod:`odradek.storage.index`).  So an idle segment holds no descriptor.

    Crash: a killed process loses nothing that :meth:`append` returned from, since the bytes are
    in the page cache; index entries not yet written are lost, which costs a longer scan of the
    batch headers after the last entry written (or, past the recovery point, nothing: recovery
    rebuilds those indexes).  An OS crash can lose any unflushed suffix and leave a torn last
    batch or stale indexes; :meth:`recover` (for segments past the recovery point) rereads
    every batch and truncates at the first bad one, and :meth:`load` (for the others) checks
    only the indexes and the batch headers after the last index entry.

    A segment the log cleaner writes carries the suffix ``.cleaned`` on its file names until it
    is swapped into its log (:mod:`odradek.storage.swap`); a crash before that leaves files that
    the log removes when it opens.

    Caller: :class:`~odradek.storage.log.PartitionLog`, from one thread at a time (the
    event-loop thread, or the log manager's close and open workers, each with logs of its own);
    and the log cleaner, which builds new segments in its own thread before handing them to the
    log, and reads the log's with fds of its own (:meth:`dup_fd`).
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_max_bytes: int,
        created_ms: int,
        file: SegmentFile,
        size: int,
        suffix: str = "",
        names: Container[str] | None = None,
    ) -> None:
        """``names``: the directory's file names, if the caller listed it (files not among
        them are not looked for)."""
        self.base_offset = base_offset
        self.directory = directory
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + suffix)
        index_name = segment_file_name(base_offset, INDEX_SUFFIX) + suffix
        self.offset_index = OffsetIndex.open(
            directory / index_name,
            base_offset,
            index_max_bytes,
            exists=names is None or index_name in names,
        )
        time_index_name = segment_file_name(base_offset, TIME_INDEX_SUFFIX) + suffix
        self.time_index = TimeIndex.open(
            directory / time_index_name,
            base_offset,
            index_max_bytes,
            exists=names is None or time_index_name in names,
        )
        txn_index_name = segment_file_name(base_offset, TXN_INDEX_SUFFIX) + suffix
        self.txn_index = TransactionIndex(
            directory / txn_index_name, exists=names is None or txn_index_name in names
        )
        self._file = file
        self.size = size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        # When no batch has a timestamp, time-based rolling counts from when the segment appeared.
        self.created_ms = created_ms
        self.dirty = False
        # Only the active (last) segment is appended to; the others have sealed time indexes.
        self.active = True
        self._bytes_since_index_entry = 0
        self._first_batch_timestamp: int | None = None
        # Where the last batch _scan_tail read starts.
        self._last_position = 0

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        index_max_bytes: int,
        now_ms: int,
        suffix: str = "",
        *,
        files: OpenFiles | None = None,
        names: Container[str] | None = None,
    ) -> LogSegment:
        """A new, empty segment; stale files of the same name (which can hold no offsets the log
        still has, since segments are created only at the log end) are emptied.  A ``suffix``
        (the cleaner's ``.cleaned``) is added to each file name until :meth:`rename`.
        ``names``: the directory's file names, if the caller knows them (``()`` for a
        directory it has just made); stale index files must be known to be emptied."""
        path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        file = (files or OpenFiles.unbounded()).file(path, fd)
        segment = cls(directory, base_offset, index_max_bytes, now_ms, file, 0, suffix, names=names)
        segment.offset_index.reset()
        segment.time_index.reset()
        segment.dirty = True
        return segment

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        index_max_bytes: int,
        now_ms: int,
        *,
        files: OpenFiles | None = None,
        names: Container[str] | None = None,
    ) -> LogSegment:
        """An existing segment, not yet loaded: call :meth:`load` or :meth:`recover` next.
        ``names``: the directory's file names, if the caller listed it."""
        path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        size = os.stat(path).st_size
        file = (files or OpenFiles.unbounded()).file(path)
        return cls(directory, base_offset, index_max_bytes, now_ms, file, size, names=names)

    # -- the file's descriptor -------------------------------------------------------------------

    def lend_fd(self, until_ms: int) -> int:
        """The log file's fd, for a read handed to the network: open until ``until_ms`` (by the
        monotonic clock of the log's :class:`OpenFiles`), or until the segment closes."""
        return self._file.lend(until_ms)

    def dup_fd(self) -> int:
        """An fd of the caller's own on the log file (a background fsync, the cleaner)."""
        return self._file.dup()

    @property
    def file(self) -> SegmentFile:
        """The log file's handle (a background fsync opens it through this when its turn
        comes)."""
        return self._file

    # -- reading ---------------------------------------------------------------------------------

    def iter_headers(self, start: int, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the whole batches from ``start`` (a batch boundary) up to ``end``, with
        positions in the file; stops at the first batch that does not fit or has a length too
        small to be one."""
        end = self.size if end is None else end
        position = start
        if position + HEADER_SIZE > end:
            return
        chunk = b""
        chunk_start = start
        read_size = _SCAN_CHUNK
        # One descriptor for the whole walk (a fetch reads a header per large batch, and taking
        # the set's lock for each read cost more than the read).  A walk the caller leaves
        # early lets it go when the generator is closed, which CPython does once it is dropped.
        with self._file.use() as fd:
            while position + HEADER_SIZE <= end:
                offset_in_chunk = position - chunk_start
                if offset_in_chunk < 0 or offset_in_chunk + HEADER_SIZE > len(chunk):
                    chunk = os.pread(fd, min(read_size, end - position), position)
                    chunk_start, offset_in_chunk = position, 0
                    if len(chunk) < HEADER_SIZE:
                        return
                # built with its file position, not replaced after: the fetch path reads a few
                # headers per request, and dataclasses.replace cost more than the parse
                header = read_header(chunk, offset_in_chunk, at=position)
                if header.batch_length < _MIN_BATCH_LENGTH or position + header.size > end:
                    return
                yield header
                position += header.size
                read_size = HEADER_SIZE if header.size > _BIG_BATCH else _SCAN_CHUNK

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch holding an offset >= ``offset``, if the segment has one."""
        for header in self.iter_headers(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return header
        return None

    def read(self, position: int, size: int) -> bytes:
        with self._file.use() as fd:
            return pread_upto(fd, size, position)

    @property
    def first_batch_timestamp(self) -> int | None:
        """The max timestamp of the first batch, which time-based rolling counts from."""
        if self._first_batch_timestamp is None and self.size >= HEADER_SIZE:
            self._first_batch_timestamp = read_header(self.read(0, HEADER_SIZE)).max_timestamp
        return self._first_batch_timestamp

    # -- opening ---------------------------------------------------------------------------------

    def _plausible(self, header: BatchHeader, min_offset: int) -> bool:
        return (
            header.magic == MAGIC
            and header.base_offset >= min_offset
            and header.last_offset_delta >= 0
            and header.last_offset - self.base_offset <= MAX_RELATIVE_OFFSET
        )

    def load(self, index_interval_bytes: int) -> bool:
        """Open a segment trusted to be intact (below the recovery point, or after a clean stop).

        Checks the indexes against the log and reads the batch headers after the last index
        entry (to learn the next offset and the largest timestamp); a bad index is rebuilt from
        the batch headers.  Returns False if even that finds the log file does not end on a whole
        batch, in which case the caller should :meth:`recover` it.
        """
        problem = self.offset_index.problem(self.size)
        if problem is None and not self._scan_tail():
            problem = "the log file does not end with a whole batch after the last index entry"
        if (
            problem is None
            and self.offset_index.missing
            and self._last_position >= index_interval_bytes
        ):
            # An index without entries has no file; this one would have had entries.
            problem = "index file is missing"
        if problem is None and self.time_index.missing and len(self.offset_index):
            # The time index's entries cover the batches before the last offset entry, which
            # the scan above skipped: without them the segment's largest timestamp is unknown.
            problem = "time index file is missing"
        if problem is None:
            problem = self.time_index.problem(self.next_offset)
        if problem is None:
            return True
        log.warning("rebuilding the indexes of %s: %s", self.log_path, problem)
        return self._rebuild_indexes(index_interval_bytes, check_crc_from=None) == self.size

    def _scan_tail(self) -> bool:
        """Learn the next offset and largest timestamp from the batches after the last index
        entry, the time index telling the largest timestamp before it."""
        start = self.offset_index.last_position
        last = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = last if last else (NO_TIMESTAMP, -1)
        self.next_offset = self.base_offset
        position = start
        self._last_position = start
        for header in self.iter_headers(start):
            if not self._plausible(header, self.next_offset):
                return False
            if (
                position == start
                and len(self.offset_index)
                and (header.last_offset != self.offset_index.last_offset)
            ):
                return False
            self._note_batch(header.last_offset, header.max_timestamp)
            self.next_offset = header.next_offset
            self._last_position = header.position
            position = header.position + header.size
        return position == self.size

    def recover(self, index_interval_bytes: int, recovery_point: int = 0) -> int:
        """Reread every batch, checking header and offsets, and the CRC of those reaching
        ``recovery_point`` or past it (the ones below were fsynced before a crash could tear
        them); truncate the file at the first bad one and rebuild the indexes.  Returns how many
        bytes were cut off."""
        valid_end = self._rebuild_indexes(index_interval_bytes, check_crc_from=recovery_point)
        truncated = self.size - valid_end
        if truncated:
            log.warning(
                "truncating %s at byte %d: %d bytes after it are not whole, valid batches",
                self.log_path,
                valid_end,
                truncated,
            )
            with self._file.use() as fd:
                os.ftruncate(fd, valid_end)
            self.size = valid_end
            self.dirty = True
            self._first_batch_timestamp = None
        return truncated

    def _rebuild_indexes(self, index_interval_bytes: int, *, check_crc_from: int | None) -> int:
        """Reindex the batches from the start of the file, checking the CRC of each batch whose
        last offset is ``check_crc_from`` or later (None: of none); returns where the valid
        ones end."""
        self.offset_index.reset()
        self.time_index.reset()
        self.dirty = True
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, -1
        self._bytes_since_index_entry = 0
        position = 0
        for header in self.iter_headers(0):
            if not self._plausible(header, self.next_offset):
                break
            if check_crc_from is not None and header.last_offset >= check_crc_from:
                batch = self.read(header.position, header.size)
                if crc_of(batch, dataclasses.replace(header, position=0)) != header.crc:
                    break
            self._index_batch(
                header.position,
                header.size,
                header.last_offset,
                header.max_timestamp,
                index_interval_bytes,
            )
            self.next_offset = header.next_offset
            position = header.position + header.size
        return position

    # -- writing ---------------------------------------------------------------------------------

    def _note_batch(self, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset

    def _index_batch(
        self, position: int, size: int, last_offset: int, max_timestamp: int, interval: int
    ) -> None:
        # The time index entry written with an offset index entry covers every batch up to and
        # including that one; reopening relies on this to learn the largest timestamp by reading
        # only the batches after the last offset index entry.  So both are written, or neither.
        self._note_batch(last_offset, max_timestamp)
        if (
            self._bytes_since_index_entry >= interval
            and not self.offset_index.is_full
            and not self.time_index.is_full
        ):
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def append(
        self, data: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch], interval: int
    ) -> None:
        """Write whole batches (offsets already assigned) at the end of the segment."""
        start = self.size
        with self._file.use() as fd:
            try:
                pwrite_all(fd, data, start)
            except OSError:
                # A partial write (disk full) must not stay as a torn batch in a live segment.
                os.ftruncate(fd, start)
                raise
        self.size += len(data)
        self.dirty = True
        for batch in batches:
            self._index_batch(
                start + batch.position, batch.size, batch.last_offset, batch.max_timestamp, interval
            )
        self.next_offset = batches[-1].last_offset + 1
        if self._first_batch_timestamp is None and start == 0:
            self._first_batch_timestamp = batches[0].max_timestamp

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (the batch holding ``offset`` too)."""
        header = self.find_batch(offset)
        if header is None:
            return
        with self._file.use() as fd:
            os.ftruncate(fd, header.position)
        self.size = header.position
        self.dirty = True
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self._bytes_since_index_entry = 0
        self._first_batch_timestamp = None
        if not self._scan_tail():
            raise RuntimeError(f"{self.log_path} is inconsistent after truncation")

    def seal(self) -> None:
        """The segment stops being active: record its largest timestamp, write the indexes.

        Without offset index entries, no time index entry either: opening reads every batch
        header of such a segment (they all start within the index interval), which gives its
        largest timestamp, and the segment then needs no index file at all."""
        if self.max_timestamp != NO_TIMESTAMP and len(self.offset_index):
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, force=True
            )
        self.offset_index.release()
        self.time_index.release()
        self.active = False

    def write_indexes(self) -> None:
        """Write the index entries not yet in their files (before they are fsynced elsewhere)."""
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def flush(self) -> None:
        with self._file.use() as fd:
            os.fsync(fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self.dirty = False

    # -- ending ----------------------------------------------------------------------------------

    def unlink(self) -> None:
        """Remove the files but keep the log fd, which outstanding reads may still be using.

        The log file goes first: without it the segment no longer exists for recovery, and an
        index file left by a crash just after is removed when the log opens."""
        with contextlib.suppress(FileNotFoundError):
            self._file.pin()  # a removed file cannot be reopened
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.unlink()

    def rename(self, suffix: str = "") -> None:
        """Give the files their names plus ``suffix`` (none: the segment's own names), the log
        file first.  Open fds, and so reads in flight, are not affected."""
        for index in (self.offset_index, self.time_index):
            index.release()
        targets = [
            (
                self.log_path,
                self.directory / (segment_file_name(self.base_offset, LOG_SUFFIX) + suffix),
            ),
            (
                self.offset_index.path,
                self.directory / (segment_file_name(self.base_offset, INDEX_SUFFIX) + suffix),
            ),
            (
                self.time_index.path,
                self.directory / (segment_file_name(self.base_offset, TIME_INDEX_SUFFIX) + suffix),
            ),
        ]
        for source, target in targets:
            if source.exists() or source is self.log_path:
                os.replace(source, target)
        self.txn_index.rename(
            self.directory / (segment_file_name(self.base_offset, TXN_INDEX_SUFFIX) + suffix)
        )
        self.log_path = targets[0][1]
        self._file.path = self.log_path
        self.offset_index.path = targets[1][1]
        self.time_index.path = targets[2][1]

    def last_modified_ms(self) -> int:
        with self._file.use() as fd:
            return os.fstat(fd).st_mtime_ns // 1_000_000

    def close(self) -> None:
        """Write the indexes' pending entries (unless the files were removed) and close the
        log file's fd."""
        self._file.close()
        self.offset_index.release()
        self.time_index.release()
