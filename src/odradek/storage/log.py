"""The log of one partition: its segments, offsets, reads, leader epochs, and recovery."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import uuid
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from odradek.clock import Clock
from odradek.protocol.control import EndTxnMarker, InvalidControlBatch, read_end_txn_marker
from odradek.protocol.record_batch import (
    NO_TIMESTAMP,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from odradek.storage import swap
from odradek.storage.fileio import fsync_directory, pread_upto
from odradek.storage.flusher import BackgroundJob, LogFlusher
from odradek.storage.formats import (
    DELETE_DIR_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    MAX_SEGMENT_BYTES,
    parse_partition_dir_name,
    parse_segment_file_name,
)
from odradek.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)
from odradek.storage.log_dir_failure import LogDirFailureChannel, is_log_dir_failure
from odradek.storage.open_files import OpenFiles, SegmentFile
from odradek.storage.producer_state import (
    NO_PRODUCER_ID,
    ProducerStateManager,
    snapshot_offsets,
    snapshot_path,
)
from odradek.storage.segment import AppendedBatch, LogSegment
from odradek.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

# Reads smaller than this are handed out as bytes rather than as a lent fd (see
# PartitionLog._slice).  Not above the server's SENDFILE_MIN_BYTES, which sends only slices at
# least that large from the fd.
COPIED_READ_BYTES = 64 * 1024
# A log of one segment no bigger than this, with no producer and no snapshot, gets no snapshot at
# a clean stop: replaying its batch headers at the next open costs less than making the file.
SNAPSHOTLESS_LOG_BYTES = 1 << 20
# Batch boundaries of the latest appends the log remembers (see _note_tail): a reader further
# behind is found by the offset index and the headers, a parked Fetch counts by reading. Kept
# by every log that was appended to, about 150 bytes each: 128 are ~19 KB a partition (1,024
# were ~150 KB, 3 GB over 20,000 busy partitions), and followers and caught-up consumers read
# within the last few appends.
TAIL_BOUNDARIES_KEPT = 128

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _log_dir_io(
    method: Callable[Concatenate[PartitionLog, _P], _R],
) -> Callable[Concatenate[PartitionLog, _P], _R]:
    """Kafka's ``maybeHandleIOException``: a log whose dir is offline refuses the call with
    :class:`~odradek.storage.log_dir_failure.KafkaStorageError`, and an I/O error during it
    takes the dir offline and is raised as one.  A log with no failure channel (one opened on
    its own) lets the OSError through."""

    @functools.wraps(method)
    def guarded(self: PartitionLog, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        failures = self._failures
        if failures is None:
            return method(self, *args, **kwargs)
        log_dir = self.log_dir
        if failures.is_offline(log_dir):
            raise failures.error_for(log_dir, self.directory.name)
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            if not is_log_dir_failure(e):
                raise
            failures.mark_offline(log_dir, e)
            raise failures.error_for(log_dir, f"{self.directory.name}: {method.__name__}") from e

    return guarded


# Confluent's subject name strategies, by their class names (the values of the topic configs
# confluent.key/value.subject.name.strategy).
SUBJECT_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
TOPIC_NAME_STRATEGY = SUBJECT_STRATEGY_PACKAGE + "TopicNameStrategy"
RECORD_NAME_STRATEGY = SUBJECT_STRATEGY_PACKAGE + "RecordNameStrategy"
TOPIC_RECORD_NAME_STRATEGY = SUBJECT_STRATEGY_PACKAGE + "TopicRecordNameStrategy"
SUBJECT_NAME_STRATEGIES = (TOPIC_NAME_STRATEGY, RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY)


def subject_name_strategy(name: str) -> str | None:
    """A strategy's class name from a config value: the class name, or its last part alone
    (None: no such strategy)."""
    full = name.strip() if "." in name else SUBJECT_STRATEGY_PACKAGE + name.strip()
    return full if full in SUBJECT_NAME_STRATEGIES else None


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Storage's own knobs; the server maps Kafka's topic configs onto them.

    ``None`` stands for Kafka's "no limit" values (-1 or Long.MAX_VALUE).  ``delete`` and
    ``compact`` are the two halves of ``cleanup.policy``.
    """

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    flush_messages: int | None = None
    flush_ms: int | None = None
    # Retention (cleanup.policy=delete): whole segments past these go, oldest first.
    delete: bool = True
    retention_ms: int | None = None
    retention_bytes: int | None = None
    # Compaction (cleanup.policy=compact), done by the log cleaner.
    compact: bool = False
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int | None = None
    # The codec of batches the cleaner rewrites; None keeps each batch's own.
    compression: int | None = None
    # What a leader accepts (storage.validator): max.message.bytes, message.timestamp.type
    # (True: LogAppendTime) and message.timestamp.after/before.max.ms.
    max_message_bytes: int = 1048588
    log_append_time: bool = False
    timestamp_after_max_ms: int = 2**63 - 1
    timestamp_before_max_ms: int = 2**63 - 1
    # Broker-side schema id validation (confluent.key/value.schema.validation): the records'
    # keys / values must carry a schema registry id, registered under the subject that
    # confluent.key/value.subject.name.strategy gives (storage.validator).
    key_schema_validation: bool = False
    value_schema_validation: bool = False
    key_subject_name_strategy: str = TOPIC_NAME_STRATEGY
    value_subject_name_strategy: str = TOPIC_NAME_STRATEGY
    # How long the fd of a deleted segment stays open, so that a read handed out just before
    # the delete (a Fetch response still being sent with sendfile) can finish.
    file_delete_delay_ms: int = 60_000

    @property
    def roll_ms(self) -> int:
        """The age that rolls the active segment: on a compacted log no record may wait in the
        active segment, which is never cleaned, longer than max.compaction.lag.ms."""
        if self.compact and self.max_compaction_lag_ms is not None:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms


class OffsetOutOfRange(Exception):
    """An offset outside ``[log_start_offset, log_end_offset]``."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnexpectedAppendOffset(Exception):
    """Replicated batches that do not start at or after the log end, or whose offsets do not
    grow from batch to batch (Kafka's UnexpectedAppendOffsetException)."""

    def __init__(self, first_offset: int, last_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"batches with offsets {first_offset}..{last_offset} cannot follow the log end "
            f"offset {log_end_offset}"
        )
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_end_offset = log_end_offset


@dataclass(frozen=True, slots=True)
class EpochTruncation:
    """Where a follower truncated its log after the leader's OffsetForLeaderEpoch answer, and
    whether that settles it (``complete``) or the follower must ask again about the epoch it now
    ends with (KIP-279: the leader answered with an epoch this log does not have)."""

    offset: int
    complete: bool


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int | None
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class ReadSlice:
    """Whole batches from one segment file; only a first batch larger than the read's byte limit
    may be cut short, when the reader did not ask for at least one whole batch."""

    # The segment's fd, lent for file_delete_delay_ms (or until the log closes); -1 when the
    # bytes are in ``data``, read at once because they are too few to be worth a sendfile.
    fd: int
    position: int
    size: int
    data: bytes | None = None

    def read_bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        return pread_upto(self.fd, self.size, self.position)


@dataclass(frozen=True, slots=True)
class _PendingFlush:
    """A flush handed to the flusher: once ``job`` succeeds, everything below ``upto`` is on
    disk, each of ``segments`` as it was at ``size`` bytes, and the directory as it was after
    ``directory_changes`` changes."""

    job: BackgroundJob
    upto: int
    segments: tuple[tuple[LogSegment, int], ...]
    directory_changes: int
    # The leader epoch file was in it (written without an fsync by a new epoch's append).
    epochs: bool = False
    # The log dir was in it (the log's directory entry, new since the log was created).
    parent: bool = False


class PartitionLog:
    """The log of one partition: an ordered list of segments, the last one active.

    Format: a directory ``<topic>-<partition>`` of segments (see :mod:`odradek.storage.formats`).
    Offsets are assigned here, by rewriting each appended batch's ``baseOffset``.  The log start
    offset, which can lie inside the first segment, and the recovery point are not stored here:
    the log manager keeps them in its checkpoint files and passes them back to :meth:`open`.

    The log also keeps the partition's leader epoch cache (``leader-epoch-checkpoint``, see
    :mod:`odradek.storage.leader_epoch`): an append records the epoch it is written in, a
    replicated append the epochs its batch headers carry, and the cache is cut whenever the log
    is, at either end.  Opening loads it, drops what lies outside the offsets that survived,
    and records the epochs of batches recovery reread; a missing or unreadable file is rebuilt
    from every batch header.  Followers use :meth:`end_offset_for_epoch` (the leader's answer
    to OffsetForLeaderEpoch) and :meth:`truncate_to_epoch_end` (what to do with it).

    Segments leave the log from the front (retention, DeleteRecords: :meth:`apply_retention`,
    :meth:`delete_records_before`), from the back (:meth:`truncate_to`), or are replaced by
    cleaned ones (:meth:`replace_segments`, see :mod:`odradek.storage.swap`).  A segment that
    leaves has its files removed at once but its fd kept open for ``file_delete_delay_ms``, so
    that reads already handed out still see its bytes.

    Crash: appends go to the page cache.  They are fsynced by :meth:`flush` (``flush.messages``,
    clean shutdown) on the calling thread, or by the log flusher's thread
    (:mod:`odradek.storage.flusher`) when the log has one: as in Kafka, a roll hands it the
    fsync of the segments below the new one (log files, indexes, and the directory if a segment
    file came or went), and the manager's ``flush.ms`` hands it the whole log
    (:meth:`flush_in_background`).  Everything below the recovery point was fsynced: it moves
    only when such a flush has ended well, to the log end offset the flush was asked for, and
    a segment is marked clean (``dirty`` False) only then, so a failed background fsync is
    retried by the next flush.  Opened
    with ``needs_recovery``, the log rereads every batch from the segment holding the recovery
    point on, checking CRCs from the recovery point itself (Kafka checks that whole segment),
    truncates at the first torn or corrupt batch and drops the segments after it; segments
    below the recovery point only have their indexes checked, as in Kafka.  Before
    anything else, opening finishes or discards a segment swap a crash interrupted.

    Caller: the log manager creates and opens logs; the server appends and reads; the log
    cleaner replaces segments.  All calls come from the event-loop thread, one at a time; the
    flusher thread sees only the fds a flush hands it, and the log picks up the results of
    finished flushes itself (:meth:`_collect_flushes`), on its own thread.
    """

    def __init__(self, directory: Path, config: LogConfig, clock: Clock) -> None:
        parsed = parse_partition_dir_name(directory.name)
        if parsed is None:
            raise ValueError(f"{directory} is not named <topic>-<partition>")
        self.topic, self.partition = parsed
        self.directory = directory
        # The log dir, asked on every guarded call and by the manager's scans of every log.
        self.log_dir = directory.parent
        self.config = config
        self._clock = clock
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []  # base offsets of _segments, for bisect
        self._log_start_offset = 0
        self._recovery_point = 0
        # Kafka keeps the high watermark with the log: the partition moves it, the log manager
        # checkpoints it (replication-offset-checkpoint), truncation lowers it.
        self._high_watermark = 0
        # Where the latest batches start, the log end included: offset -> bytes appended by
        # this process before it (Kafka's offset metadata, a position per offset). A parked
        # Fetch counts the bytes between two of them without reading (bytes_between), and a
        # read from one to another in the active segment (a follower's, a caught-up consumer's)
        # needs neither the offset index nor a walk of the headers: _tail_origin is the count
        # at position 0 of _tail_segment. Forgotten on truncation.
        self._tail: dict[int, int] = {}
        self._tail_order: deque[int] = deque()
        self._appended_bytes = 0
        self._tail_segment: LogSegment | None = None
        self._tail_origin = 0
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        # Segment files created, removed or renamed, and how many of those changes an fsync of
        # the directory is known to cover: a counter rather than a flag, because a background
        # flush covers only the changes made before it was handed out.
        self._directory_changes = 0
        self._directory_synced = 0
        self._retired: list[tuple[int, LogSegment]] = []  # (close after, segment)
        # The log manager's set of the logs holding retired segments, which it asks for them
        # twice a second (see LogManager.take_retired); None for a log opened on its own.
        self.retiring: set[PartitionLog] | None = None
        self._closed = False
        self._flusher: LogFlusher | None = None
        # Where I/O errors in the log dir are reported (see _log_dir_io); None: raised as they are.
        self._failures: LogDirFailureChannel | None = None
        self._pending_flushes: deque[_PendingFlush] = deque()
        self._epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.producers = ProducerStateManager(directory)
        # The offset of a durable producer state snapshot that describes the state as it is
        # (opened clean from a snapshot at the log end, nothing changed since): a clean stop
        # need not write it again (Kafka's rule: a snapshot only for offsets past the last).
        self._snapshot_at: int | None = None
        # Whether the directory may hold producer state snapshots (found at open, or written).
        self._has_snapshots = False
        self.open_files = OpenFiles.unbounded()
        # Kafka's needsFlushParentDir: a new log's directory entry is made durable by the log's
        # first flush (or the manager's next checkpoint), not one fsync per partition created.
        self._parent_unsynced = False

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        clock: Clock,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        needs_recovery: bool = False,
        flusher: LogFlusher | None = None,
        open_files: OpenFiles | None = None,
        failures: LogDirFailureChannel | None = None,
        new: bool = False,
    ) -> PartitionLog:
        """Open (creating if missing) the log in ``directory``, recovering it if told to.
        ``new``: the caller expects the directory not to exist (a partition being created).

        With a ``flusher``, rolled segments are fsynced in its thread (see the class doc);
        without one, only :meth:`flush` fsyncs.  ``open_files`` bounds the segment files open
        at once, shared by every log of a broker (default: no bound).  With ``failures``, an I/O
        error after opening takes the log dir offline (see
        :mod:`odradek.storage.log_dir_failure`); opening itself raises the OSError."""
        self = cls(directory, config, clock)
        self._flusher = flusher
        self._failures = failures
        if open_files is not None:
            self.open_files = open_files
        # A directory made here holds nothing: nothing in it is looked for (a new partition
        # of a broker making thousands costs its directory and its log file).
        reread_from: int | None
        snapshots: list[int]
        if new:
            # No lookup first: every lookup in the log dir waits for the mkdirs of the other
            # threads making logs there.
            try:
                directory.mkdir(parents=True)
                fresh = True
            except FileExistsError:
                fresh = False
        else:
            fresh = not directory.exists()
            if fresh:
                directory.mkdir(parents=True)
        if fresh:
            self._parent_unsynced = True
            reread_from, snapshots = None, []
        else:
            reread_from, snapshots = self._load_segments(recovery_point, needs_recovery)
        if not self._segments:
            self._add_segment(
                LogSegment.create(
                    directory,
                    log_start_offset,
                    config.segment_index_bytes,
                    clock.time_ms(),
                    files=self.open_files,
                    names=() if fresh else None,
                )
            )
        if not fresh:
            self._load_epochs(reread_from)
        self._log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        if self._log_start_offset > self.log_end_offset:
            # The checkpointed start is past what survived (a lost unflushed tail): Kafka then
            # starts the log afresh at the checkpointed start offset, and so do we.
            log.warning(
                "%s: log start offset %d is past the log end %d; emptying the log",
                directory,
                self._log_start_offset,
                self.log_end_offset,
            )
            self._truncate_fully(self._log_start_offset)
            snapshots = []
        self._recovery_point = (
            min(recovery_point, self.log_end_offset) if needs_recovery else self.log_end_offset
        )
        self._delete_segments_below(self._log_start_offset, retire=False)
        self._epochs.truncate_from_start(self._log_start_offset)
        # After a crash, a snapshot past the first segment recovery reread may describe batches
        # the crash lost, or lack .txnindex entries it wrote: replay that segment on.
        trusted = reread_from if needs_recovery and reread_from is not None else None
        loaded = self._load_producer_state(trusted, snapshots=snapshots)
        if not needs_recovery and loaded == self.log_end_offset:
            # Durable: the clean stop that left it synced it.
            self._snapshot_at = loaded
        self.update_high_watermark(high_watermark)
        return self

    @classmethod
    def in_offline_dir(
        cls, directory: Path, config: LogConfig, clock: Clock, failures: LogDirFailureChannel
    ) -> PartitionLog:
        """A stand-in for the log in ``directory``, whose dir went offline before the log could
        be opened (Kafka's offline partition): it holds nothing and refuses every call with
        :class:`~odradek.storage.log_dir_failure.KafkaStorageError`, so that its partition
        answers KAFKA_STORAGE_ERROR rather than being unknown.  Touches no file."""
        if not failures.is_offline(directory.parent):
            raise ValueError(f"{directory.parent} is not offline")
        self = cls(directory, config, clock)
        self._failures = failures
        return self

    def _load_producer_state(
        self, at_most: int | None = None, *, snapshots: list[int] | None = None
    ) -> int | None:
        """Load the newest producer state snapshot at or below ``at_most`` (default: the log
        end) and replay the batch headers after it, rebuilding the ``.txnindex`` entries of the
        segments replayed.  Without any snapshot (a log from before snapshots, or whose
        snapshots are gone) only the last two segments are replayed, Kafka's rule, so that
        opening such a log does not read all of it.  ``snapshots``: the snapshots' offsets, if
        the caller listed the directory.  Returns the offset of the snapshot loaded, if any."""
        self._snapshot_at = None
        log_end = self.log_end_offset
        limit = log_end if at_most is None else min(at_most, log_end)
        offsets = snapshot_offsets(self.directory) if snapshots is None else snapshots
        self._has_snapshots = self._has_snapshots or bool(offsets)
        self.producers.delete_snapshots(above=log_end, offsets=offsets)
        loaded = self.producers.load_latest_snapshot(
            limit, offsets=[o for o in offsets if o <= log_end]
        )
        if loaded is None:
            start = self._segments[max(0, len(self._segments) - 2)].base_offset
        else:
            start = max(loaded, self._segments[0].base_offset)
        for segment in self._segments[self._segment_index(start) :]:
            segment.txn_index.truncate_to(start)
            for header in segment.iter_headers(segment.offset_index.lookup(start)):
                if header.base_offset >= start and header.producer_id != NO_PRODUCER_ID:
                    batch = segment.read(header.position, header.size) if header.is_control else b""
                    self._note_producer_batch(
                        segment, batch, dataclasses.replace(header, position=0), header.base_offset
                    )
        return loaded

    def _note_producer_batch(
        self,
        segment: LogSegment,
        buffer: bytes | bytearray | memoryview,
        header: BatchHeader,
        first_offset: int,
    ) -> None:
        """Apply one appended batch of a producer to the producer state; an aborted
        transaction goes in the ``.txnindex`` of ``segment``, which holds its marker."""
        marker: EndTxnMarker | None = None
        # A control batch without records is a marker whose transaction compaction removed.
        if header.is_control and header.record_count:
            try:
                marker = read_end_txn_marker(buffer, header)
            except InvalidControlBatch as e:
                log.warning("%s: control batch at %d: %s", self.directory, first_offset, e)
        completed = self.producers.update(header, first_offset, marker)
        if completed is not None and completed.aborted:
            segment.txn_index.append(
                AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    min(self.producers.stable_offset_after(completed), self.log_end_offset),
                )
            )

    def _load_epochs(self, reread_from: int | None) -> None:
        """Load the leader epoch cache and fit it to the segments as opened: rebuilt from every
        batch header if the file is missing or unreadable, else given the epochs of the batches
        recovery reread (from base offset ``reread_from``; an epoch file written just before a
        crash covers them, but costs nothing to check), and cut at the log end."""
        path = self.directory / LEADER_EPOCH_CHECKPOINT
        loaded = LeaderEpochCache.load(path)
        if loaded is None:
            existed = path.exists()
            self._epochs = LeaderEpochCache(path)
            self._record_epochs_from(self._segments[0].base_offset)
            if self._epochs.dirty:
                # At once, off the event loop: the next open would otherwise rescan the log.
                self._epochs.write(sync=False)
            elif existed:
                self._epochs.write()  # replaces the unreadable file, which would cost a rescan
        else:
            self._epochs = loaded
            if reread_from is not None:
                self._record_epochs_from(reread_from)
        # An entry at the log end itself (a leader elected there, nothing appended in its
        # epoch yet: every empty log of a partition ever led) describes no batch that could be
        # gone, and is kept: the leader assigns it again as it starts, and would write it again.
        self._epochs.truncate_from_end(self.log_end_offset + 1)

    def _record_epochs_from(self, base_offset: int) -> None:
        """Assign, from the headers of the segments from ``base_offset`` on, each epoch above
        the latest known at its first batch (Kafka's rule when it recovers a segment)."""
        latest = self._epochs.latest_epoch
        found: list[EpochEntry] = []
        for segment in self._segments[self._segment_index(base_offset) :]:
            for header in segment.iter_headers(0):
                epoch = header.partition_leader_epoch
                if epoch >= 0 and (latest is None or epoch > latest):
                    found.append(EpochEntry(epoch, header.base_offset))
                    latest = epoch
        self._epochs.assign_all(found)

    def _load_segments(
        self, recovery_point: int, needs_recovery: bool
    ) -> tuple[int | None, list[int]]:
        """Open the segments on disk, recovering them from ``recovery_point`` if told to.
        Returns the base offset of the first segment recovery reread (None if it reread none),
        and the offsets of the producer state snapshots found."""
        # One listing serves the swap recovery and the segments (a log of a broker with many
        # partitions opens in a few system calls).
        names = os.listdir(self.directory)
        if swap.recover(self.directory, names):
            names = os.listdir(self.directory)
        logs: set[int] = set()
        others: dict[int, list[str]] = {}
        for name in names:
            parsed = parse_segment_file_name(name)
            if parsed is None:
                continue
            base, suffix = parsed
            if suffix == LOG_SUFFIX:
                logs.add(base)
            else:
                others.setdefault(base, []).append(name)
        for base, others_of_base in others.items():
            if base not in logs:
                for name in others_of_base:
                    path = self.directory / name
                    log.warning("removing %s, an index without its log file", path)
                    path.unlink()
        config, now = self.config, self._clock.time_ms()
        # Index files not in the listing are not looked for (three failed opens per segment).
        present = set(names)
        segments = [
            LogSegment.open(
                self.directory,
                base,
                config.segment_index_bytes,
                now,
                files=self.open_files,
                names=present,
            )
            for base in sorted(logs)
        ]
        first_to_recover = len(segments)
        if needs_recovery and segments:
            bases = [s.base_offset for s in segments]
            first_to_recover = max(0, bisect_right(bases, recovery_point) - 1)
        reread_from: int | None = None
        for i, segment in enumerate(segments):
            if i < first_to_recover and segment.load(config.index_interval_bytes):
                continue
            if i < first_to_recover:
                log.warning("%s is torn below the recovery point", segment.log_path)
            if reread_from is None:
                reread_from = segment.base_offset
            # Below the recovery point every batch was fsynced, so the segment holding it is
            # CRC-checked only from there: recovery costs the unflushed tail, not the segment.
            check_from = recovery_point if i == first_to_recover else segment.base_offset
            if segment.recover(config.index_interval_bytes, check_from) and i >= first_to_recover:
                for later in segments[i + 1 :]:
                    log.warning("removing %s, after a truncated segment", later.log_path)
                    later.close()
                    later.unlink()
                del segments[i + 1 :]
                break
        for segment in segments[:-1]:
            segment.seal()
        for segment in segments:
            self._add_segment(segment, is_new=False)
        return reread_from, snapshot_offsets(self.directory, names)

    def _add_segment(self, segment: LogSegment, *, is_new: bool = True) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)
        if is_new:
            self._directory_changes += 1

    # -- offsets -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        # No segment only in a stand-in for a log its offline dir kept from opening.
        return self._segments[-1].next_offset if self._segments else self._log_start_offset

    @property
    def recovery_point(self) -> int:
        """The offset below which everything is fsynced, counting background flushes that have
        finished by now."""
        self._collect_flushes()
        return self._recovery_point

    @property
    def last_flush_ms(self) -> int:
        """When the log was last flushed (or opened), by the clock's monotonic_ms."""
        return self._last_flush_ms

    @property
    def has_unflushed(self) -> bool:
        return self.recovery_point < self.log_end_offset or any(s.dirty for s in self._segments)

    @property
    def flushes_pending(self) -> int:
        """Background flushes handed out whose results the log has not taken in yet."""
        return len(self._pending_flushes)

    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        """The segments, oldest first; the last is the active one.  For reading only."""
        return tuple(self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def offline(self) -> bool:
        """Whether the log's dir is offline (see :mod:`odradek.storage.log_dir_failure`)."""
        failures = self._failures
        return failures is not None and failures.is_offline(self.log_dir)

    # -- leader epochs -------------------------------------------------------------------------

    @property
    def leader_epochs(self) -> tuple[EpochEntry, ...]:
        """The epoch cache's entries, oldest first."""
        return self._epochs.entries

    @property
    def latest_epoch(self) -> int | None:
        """The latest leader epoch the log holds (or was assigned), None if it knows none."""
        return self._epochs.latest_epoch

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` before any batch of it is written:
        a new leader does so at its log end, so that followers holding batches of an older
        epoch past that offset learn where to truncate (Kafka's makeLeader).  Kept in memory,
        and written by the log's next flush or close: no file is written on the caller's
        thread (see :mod:`odradek.storage.leader_epoch`).  A log whose dir is offline records
        nothing."""
        if self.offline:
            return
        self._epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)``, the answer to OffsetForLeaderEpoch for ``epoch`` (see
        :meth:`LeaderEpochCache.end_offset_for`)."""
        return self._epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_truncation_offset(
        self, leader_epoch: int, leader_end_offset: int, *, high_watermark: int
    ) -> EpochTruncation:
        """Where a follower's log should end, given the leader's answer ``(leader_epoch,
        leader_end_offset)`` to OffsetForLeaderEpoch for this log's latest epoch (KIP-101,
        KIP-279), as Kafka 3.x's fetcher decides:

        - the leader knows no end offset: the follower's ``high_watermark``;
        - the leader names no epoch, or one below every epoch here: the leader's end offset;
        - the leader names an epoch this log does not have: the end of this log's largest
          epoch below it, and ``complete`` False: ask again about the epoch the log then ends
          with;
        - else the smaller of the two ends of that epoch, here and on the leader.

        Never past the log end offset.
        """
        log_end = self.log_end_offset
        if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
            return EpochTruncation(min(high_watermark, log_end), True)
        if leader_epoch == UNDEFINED_EPOCH:
            return EpochTruncation(min(leader_end_offset, log_end), True)
        epoch, end_offset = self._epochs.end_offset_for(leader_epoch, log_end)
        if end_offset == UNDEFINED_EPOCH_OFFSET:
            return EpochTruncation(min(leader_end_offset, log_end), True)
        if epoch != leader_epoch:
            return EpochTruncation(min(end_offset, log_end), False)
        return EpochTruncation(min(end_offset, leader_end_offset, log_end), True)

    @_log_dir_io
    def truncate_to_epoch_end(
        self, leader_epoch: int, leader_end_offset: int, *, high_watermark: int
    ) -> EpochTruncation:
        """Truncate to :meth:`epoch_truncation_offset` and return it.  As after
        :meth:`truncate_to`, the caller checkpoints before appending again."""
        truncation = self.epoch_truncation_offset(
            leader_epoch, leader_end_offset, high_watermark=high_watermark
        )
        self.truncate_to(truncation.offset)
        return truncation

    # -- appending -----------------------------------------------------------------------------

    @_log_dir_io
    def append(
        self,
        records: bytearray | memoryview,
        headers: list[BatchHeader],
        *,
        log_append_time: int | None = None,
        leader_epoch: int = 0,
    ) -> AppendInfo:
        """Assign offsets to validated batches and write them at the log end (the leader's
        append, in ``leader_epoch``, which the epoch cache records if it is new).

        ``records`` holds whole batches (checked by ``validate_batches``) and ``headers`` their
        headers; the batches are changed in place (base offset, leader epoch, and with
        ``log_append_time`` the timestamp type and max timestamp).
        """
        if not headers:
            raise ValueError("nothing to append")
        self._close_retired()
        first_offset = self.log_end_offset
        record_count = sum(h.last_offset_delta + 1 for h in headers)
        incoming_max_timestamp = (
            log_append_time
            if log_append_time is not None
            else max(h.max_timestamp for h in headers)
        )
        self._maybe_roll(
            len(records), first_offset, first_offset + record_count - 1, incoming_max_timestamp
        )
        batches: list[AppendedBatch] = []
        producer_batches: list[tuple[BatchHeader, int]] | None = None
        next_offset = first_offset
        for header in headers:
            if header.producer_id != NO_PRODUCER_ID:
                if producer_batches is None:
                    producer_batches = []
                producer_batches.append((header, next_offset))
            set_base_offset(records, header.position, next_offset)
            set_partition_leader_epoch(records, header.position, leader_epoch)
            max_timestamp = header.max_timestamp
            if log_append_time is not None:
                set_log_append_time(records, header, log_append_time)
                max_timestamp = log_append_time
            next_offset += header.last_offset_delta + 1
            batches.append(
                AppendedBatch(header.position, header.size, next_offset - 1, max_timestamp)
            )
        # The epoch's entry is on disk before its first batch: the file never lacks an epoch
        # the log holds (one it holds too many, past a crash, opening drops).
        self._epochs.assign(leader_epoch, first_offset)
        self._write_batches(records, batches, headers, first_offset)
        if producer_batches is not None:
            for header, offset in producer_batches:
                self._note_producer_batch(self._segments[-1], records, header, offset)
        return AppendInfo(first_offset, next_offset - 1, log_append_time, self._log_start_offset)

    @_log_dir_io
    def append_as_follower(
        self, records: bytes | bytearray | memoryview, headers: list[BatchHeader]
    ) -> AppendInfo:
        """Write batches copied from the leader as they are, offsets and leader epochs included,
        at the log end; the epoch cache records each epoch their headers start.

        ``records`` holds whole batches (checked by ``validate_batches``) and ``headers`` their
        headers.  The first batch may start past the log end (the leader's log is compacted
        there, or starts later), never before it, and each batch must start after the last
        one ends: else :class:`UnexpectedAppendOffset`, and nothing is written.
        """
        if not headers:
            raise ValueError("nothing to append")
        first_offset, last_offset = headers[0].base_offset, headers[-1].last_offset
        expected = self.log_end_offset
        for header in headers:
            if header.base_offset < expected or header.last_offset_delta < 0:
                raise UnexpectedAppendOffset(first_offset, last_offset, self.log_end_offset)
            expected = header.next_offset
        self._close_retired()
        self._maybe_roll(
            len(records), first_offset, last_offset, max(h.max_timestamp for h in headers)
        )
        self._epochs.assign_all(
            EpochEntry(h.partition_leader_epoch, h.base_offset)
            for h in headers
            if h.partition_leader_epoch >= 0
        )
        batches = [
            AppendedBatch(h.position, h.size, h.last_offset, h.max_timestamp) for h in headers
        ]
        self._write_batches(records, batches, headers, first_offset)
        for h in headers:
            if h.producer_id != NO_PRODUCER_ID:
                self._note_producer_batch(self._segments[-1], records, h, h.base_offset)
        return AppendInfo(first_offset, last_offset, None, self._log_start_offset)

    def _write_batches(
        self,
        records: bytes | bytearray | memoryview,
        batches: list[AppendedBatch],
        headers: list[BatchHeader],
        first_offset: int,
    ) -> None:
        active = self._segments[-1]
        start = active.size
        active.append(records, batches, self.config.index_interval_bytes)
        self._note_tail(active, start, first_offset, batches)
        self._unflushed_messages += sum(h.record_count for h in headers)
        flush_messages = self.config.flush_messages
        if flush_messages is not None and self._unflushed_messages >= flush_messages:
            self.flush()

    def _note_tail(
        self, active: LogSegment, start: int, first_offset: int, batches: list[AppendedBatch]
    ) -> None:
        """Remember where the batches just written at ``start`` of ``active`` begin and end."""
        tail, order, appended = self._tail, self._tail_order, self._appended_bytes
        if active is not self._tail_segment:
            self._tail_segment = active
            self._tail_origin = appended - start
        if first_offset not in tail:
            tail[first_offset] = appended + batches[0].position
            order.append(first_offset)
        for batch in batches:
            end = batch.last_offset + 1
            tail[end] = appended + batch.position + batch.size
            order.append(end)
        last = batches[-1]
        self._appended_bytes = appended + last.position + last.size
        while len(order) > TAIL_BOUNDARIES_KEPT:
            tail.pop(order.popleft(), None)

    def _forget_tail(self) -> None:
        self._tail.clear()
        self._tail_order.clear()
        self._tail_segment = None

    def bytes_between(self, start: int, end: int) -> int | None:
        """The bytes of the batches from offset ``start`` to ``end``, both where a batch of a
        recent append began or the log ended; None when either is not (an older offset, or one
        inside a batch): the caller reads instead. Compaction or retention since may make the
        true figure smaller, never larger."""
        if end <= start:
            return 0
        before, after = self._tail.get(start), self._tail.get(end)
        if before is None or after is None:
            return None
        return after - before

    def _maybe_roll(
        self, size: int, first_offset: int, last_offset: int, max_timestamp: int
    ) -> None:
        active = self._segments[-1]
        if active.size == 0 and last_offset - active.base_offset <= MAX_RELATIVE_OFFSET:
            # A new segment would gain nothing; an oversized batch goes in alone.  (Replicated
            # batches past a gap too large for the index's relative offsets do roll.)
            return
        config = self.config
        if (
            active.size + size > min(config.segment_bytes, MAX_SEGMENT_BYTES)
            or self._segment_age_ms(active, max_timestamp) > config.roll_ms
            or active.indexes_full
            or last_offset - active.base_offset > MAX_RELATIVE_OFFSET
        ):
            self._roll(first_offset)

    def _segment_age_ms(self, active: LogSegment, max_timestamp: int) -> int:
        # Kafka's rule: measure from the first batch's timestamp to the incoming batches' when
        # both exist, so that a producer replaying old timestamps does not roll a segment per
        # append; else by the clock since the segment appeared.
        first_timestamp = active.first_batch_timestamp
        if first_timestamp is not None and first_timestamp >= 0 and max_timestamp >= 0:
            return max_timestamp - first_timestamp
        return self._clock.time_ms() - active.created_ms

    def _roll(self, base_offset: int) -> None:
        """Seal the active segment and start one at ``base_offset``: the log end, or for
        replicated batches, the first one's offset (past a gap in the leader's offsets)."""
        active = self._segments[-1]
        active.seal()
        active.dirty = True  # sealing wrote the time index's last entry
        self._add_segment(
            LogSegment.create(
                self.directory,
                base_offset,
                self.config.segment_index_bytes,
                self._clock.time_ms(),
                files=self.open_files,
            )
        )
        # The new segment's base names the snapshot: state after every batch below it (past a
        # gap in replicated offsets, the same as at the old log end).  Not fsynced here: see
        # odradek.storage.producer_state.
        self.producers.write_snapshot(base_offset, sync=False)
        self._has_snapshots = True
        self._prune_snapshots()
        # Kafka's flush on roll (UnifiedLog.roll schedules flushUptoOffsetExclusive): the
        # segments now sealed will not change, so fsync them in the background and let the
        # recovery point follow, which bounds what recovery after a crash must reread to the
        # segments written since.  Appends to the new segment go on meanwhile.
        self._flush_in_background(active.next_offset, "roll")

    # -- reading -------------------------------------------------------------------------------

    def recent_batch_headers(self, segments: int) -> Iterator[BatchHeader]:
        """Headers (offsets assigned) of every batch in the newest ``segments`` segments, oldest
        first: what producer state is rebuilt from when the partition opens."""
        for segment in self._segments[-segments:]:
            yield from segment.iter_headers(0)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction not decided, or decided but with its
        marker not yet below the high watermark; None if there is none."""
        return self.producers.first_unstable_offset

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided and replicated (the LSO): what
        read_committed consumers may read up to."""
        first_unstable = self.producers.first_unstable_offset
        hw = self._high_watermark
        return (
            hw if first_unstable is None else max(min(first_unstable, hw), self._log_start_offset)
        )

    @_log_dir_io
    def aborted_transactions(self, start_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of the aborted transactions that may have records
        in ``[start_offset, upper_bound)``, from the ``.txnindex`` of the segment holding
        ``start_offset`` on (a marker is never before its transaction's data)."""
        found: list[tuple[int, int]] = []
        # Every later segment is read: the marker of a transaction with records below the
        # bound can lie past it.
        for segment in self._segments[self._segment_index(start_offset) :]:
            found.extend(
                (e.producer_id, e.first_offset)
                for e in segment.txn_index.collect(start_offset, upper_bound)
            )
        return found

    def _check_offset(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRange(offset, self._log_start_offset, self.log_end_offset)

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    @_log_dir_io
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadSlice | None:
        """Batches from the one holding ``offset`` on, at most ``max_bytes`` of them, none
        starting at or after ``max_offset``; None when there is nothing to read.

        A first batch larger than ``max_bytes`` comes whole with ``min_one_batch`` (KIP-74),
        else cut to ``max_bytes`` bytes, which the client discards as Kafka's clients do.
        """
        self._check_offset(offset)
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if offset >= limit:
            return None
        tail, active = self._tail, self._segments[-1]
        start, end = tail.get(offset), tail.get(limit)
        if (
            start is not None
            and end is not None
            and start >= self._tail_origin
            and end - start <= max_bytes
            and active is self._tail_segment
        ):
            # Equal: a follower's log past a gap in the leader's offsets, no batch in between.
            if end == start:
                return None
            return self._slice(active, start - self._tail_origin, end - start)
        for segment in self._segments[self._segment_index(offset) :]:
            # One walk of the headers finds the batch holding the offset and the batches after
            # it that fit (a walk per step cost as much as the rest of a fetch).
            position = -1
            size = 0
            for header in segment.iter_headers(segment.offset_index.lookup(offset)):
                if position < 0:
                    if header.last_offset < offset:
                        continue
                    if header.base_offset >= limit:
                        return None
                    if header.size > max_bytes:
                        size = header.size if min_one_batch else max(0, max_bytes)
                        return self._slice(segment, header.position, size)
                    position, size = header.position, header.size
                elif header.base_offset >= limit or size + header.size > max_bytes:
                    break
                else:
                    size += header.size
            if position >= 0:
                return self._slice(segment, position, size)
            # else the offset is at this segment's end (or in a gap after it): the next one
        return None

    def _slice(self, segment: LogSegment, position: int, size: int) -> ReadSlice:
        """A read handed out: a small one as bytes (the network would copy it anyway), a large
        one as the segment's fd, lent long enough for a sendfile to finish, so that a broker
        with more segments than open files does not keep a descriptor per slice read."""
        if size < COPIED_READ_BYTES:
            return ReadSlice(-1, position, size, segment.read(position, size))
        until = self._clock.monotonic_ms() + self.config.file_delete_delay_ms
        return ReadSlice(segment.lend_fd(until), position, size)

    @_log_dir_io
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``timestamp`` (ListOffsets),
        not before the log start offset; None if every record is older."""
        start = self._log_start_offset
        for segment in self._segments[self._segment_index(start) :]:
            if segment.max_timestamp < timestamp:
                continue
            indexed = segment.time_index.lookup(timestamp)
            from_offset = max(start, indexed if indexed is not None else segment.base_offset)
            for header in segment.iter_headers(segment.offset_index.lookup(from_offset)):
                if header.last_offset < start or header.max_timestamp < timestamp:
                    continue
                found = self._first_record_at(segment, header, timestamp, start)
                if found is not None:
                    return found
        return None

    def _first_record_at(
        self, segment: LogSegment, header: BatchHeader, timestamp: int, start: int
    ) -> tuple[int, int] | None:
        if header.is_log_append_time:
            # Every record of the batch has the broker's append time, its max timestamp.
            return max(header.base_offset, start), header.max_timestamp
        # Imported here: decoding records is the protocol layer's business, and only this rare
        # request (ListOffsets by time) needs it.
        from odradek.protocol.records import decode_batch

        for record in decode_batch(segment.read(header.position, header.size)):
            if record.offset >= start and record.timestamp >= timestamp:
                return record.offset, record.timestamp
        return None

    @_log_dir_io
    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` for ListOffsets MAX_TIMESTAMP, at batch precision: the offset
        is the last one of the first batch whose max timestamp is the log's largest (Kafka
        names the exact record).  None if no record has a timestamp."""
        best: tuple[int, int] | None = None
        start = self._log_start_offset
        for segment in self._segments[self._segment_index(start) :]:
            timestamp, offset = segment.max_timestamp, segment.offset_of_max_timestamp
            if offset < start:
                # The segment's largest timestamp is below the log start: look past it.
                timestamp, offset = NO_TIMESTAMP, -1
                for header in segment.iter_headers(segment.offset_index.lookup(start)):
                    if header.last_offset >= start and header.max_timestamp > timestamp:
                        timestamp, offset = header.max_timestamp, header.last_offset
            if timestamp != NO_TIMESTAMP and (best is None or timestamp > best[1]):
                best = (offset, timestamp)
        return best

    # -- removing ------------------------------------------------------------------------------

    @_log_dir_io
    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (DeleteRecords) and drop the segments wholly
        below it, except the active one.  Returns the log start offset."""
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRange(offset, self._log_start_offset, self.log_end_offset)
        self._close_retired()
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._high_watermark = max(self._high_watermark, offset)
            self._delete_segments_below(offset, retire=True)
            self._epochs.truncate_from_start(offset)
            self._log_start_moved()
        return self._log_start_offset

    def _log_start_moved(self) -> None:
        self.producers.forget_before(self._log_start_offset)
        self._snapshot_at = None
        self._prune_snapshots()

    def _prune_snapshots(self) -> None:
        """Keep the snapshots a reload can start from: at segment bases (taken on roll) and
        in the active segment (taken on close); others are stale (below the log start, or of
        segments compaction merged), so their number stays bounded by the segments'."""
        bases = set(self._bases)
        active = self._bases[-1]
        for offset in snapshot_offsets(self.directory):
            if offset < active and offset not in bases:
                snapshot_path(self.directory, offset).unlink(missing_ok=True)

    def _delete_segments_below(self, offset: int, *, retire: bool) -> None:
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            self._drop_segment(0, retire=retire)

    def _drop_segment(self, i: int, *, retire: bool) -> None:
        segment = self._segments.pop(i)
        del self._bases[i]
        segment.unlink()
        self._directory_changes += 1
        if retire:
            self._retire(segment)
        else:
            segment.close()

    def _retire(self, segment: LogSegment) -> None:
        due = self._clock.monotonic_ms() + self.config.file_delete_delay_ms
        self._retired.append((due, segment))
        self._retired.sort(key=lambda entry: entry[0])
        if self.retiring is not None:
            self.retiring.add(self)

    @property
    def has_retired(self) -> bool:
        """Whether removed segments wait for :meth:`take_retired`."""
        return bool(self._retired)

    def take_retired(self) -> list[LogSegment]:
        """The removed segments whose fds are due to close; the caller closes them (closing the
        last fd of a deleted file frees its blocks, which can take a while)."""
        now = self._clock.monotonic_ms()
        due: list[LogSegment] = []
        while self._retired and self._retired[0][0] <= now:
            due.append(self._retired.pop(0)[1])
        return due

    def _close_retired(self) -> None:
        for segment in self.take_retired():
            segment.close()

    # -- retention -----------------------------------------------------------------------------

    def _segment_timestamp(self, segment: LogSegment) -> int:
        """The largest timestamp of a segment, or when its file last changed if it has none."""
        if segment.max_timestamp != NO_TIMESTAMP:
            return segment.max_timestamp
        return segment.last_modified_ms()

    @_log_dir_io
    def apply_retention(self) -> int:
        """Delete the oldest segments that ``retention.ms`` or ``retention.bytes`` let go (when
        ``cleanup.policy`` has ``delete``), never the active one; the log start offset moves to
        the first segment left.  Returns how many segments went.

        By time, a segment goes when its largest timestamp is more than retention.ms old; by
        size, the oldest segments go while the log without them would still hold at least
        retention.bytes.  Both stop at the first segment that must stay, so the log loses a
        prefix and its offsets stay contiguous.
        """
        config = self.config
        if not config.delete or self._closed:
            return 0
        self._close_retired()
        deleted = 0
        if config.retention_ms is not None:
            horizon = self._clock.time_ms() - config.retention_ms
            while len(self._segments) > 1 and self._segment_timestamp(self._segments[0]) < horizon:
                self._drop_segment(0, retire=True)
                deleted += 1
        if config.retention_bytes is not None:
            excess = self.size_bytes() - config.retention_bytes
            while len(self._segments) > 1 and excess >= self._segments[0].size:
                excess -= self._segments[0].size
                self._drop_segment(0, retire=True)
                deleted += 1
        if deleted:
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self._epochs.truncate_from_start(self._log_start_offset)
            self._log_start_moved()
            log.info(
                "%s-%d: retention deleted %d segments; the log now starts at offset %d",
                self.topic,
                self.partition,
                deleted,
                self._log_start_offset,
            )
        return deleted

    # -- compaction ----------------------------------------------------------------------------

    @_log_dir_io
    def replace_segments(
        self,
        prepared: Path,
        replacements: Sequence[tuple[LogSegment, Sequence[LogSegment], Sequence[int]]],
    ) -> bool:
        """Swap cleaned segments in: each ``(new, old, old sizes)`` replaces the run ``old``,
        which must still be in the log, inactive and of the sizes given.  ``prepared`` is the
        manifest :func:`odradek.storage.swap.prepare` wrote.  Returns False, changing nothing,
        when the log moved on meanwhile (closed, truncated, segments deleted by retention), and
        the caller then discards the new segments.
        """
        if self._closed:
            return False
        positions: list[int] = []
        for _, old, sizes in replacements:
            i = next((j for j, s in enumerate(self._segments) if s is old[0]), -1)
            run = self._segments[i : i + len(old)] if i >= 0 else []
            if (
                len(run) != len(old)
                or any(a is not b for a, b in zip(run, old, strict=True))
                or [s.size for s in run] != list(sizes)
                or i + len(old) >= len(self._segments)
            ):
                return False
            positions.append(i)
        swap.commit(prepared, [(new, old) for new, old, _ in replacements])
        # Back to front, so that the positions found above stay right.
        order = sorted(range(len(positions)), key=lambda k: -positions[k])
        for k in order:
            i, (new, old, _) = positions[k], replacements[k]
            self._segments[i : i + len(old)] = [new]
            self._bases[i : i + len(old)] = [new.base_offset]
            for segment in old:
                self._retire(segment)
        self._directory_changes += 1
        self._prune_snapshots()
        return True

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed (in every in-sync replica)."""
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, kept within ``[log start offset, log end offset]``; returns
        it."""
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)
        self.producers.high_watermark_moved(self._high_watermark)
        return self._high_watermark

    @_log_dir_io
    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset >= ``offset`` (for a follower diverging from its
        leader), and the leader epochs starting there or later.  Truncation is by whole batches:
        the log end becomes the base offset of the batch holding ``offset`` when ``offset`` falls
        inside one.  The caller checkpoints before appending again: recovery skips the CRCs of
        batches below a checkpointed recovery point, and one checkpointed before the truncation
        would cover batches appended after it."""
        if offset >= self.log_end_offset:
            return
        self._close_retired()
        self._discard_pending_flushes()
        self._forget_tail()
        if offset <= self._segments[0].base_offset or offset < self._log_start_offset:
            self._truncate_fully(max(offset, 0))
        else:
            while self._segments[-1].base_offset >= offset:
                self._drop_segment(len(self._segments) - 1, retire=True)
            active = self._segments[-1]
            active.truncate_to(offset)
            active.active = True
            self._epochs.truncate_from_end(self.log_end_offset)
            self._load_producer_state()
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        self._high_watermark = min(self._high_watermark, self.log_end_offset)

    @_log_dir_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and start it afresh at ``offset``, forgetting every leader epoch (a
        follower whose log ends before the leader's starts).  The caller checkpoints before
        appending again, as after :meth:`truncate_to`."""
        self._close_retired()
        self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        self._discard_pending_flushes()
        self._forget_tail()
        while self._segments:
            self._drop_segment(len(self._segments) - 1, retire=True)
        self._add_segment(
            LogSegment.create(
                self.directory,
                offset,
                self.config.segment_index_bytes,
                self._clock.time_ms(),
                files=self.open_files,
            )
        )
        self._log_start_offset = offset
        self._recovery_point = min(self._recovery_point, offset)
        self._high_watermark = offset
        self._epochs.clear()
        self.producers.delete_snapshots()
        self.producers.reset()
        self._snapshot_at = None

    # -- durability and lifetime ---------------------------------------------------------------

    @_log_dir_io
    def flush(self) -> None:
        """fsync, on the calling thread, every segment written since the last flush; the
        recovery point becomes the log end offset.  Background flushes still pending are not
        waited for: what they would fsync is still marked dirty, so it is fsynced here too."""
        self._flush()

    def _flush(self, *, snapshot: bool = False, sync: bool = True) -> None:
        self._collect_flushes()
        self._close_retired()
        if not sync:
            # Written to the page cache only: the caller syncs the whole file system after.
            for segment in self._segments:
                if segment.dirty:
                    segment.write_indexes()
            self._epochs.write_if_dirty(sync=False)
            if snapshot:
                self._write_snapshot(sync=False)
        else:
            for segment in self._segments:
                if segment.dirty:
                    segment.flush()
            # The directory is fsynced once, after every file renamed into it.
            directory_dirty = self._directory_changes != self._directory_synced
            directory_dirty |= self._epochs.write_if_dirty(sync_directory=False)
            if snapshot and self._write_snapshot(sync=True):
                directory_dirty = True
            if directory_dirty:
                fsync_directory(self.directory)
                self._directory_synced = self._directory_changes
            if self._parent_unsynced:
                fsync_directory(self.log_dir)
                self._parent_unsynced = False
        self._recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock.monotonic_ms()

    def _write_snapshot(self, *, sync: bool) -> bool:
        """The producer state snapshot at the log end (Kafka's on a clean stop, so that the next
        open replays nothing); False if it could not be written (the next open replays more)
        or need not be: a durable one describes the state as it is."""
        if self._snapshot_at == self.log_end_offset:
            return False
        if (
            not self._has_snapshots
            and self.producers.is_empty
            and len(self._segments) == 1
            and self._segments[0].size <= SNAPSHOTLESS_LOG_BYTES
        ):
            # Opening it replays the whole log (one small segment) for less than the file
            # costs to make, a file per partition at every stop of a broker with many; and
            # with no snapshot at all, the state is rebuilt from every batch it holds.
            return False
        try:
            self.producers.write_snapshot(self.log_end_offset, sync=sync, sync_directory=False)
        except OSError:
            log.exception("%s: cannot write the producer state snapshot", self.directory)
            return False
        self._has_snapshots = True
        return True

    def flush_in_background(self) -> bool:
        """Hand the fsync of everything up to the log end offset to the flusher (the manager's
        ``flush.ms``); the recovery point follows once it is done.  Returns False when the log
        has no flusher or nothing to flush."""
        self._last_flush_ms = self._clock.monotonic_ms()
        return self._flush_in_background(self.log_end_offset, "flush.ms")

    def _flush_in_background(self, upto: int, reason: str) -> bool:
        flusher = self._flusher
        if flusher is None or self._closed:
            return False
        self._collect_flushes()
        # Segments not dirty are on disk already.  A segment still in an earlier flush that has
        # not ended is dirty and goes in this one as well: if that flush fails, this one must
        # not move the recovery point over it.  (An fsync of a file with nothing unwritten is
        # cheap.)
        segments = tuple(
            (segment, segment.size)
            for segment in self._segments
            if segment.dirty and segment.base_offset < upto
        )
        directory_changes = self._directory_changes
        if (
            not segments
            and not self._epochs.dirty
            and not self._epochs.unsynced
            and directory_changes == self._directory_synced
            and not self._parent_unsynced
            and upto <= self._recovery_point
        ):
            return False
        files: list[Path | SegmentFile] = []
        try:
            # Before the recovery point can move over batches of the epochs it lacks.
            self._epochs.write_if_dirty(sync=False)
            for segment, _ in segments:
                # Opened by the flusher when the job's turn comes, not now: a burst of rolls
                # over many partitions must not hold descriptors while it waits.
                segment.write_indexes()
                files.append(segment.file)
                files += (segment.offset_index.path, segment.time_index.path)
                files.append(segment.txn_index.path)  # not there if never written: skipped
        except OSError as e:
            if self._failures is not None and is_log_dir_failure(e):
                raise  # the dir's own failure (ENOSPC writing an index): it goes offline
            # Out of fds, say: an append that rolled must not fail for it.  The segments stay
            # dirty, and the next flush (background or not) covers them.
            log.exception("%s: cannot hand a flush to the flusher", self.directory)
            return False
        epochs = self._epochs.unsynced
        if epochs:
            files.append(self._epochs.path)
        if epochs or directory_changes != self._directory_synced:
            files.append(self.directory)
        parent = self._parent_unsynced
        if parent:
            files.append(self.log_dir)
        job = flusher.fsync_files(f"{self.directory.name} {reason} below {upto}", files)
        self._epochs.unsynced = False
        self._parent_unsynced = False
        self._pending_flushes.append(
            _PendingFlush(job, upto, segments, directory_changes, epochs, parent)
        )
        return True

    def _collect_flushes(self) -> None:
        """Take in the flushes the flusher has finished, oldest first (its order)."""
        pending = self._pending_flushes
        while pending and pending[0].job.done:
            flushed = pending.popleft()
            if not flushed.job.succeeded:
                error = flushed.job.error
                if (
                    self._failures is not None
                    and isinstance(error, OSError)
                    and is_log_dir_failure(error)
                ):
                    # An fsync that failed may have lost the pages it was to write (Linux
                    # drops them): retrying cannot be trusted, so the dir goes offline.
                    self._failures.mark_offline(self.log_dir, error)
                if flushed.epochs:
                    self._epochs.unsynced = True
                if flushed.parent:
                    self._parent_unsynced = True
                continue
            # No truncation happened since the flush was handed out (truncation discards pending
            # flushes), so ``upto`` is not past the log end.
            self._recovery_point = max(self._recovery_point, flushed.upto)
            for segment, size in flushed.segments:
                if segment.size == size:  # else the active segment grew since: still dirty
                    segment.dirty = False
            self._directory_synced = max(self._directory_synced, flushed.directory_changes)

    def _discard_pending_flushes(self) -> None:
        """Forget flushes handed out (truncation, close): their offsets may no longer be the
        log's.  The flusher still closes their fds; one not yet started skips its fsyncs."""
        for pending in self._pending_flushes:
            pending.job.cancel()
        self._pending_flushes.clear()

    def close(self, *, flush: bool = False, sync: bool = True) -> None:
        """Close every file.  Background flushes not yet started are cancelled.

        With ``flush`` (the log manager's clean shutdown), first fsync everything, as
        :meth:`flush`, with the producer state snapshot and the active segment's last time
        index entry, and the directory once after them all; without, nothing is fsynced but
        the snapshot.  ``flush`` without ``sync`` writes all of that to the page cache and
        fsyncs nothing: the caller makes it durable at once with a sync of the whole file
        system (:func:`~odradek.storage.fileio.sync_file_system`), and must not count the
        recovery point (now the log end) as durable before that has succeeded."""
        if self._closed:
            return
        if self.offline:
            self._close_offline()
            return
        if flush:
            active = self._segments[-1]
            entries = len(active.time_index)
            active.seal()
            active.dirty = active.dirty or len(active.time_index) != entries
            self._flush(snapshot=True, sync=sync)
        self._closed = True
        self._discard_pending_flushes()
        if not flush and self._segments and self.directory.exists():
            # Kafka's snapshot on close: the next open replays nothing.
            try:
                # The epochs kept in memory too: a log closed and opened again (not the
                # manager's clean stop, which flushes) knows them without a reread.
                self._epochs.write_if_dirty(sync=False)
                self.producers.write_snapshot(self.log_end_offset, sync=True)
                self._has_snapshots = True
            except OSError:
                log.exception("%s: cannot write the producer state snapshot", self.directory)
        if self._segments:
            self._segments[-1].seal()
        for segment in self._segments:
            segment.close()
        for _, segment in self._retired:
            segment.close()
        self._retired.clear()

    def _close_offline(self) -> None:
        """Close the fds of a log whose dir is offline, writing nothing that can be skipped
        (no flush, snapshot or seal): the next open recovers the log from its last checkpointed
        recovery point."""
        self._closed = True
        self._discard_pending_flushes()
        for segment in [*self._segments, *(s for _, s in self._retired)]:
            try:
                segment.close()
            except OSError as e:
                log.warning("%s: closing %s in an offline dir: %s", self.directory, segment, e)
        self._retired.clear()

    def delete(self) -> None:
        """Close the log and remove its directory.  The directory is first renamed to a name no
        partition can have, so a crash during the removal leaves nothing the manager would open
        (it removes such leftovers when it opens)."""
        self.close()
        doomed = self.directory.with_name(
            f"{self.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        os.rename(self.directory, doomed)
        fsync_directory(self.log_dir)
        shutil.rmtree(doomed)
