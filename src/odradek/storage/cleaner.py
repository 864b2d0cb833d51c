"""Log compaction: the log cleaner keeps the latest record of every key of compacted logs."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import threading
import time
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from odradek.clock import Clock
from odradek.protocol.control import InvalidControlBatch, read_end_txn_marker
from odradek.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, read_header
from odradek.protocol.records import (
    RecordDecodeError,
    RecordSpan,
    rebuild_batch,
    records_section,
    scan_records,
)
from odradek.storage import swap
from odradek.storage.checkpoint import read_checkpoint, write_checkpoint
from odradek.storage.fileio import fsync_directory, pread_upto
from odradek.storage.formats import (
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    MAX_RELATIVE_OFFSET,
    MAX_SEGMENT_BYTES,
)
from odradek.storage.index import OffsetIndex
from odradek.storage.log import LogConfig, PartitionLog
from odradek.storage.log_dir_failure import is_log_dir_failure
from odradek.storage.manager import LogManager
from odradek.storage.segment import AppendedBatch, LogSegment
from odradek.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

_READ_CHUNK = 4 << 20  # bytes of segment read at once
_WRITE_CHUNK = 1 << 20  # bytes of cleaned batches gathered before a write
# What one key of the offset map costs in memory besides its bytes: the dict slot, the bytes
# object's header and the int; used to keep the map within log.cleaner.dedupe.buffer.size.
_MAP_ENTRY_OVERHEAD = 100
_LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker's ``log.cleaner.*`` settings."""

    backoff_ms: int = 15_000
    dedupe_buffer_bytes: int = 128 << 20
    # Bytes per second the cleaner reads and writes at most; None: as fast as it can.
    io_max_bytes_per_second: float | None = None


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one cleaning pass of one log did."""

    topic: str
    partition: int
    first_offset: int  # where the cleaned range starts (the log start offset)
    end_offset: int  # where it ends: the first dirty offset from now on
    dirty_bytes: int  # bytes of not yet compacted log the pass took in
    bytes_read: int
    bytes_written: int
    records_read: int
    records_kept: int
    tombstones_removed: int
    segments_before: int
    segments_after: int
    seconds: float

    @property
    def dirty_mb_per_second(self) -> float:
        return self.dirty_bytes / 1e6 / self.seconds if self.seconds > 0 else float("inf")


@dataclass(slots=True)
class _LogState:
    """The cleaner's memory of one log."""

    log: PartitionLog | None  # None until the log is seen (a checkpoint entry read at start)
    first_dirty: int
    # The earliest delete horizon of the tombstones the last pass kept: due then for a pass.
    pending_horizon: int | None = None
    # Idempotent producer id → base offset of its last batch in the clean section, as the last
    # pass wrote it; None when not known (then the clean section's headers are read for it).
    clean_producers: dict[int, int] | None = None
    uncleanable: bool = False


@dataclass(frozen=True, slots=True)
class _Source:
    """A segment to read, with an fd of the cleaner's own (a dup: valid whatever the log does
    with the segment meanwhile)."""

    segment: LogSegment
    base_offset: int
    size: int
    index_entries: int
    fd: int


@dataclass(slots=True)
class _Plan:
    log: PartitionLog
    directory: Path
    config: LogConfig
    now_ms: int
    log_start: int
    first_dirty: int
    sources: list[_Source]  # from the segment holding the log start to the last cleanable one
    first_dirty_index: int  # sources[first_dirty_index:] are dirty
    limit_offset: int  # base offset of the first segment not to clean
    index_max_entries: int
    clean_producers: dict[int, int] | None
    # The aborted transactions of the sources' .txnindex files.
    aborted: list[AbortedTxn] = dataclasses.field(default_factory=list)


@dataclass(slots=True)
class _Stats:
    started: float = dataclasses.field(default_factory=time.monotonic)
    dirty_bytes: int = 0
    mapped_bytes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    min_horizon: int | None = None
    # Idempotent producer id → base offset of its last batch in the range cleaned, which stays
    # (empty if need be) so that the producer's sequence survives a restart; and the same of
    # the batches written.
    last_batches: dict[int, int] = dataclasses.field(default_factory=dict)
    written_producers: dict[int, int] = dataclasses.field(default_factory=dict)


@dataclass(slots=True)
class _Built:
    plan: _Plan
    prepared: Path | None
    replacements: list[tuple[LogSegment, list[LogSegment], list[int]]]
    end_offset: int
    stats: _Stats


class _Aborted(Exception):
    """The cleaner is stopping."""


class _Transactions:
    """Which batches of one traversal of a log, in offset order, belong to aborted
    transactions, and which markers may go (Kafka's ``CleanedTransactionMetadata``).

    An aborted transaction's data is removed; its ABORT marker stays as long as a pass still
    meets data of the transaction (the marker then keeps its ``.txnindex`` entry, in
    :attr:`kept`), a COMMIT marker as long as a pass meets data of its transaction.  A marker
    that may go is given a delete horizon (``delete.retention.ms``) first and removed by a pass
    after it, so that consumers reading meanwhile still see it."""

    def __init__(self, aborted: list[AbortedTxn], start: int) -> None:
        self._pending = sorted(
            (e for e in aborted if e.last_offset >= start), key=lambda e: e.first_offset
        )
        self._next = 0
        self._aborted: dict[int, tuple[AbortedTxn, list[bool]]] = {}
        self._committed: set[int] = set()
        self.kept: list[AbortedTxn] = []

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            entry = pending[self._next]
            self._aborted[entry.producer_id] = (entry, [False])
            self._next += 1

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether a data batch is part of an aborted transaction."""
        self._reach(header.last_offset)
        if not header.is_transactional:
            return False
        found = self._aborted.get(header.producer_id)
        if found is not None:
            found[1][0] = True
            return True
        self._committed.add(header.producer_id)
        return False

    def marker_may_go(self, header: BatchHeader, batch: memoryview) -> bool:
        self._reach(header.last_offset)
        try:
            marker = read_end_txn_marker(batch, dataclasses.replace(header, position=0))
        except InvalidControlBatch:
            return False  # not a marker this cleaner understands: kept
        if marker.commit:
            if header.producer_id in self._committed:
                self._committed.discard(header.producer_id)
                return False
            return True
        found = self._aborted.pop(header.producer_id, None)
        if found is not None and found[1][0]:
            self.kept.append(found[0])
            return False
        return True


class LogCleaner:
    """Compacts the logs whose ``cleanup.policy`` has ``compact``, one pass at a time.

    What a pass does, as Kafka's cleaner does it: a log is the clean section (compacted before)
    followed by the dirty section (appended since), up to the first uncleanable segment (the
    active one, or the first younger than ``min.compaction.lag.ms``).  A log is picked when its
    dirty bytes are at least ``min.cleanable.dirty.ratio`` of both sections, when its oldest
    dirty record is older than ``max.compaction.lag.ms``, or when tombstones it kept have come
    to their delete horizon; among several, the dirtiest.  The pass maps every key of the dirty
    section to its last offset (within ``log.cleaner.dedupe.buffer.size``; a bigger dirty
    section is cleaned in several passes), then rewrites the log from its start to the end of
    what it mapped, keeping a record only if it is the latest of its key.  Offsets never change:
    a batch that keeps every record is copied as it is; one that loses some is rebuilt with the
    same base offset and offset range (and the topic's codec, if it has one); one that loses all
    goes.  Records without a key go too.  Runs of small cleaned segments are merged up to
    ``segment.bytes``.

    Tombstones (null values): as in KIP-534, a batch with tombstones gets a delete horizon the
    first time it is cleaned, ``delete.retention.ms`` after that pass, and its tombstones go in
    the first pass after the horizon, which is when a consumer had at least that long to see
    them.  The cleaner remembers the earliest horizon pending in each log and cleans it then even
    without new dirty records; it forgets across restarts, and a log's next pass catches up.

    Format: per log dir, ``cleaner-offset-checkpoint`` (Kafka's checkpoint format) holds each
    compacted partition's first dirty offset; the cleaned segments are written and swapped in as
    :mod:`odradek.storage.swap` describes.

    Crash: a pass either commits (its swap manifest is renamed into place) or leaves no trace;
    recovery finishes a committed one.  The checkpoint is written after a pass, so after a crash
    it can only be behind, which makes the next pass clean some records again: harmless.

    Threads and callers: the event loop plans a pass (choosing the log, duplicating the fds of
    its segments), a single cleaner thread does the reading, mapping and writing, and the event
    loop swaps the result in with :meth:`PartitionLog.replace_segments`, which refuses it if
    the log changed underneath (retention, truncation, deletion); readers never see a half
    state, and reads in flight keep the old segments' fds.  The server calls :meth:`start` and
    :meth:`stop` (``run`` is the loop in between); tests and tools call :meth:`clean_once`
    (everything on the calling thread) or :meth:`clean_now`.
    """

    def __init__(self, logs: LogManager, clock: Clock, config: CleanerConfig | None = None) -> None:
        self.logs = logs
        self.clock = clock
        self.config = config or CleanerConfig()
        self._states: dict[tuple[str, int], _LogState] = {}
        for log_dir in logs.online_dirs():
            try:
                checkpointed = read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
            except OSError as e:
                if not is_log_dir_failure(e):
                    raise
                logs.failures.mark_offline(log_dir, e)
                continue
            for key, offset in checkpointed.items():
                self._states[key] = _LogState(None, offset)
        self._abort = threading.Event()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._building: asyncio.Future[_Built | None] | None = None
        # For the metrics (Kafka's LogCleaner and LogCleanerManager gauges), written on the
        # event loop when a log is chosen and when a pass is swapped in.
        self.passes = 0
        self.last_result: CleanResult | None = None
        self.max_dirty_ratio = 0.0  # the dirtiest cleanable log's, at the last choice
        self.last_run_ms: int | None = None  # when the cleaner last looked for a log

    # -- choosing a log ------------------------------------------------------------------------

    def _state(self, partition_log: PartitionLog) -> _LogState:
        key = (partition_log.topic, partition_log.partition)
        state = self._states.get(key)
        if state is None or (state.log is not None and state.log is not partition_log):
            state = _LogState(partition_log, partition_log.log_start_offset)
            self._states[key] = state
        state.log = partition_log
        if not (
            partition_log.log_start_offset <= state.first_dirty <= partition_log.log_end_offset
        ):
            state.first_dirty = partition_log.log_start_offset
            state.clean_producers = None
        return state

    def first_dirty_offset(self, partition_log: PartitionLog) -> int:
        """Where the next pass over this log starts mapping keys."""
        return self._state(partition_log).first_dirty

    def _candidate(self, partition_log: PartitionLog, now: int) -> tuple[bool, float] | None:
        """(urgent, dirty ratio) of a log worth a pass now, else None."""
        config = partition_log.config
        if not config.compact or partition_log.closed:
            return None
        state = self._state(partition_log)
        if state.uncleanable:
            return None
        segments = partition_log.segments
        first, dirty, limit = self._sections(partition_log, state, now)
        clean_bytes = sum(s.size for s in segments[first:dirty])
        dirty_bytes = sum(s.size for s in segments[dirty:limit])
        horizon_due = state.pending_horizon is not None and state.pending_horizon <= now
        if dirty_bytes == 0:
            return (True, 0.0) if horizon_due and dirty > first else None
        ratio = dirty_bytes / (clean_bytes + dirty_bytes)
        lag_due = False
        if config.max_compaction_lag_ms is not None:
            oldest = segments[dirty].first_batch_timestamp
            lag_due = oldest is not None and 0 <= oldest < now - config.max_compaction_lag_ms
        if lag_due or horizon_due:
            return True, ratio
        return (False, ratio) if ratio >= config.min_cleanable_dirty_ratio else None

    def _sections(
        self, partition_log: PartitionLog, state: _LogState, now: int
    ) -> tuple[int, int, int]:
        """Indexes into the log's segments: the one holding the log start, the one holding the
        first dirty offset, and the first uncleanable one."""
        segments = partition_log.segments
        bases = [s.base_offset for s in segments]
        first = max(0, bisect_right(bases, partition_log.log_start_offset) - 1)
        dirty = max(first, bisect_right(bases, state.first_dirty) - 1)
        limit = len(segments) - 1  # the active segment is never cleaned
        # Nor the segment holding the first unstable offset or any after it: a transaction not
        # decided (or whose marker is not replicated) is cleaned once it is known what it was.
        first_unstable = partition_log.first_unstable_offset
        if first_unstable is not None:
            limit = min(limit, max(0, bisect_right(bases, first_unstable) - 1))
        lag = partition_log.config.min_compaction_lag_ms
        if lag > 0:
            for j in range(dirty, limit):
                newest = segments[j].max_timestamp
                if newest < 0:
                    newest = segments[j].last_modified_ms()
                if newest > now - lag:
                    limit = j
                    break
        return first, min(dirty, limit), limit

    def _plan(self) -> _Plan | None:
        now = self.clock.time_ms()
        best: tuple[tuple[bool, float], PartitionLog] | None = None
        dirtiest = 0.0
        for partition_log in self.logs.online_logs():
            candidate = self._candidate(partition_log, now)
            if candidate is not None:
                dirtiest = max(dirtiest, candidate[1])
                if best is None or candidate > best[0]:
                    best = (candidate, partition_log)
        self.max_dirty_ratio = dirtiest
        self.last_run_ms = now
        if best is None:
            return None
        return self._plan_for(best[1], now)

    def _plan_for(self, partition_log: PartitionLog, now: int) -> _Plan:
        state = self._state(partition_log)
        first, dirty, limit = self._sections(partition_log, state, now)
        segments = partition_log.segments
        sources = [
            _Source(s, s.base_offset, s.size, len(s.offset_index), s.dup_fd())
            for s in segments[first:limit]
        ]
        config = partition_log.config
        return _Plan(
            log=partition_log,
            directory=partition_log.directory,
            config=config,
            now_ms=now,
            log_start=partition_log.log_start_offset,
            first_dirty=max(state.first_dirty, partition_log.log_start_offset),
            sources=sources,
            first_dirty_index=dirty - first,
            limit_offset=segments[limit].base_offset,
            index_max_entries=max(1, config.segment_index_bytes // OffsetIndex.entry.size),
            clean_producers=None if state.clean_producers is None else dict(state.clean_producers),
            # Markers of transactions with data in the sources can lie in later segments.
            aborted=[
                e
                for s in segments[first:]
                for e in s.txn_index.entries
                if e.first_offset < segments[limit].base_offset
            ],
        )

    # -- cleaning (the cleaner thread) ---------------------------------------------------------

    def _build(self, plan: _Plan) -> _Built | None:
        """Map the dirty section and write the cleaned segments; None if there is nothing to
        write.  Closes the plan's fds whatever happens."""
        stats = _Stats()
        new_segments: list[LogSegment] = []
        prepared: Path | None = None
        try:
            if plan.clean_producers is None:
                for source in plan.sources[: plan.first_dirty_index]:
                    for header, _ in _batches(source.fd, source.size):
                        self._check(stats)
                        if header.producer_id >= 0:
                            stats.last_batches[header.producer_id] = header.base_offset
            else:
                stats.last_batches.update(plan.clean_producers)
            offsets, mapped = self._build_offset_map(plan, stats)
            end_offset = (
                plan.sources[mapped].base_offset
                if mapped < len(plan.sources)
                else plan.limit_offset
            )
            to_clean = plan.sources[:mapped]
            if not to_clean:
                return None
            replacements: list[tuple[LogSegment, list[LogSegment], list[int]]] = []
            txns = _Transactions(plan.aborted, plan.sources[0].base_offset)
            for group in self._groups(plan, to_clean, end_offset):
                kept_before = len(txns.kept)
                new = self._clean_group(plan, group, offsets, stats, txns)
                for entry in txns.kept[kept_before:]:
                    new.txn_index.append(entry)
                new_segments.append(new)
                replacements.append((new, [s.segment for s in group], [s.size for s in group]))
                swap.crash_point("cleaned-group")
            for new in new_segments:
                new.flush()
            prepared = swap.prepare(
                plan.directory,
                {new.base_offset: [s.base_offset for s in old] for new, old, _ in replacements},
            )
            swap.crash_point("prepared")
            return _Built(plan, prepared, replacements, end_offset, stats)
        except BaseException:
            swap.discard(prepared, new_segments)
            raise
        finally:
            for source in plan.sources:
                os.close(source.fd)

    def _check(self, stats: _Stats) -> None:
        if self._abort.is_set():
            raise _Aborted
        limit = self.config.io_max_bytes_per_second
        if limit:
            done = stats.mapped_bytes + stats.bytes_read + stats.bytes_written
            ahead = done / limit - (time.monotonic() - stats.started)
            if ahead > 0 and self._abort.wait(min(ahead, 0.1)):
                raise _Aborted

    def _build_offset_map(self, plan: _Plan, stats: _Stats) -> tuple[dict[bytes, int], int]:
        """Key → last offset over the dirty sources, whole segments while the map fits in the
        dedupe buffer (at least one); returns it and the index of the first source not mapped."""
        offsets: dict[bytes, int] = {}
        # The map's memory is estimated from its size and the keys' mean length, sampled from
        # the first key of each batch.
        sampled_keys = sampled_bytes = 0
        budget = self.config.dedupe_buffer_bytes
        first_dirty = plan.first_dirty
        index = plan.first_dirty_index
        txns = (
            _Transactions(plan.aborted, plan.sources[index].base_offset)
            if index < len(plan.sources)
            else None
        )
        while index < len(plan.sources):
            if index > plan.first_dirty_index:
                mean_key = sampled_bytes / sampled_keys if sampled_keys else 0
                if len(offsets) * (_MAP_ENTRY_OVERHEAD + mean_key) > budget:
                    break
            source = plan.sources[index]
            for header, batch in _batches(source.fd, source.size):
                self._check(stats)
                stats.mapped_bytes += header.size
                if header.last_offset < first_dirty:
                    continue
                if header.producer_id >= 0:
                    stats.last_batches[header.producer_id] = header.base_offset
                assert txns is not None
                if header.is_control:
                    txns.marker_may_go(header, batch)
                    continue
                if txns.is_aborted(header):
                    continue  # its records are removed: they supersede nothing
                base = header.base_offset
                spans = scan_records(records_section(batch, header), header.record_count)
                if spans and spans[0][2] is not None:
                    sampled_keys += 1
                    sampled_bytes += len(spans[0][2])
                if base >= first_dirty:
                    for span in spans:
                        if span[2] is not None:
                            offsets[span[2]] = base + span[0]
                else:
                    for span in spans:
                        if span[2] is not None and base + span[0] >= first_dirty:
                            offsets[span[2]] = base + span[0]
            stats.dirty_bytes += source.size
            index += 1
        return offsets, index

    def _groups(
        self, plan: _Plan, sources: list[_Source], end_offset: int
    ) -> Iterator[list[_Source]]:
        """Runs of sources whose cleaned output fits one segment: at most segment.bytes in all
        (a run is no bigger cleaned), an offset range an index can address, and index entries
        that fit the index."""
        max_bytes = min(plan.config.segment_bytes, MAX_SEGMENT_BYTES)
        group: list[_Source] = []
        size = entries = 0
        for i, source in enumerate(sources):
            next_base = sources[i + 1].base_offset if i + 1 < len(sources) else end_offset
            if group and (
                size + source.size > max_bytes
                or entries + source.index_entries > plan.index_max_entries
                or next_base - 1 - group[0].base_offset > MAX_RELATIVE_OFFSET
            ):
                yield group
                group, size, entries = [], 0, 0
            group.append(source)
            size += source.size
            entries += source.index_entries
        if group:
            yield group

    def _clean_group(
        self,
        plan: _Plan,
        group: list[_Source],
        offsets: dict[bytes, int],
        stats: _Stats,
        txns: _Transactions,
    ) -> LogSegment:
        config = plan.config
        segment = LogSegment.create(
            plan.directory,
            group[0].base_offset,
            config.segment_index_bytes,
            plan.now_ms,
            suffix=CLEANED_SUFFIX,
            files=plan.log.open_files,
        )
        try:
            out = bytearray()
            batches: list[AppendedBatch] = []
            for source in group:
                for header, batch in _batches(source.fd, source.size):
                    self._check(stats)
                    stats.bytes_read += header.size
                    kept = self._clean_batch(plan, header, batch, offsets, stats, txns)
                    if kept is None:
                        continue
                    kept_header = read_header(kept) if kept is not batch else header
                    batches.append(
                        AppendedBatch(
                            len(out), len(kept), kept_header.last_offset, kept_header.max_timestamp
                        )
                    )
                    out += kept
                    if len(out) >= _WRITE_CHUNK:
                        segment.append(out, batches, config.index_interval_bytes)
                        stats.bytes_written += len(out)
                        out, batches = bytearray(), []
            if batches:
                segment.append(out, batches, config.index_interval_bytes)
                stats.bytes_written += len(out)
            segment.seal()
        except BaseException:
            segment.close()
            segment.unlink()
            raise
        return segment

    def _clean_batch(
        self,
        plan: _Plan,
        header: BatchHeader,
        batch: memoryview,
        offsets: dict[bytes, int],
        stats: _Stats,
        txns: _Transactions,
    ) -> memoryview | bytes | None:
        """The batch as the cleaned log holds it: itself, rebuilt with fewer records, or None."""
        if header.last_offset < plan.log_start:
            stats.records_read += header.record_count
            return None
        if header.is_control:
            return self._clean_marker(plan, header, batch, stats, txns)
        stats.records_read += header.record_count
        section = records_section(batch, header)
        if txns.is_aborted(header):
            if stats.last_batches.get(header.producer_id) != header.base_offset:
                return None
            self._note_written(header, stats)
            return batch if header.record_count == 0 else rebuild_batch(header, section, [])
        spans = scan_records(section, header.record_count)
        base = header.base_offset
        log_start = plan.log_start
        horizon = header.delete_horizon
        expired = horizon is not None and horizon <= plan.now_ms
        kept: list[RecordSpan] = []
        has_tombstones = False
        get = offsets.get
        for span in spans:
            key = span[2]
            if key is None:
                continue
            offset = base + span[0]
            latest = get(key)
            if (latest is not None and offset < latest) or offset < log_start:
                continue
            if span[3]:
                if expired:
                    stats.tombstones_removed += 1
                    continue
                has_tombstones = True
            kept.append(span)
        stats.records_kept += len(kept)
        if not kept:
            producer = header.producer_id
            if producer < 0 or stats.last_batches.get(producer) != header.base_offset:
                return None
            # An idempotent producer's last batch stays, emptied, for its sequence numbers.
            self._note_written(header, stats)
            return batch if header.record_count == 0 else rebuild_batch(header, section, [])
        self._note_written(header, stats)
        if has_tombstones:
            if horizon is None:
                horizon = min(plan.now_ms + plan.config.delete_retention_ms, _LONG_MAX)
            if stats.min_horizon is None or horizon < stats.min_horizon:
                stats.min_horizon = horizon
        if len(kept) == len(spans) and (horizon is None or header.delete_horizon is not None):
            return batch
        return rebuild_batch(
            header, section, kept, compression=plan.config.compression, delete_horizon_ms=horizon
        )

    def _clean_marker(
        self,
        plan: _Plan,
        header: BatchHeader,
        batch: memoryview,
        stats: _Stats,
        txns: _Transactions,
    ) -> memoryview | bytes | None:
        if not txns.marker_may_go(header, batch):
            self._note_written(header, stats)
            return batch
        horizon = header.delete_horizon
        if horizon is not None and horizon <= plan.now_ms:
            return None
        self._note_written(header, stats)
        if horizon is None:
            horizon = min(plan.now_ms + plan.config.delete_retention_ms, _LONG_MAX)
            section = records_section(batch, header)
            spans = scan_records(section, header.record_count)
            batch_out: memoryview | bytes = rebuild_batch(
                header, section, spans, delete_horizon_ms=horizon
            )
        else:
            batch_out = batch
        if stats.min_horizon is None or horizon < stats.min_horizon:
            stats.min_horizon = horizon
        return batch_out

    @staticmethod
    def _note_written(header: BatchHeader, stats: _Stats) -> None:
        if header.producer_id >= 0:
            stats.written_producers[header.producer_id] = header.base_offset

    # -- swapping in (the event loop) ----------------------------------------------------------

    def _swap(self, built: _Built) -> CleanResult | None:
        plan = built.plan
        segments_before = plan.log.segment_count()
        assert built.prepared is not None
        if not plan.log.replace_segments(built.prepared, built.replacements):
            log.info(
                "%s-%d changed during its cleaning pass; the pass is dropped",
                plan.log.topic,
                plan.log.partition,
            )
            swap.discard(built.prepared, [new for new, _, _ in built.replacements])
            return None
        state = self._state(plan.log)
        state.first_dirty = built.end_offset
        state.pending_horizon = built.stats.min_horizon
        state.clean_producers = built.stats.written_producers
        self.passes += 1
        stats = built.stats
        result = CleanResult(
            topic=plan.log.topic,
            partition=plan.log.partition,
            first_offset=plan.log_start,
            end_offset=built.end_offset,
            dirty_bytes=stats.dirty_bytes,
            bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written,
            records_read=stats.records_read,
            records_kept=stats.records_kept,
            tombstones_removed=stats.tombstones_removed,
            segments_before=segments_before,
            segments_after=plan.log.segment_count(),
            seconds=time.monotonic() - stats.started,
        )
        self.last_result = result
        log.info(
            "cleaned %s-%d up to offset %d: %.1f MB of dirty log at %.1f MB/s, %d of %d records "
            "kept, %d tombstones removed, %d -> %d bytes, %d -> %d segments",
            result.topic,
            result.partition,
            result.end_offset,
            result.dirty_bytes / 1e6,
            result.dirty_mb_per_second,
            result.records_kept,
            result.records_read,
            result.tombstones_removed,
            result.bytes_read,
            result.bytes_written,
            result.segments_before,
            result.segments_after,
        )
        return result

    def _skip_pass(self, plan: _Plan, error: Exception) -> None:
        """A log the cleaner cannot read is left alone until the broker restarts, as Kafka
        marks such a partition uncleanable; other logs are still cleaned."""
        log.error(
            "cannot clean %s-%d, leaving it uncleaned: %s",
            plan.log.topic,
            plan.log.partition,
            error,
        )
        self._state(plan.log).uncleanable = True

    def _io_failed(self, plan: _Plan, error: OSError) -> None:
        """A pass that could not read or write its log's dir takes the dir offline, as Kafka's
        cleaner does; the cleaner then leaves that dir's logs alone."""
        if is_log_dir_failure(error):
            self.logs.failures.mark_offline(plan.directory.parent, error)

    def _checkpoint_entries(self) -> dict[Path, dict[tuple[str, int], int]]:
        entries: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.logs.online_dirs()}
        for partition_log in self.logs.online_logs():
            if partition_log.config.compact:
                state = self._state(partition_log)
                entries.setdefault(partition_log.log_dir, {})[
                    (partition_log.topic, partition_log.partition)
                ] = state.first_dirty
        return entries

    @staticmethod
    def _write_checkpoints(
        entries: dict[Path, dict[tuple[str, int], int]], directory: Path
    ) -> None:
        fsync_directory(directory)
        for log_dir, dir_entries in entries.items():
            write_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, dir_entries)

    # -- driving -------------------------------------------------------------------------------

    def clean_until_done(self, rounds: int = 100) -> list[CleanResult]:
        """:meth:`clean_once` until no log needs a pass (at most ``rounds`` passes)."""
        results = []
        for _ in range(rounds):
            result = self.clean_once()
            if result is None:
                break
            results.append(result)
        return results

    def clean_once(self) -> CleanResult | None:
        """One pass over the log most in need, all on the calling thread (tests, tools)."""
        plan = self._plan()
        if plan is None:
            return None
        try:
            built = self._build(plan)
        except RecordDecodeError as e:
            self._skip_pass(plan, e)
            return None
        except OSError as e:
            self._io_failed(plan, e)
            raise
        if built is None:
            return None
        result = self._swap(built)
        if result is not None:
            self._write_checkpoints(self._checkpoint_entries(), plan.directory)
        return result

    async def clean_now(self) -> CleanResult | None:
        """One pass, its reading and writing in the cleaner thread (one pass at a time)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            plan = self._plan()
            if plan is None:
                return None
            loop = asyncio.get_running_loop()
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="odradek-cleaner"
                )
            self._building = loop.run_in_executor(self._executor, self._build, plan)
            try:
                built = await asyncio.shield(self._building)
            except RecordDecodeError as e:
                self._skip_pass(plan, e)
                return None
            except OSError as e:
                self._io_failed(plan, e)
                raise
            finally:
                self._building = None
            if built is None:
                return None
            result = self._swap(built)
            if result is not None:
                await loop.run_in_executor(
                    self._executor,
                    self._write_checkpoints,
                    self._checkpoint_entries(),
                    plan.directory,
                )
            return result

    def uncleanable_count(self) -> int:
        """Logs left alone after a pass could not read them (until the broker restarts)."""
        return sum(1 for state in self._states.values() if state.uncleanable)

    def wake(self) -> None:
        """Look for work now rather than after the backoff."""
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Clean logs until cancelled, waiting ``log.cleaner.backoff.ms`` whenever none needs
        it."""
        self._wake = asyncio.Event()
        while True:
            try:
                result = await self.clean_now()
            except _Aborted:
                return
            except Exception:
                log.exception("log cleaner pass failed")
                result = None
            if result is None:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.config.backoff_ms / 1000)

    def start(self) -> None:
        self._abort.clear()
        self._task = asyncio.get_running_loop().create_task(self.run(), name="odradek-cleaner")

    async def stop(self) -> None:
        """Stop cleaning: a pass being built is abandoned (its files removed), none is swapped."""
        self._abort.set()
        building = self._building
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, _Aborted):
                await self._task
            self._task = None
        if building is not None:
            try:
                built = await building
            except BaseException:  # the abandoned pass's own end
                built = None
            if built is not None:
                swap.discard(built.prepared, [new for new, _, _ in built.replacements])
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def _batches(fd: int, size: int) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Each whole batch of the first ``size`` bytes of a segment file: its bytes, and its header
    as read from them (position 0)."""
    position = 0
    chunk = b""
    chunk_start = 0
    while position + HEADER_SIZE <= size:
        offset = position - chunk_start
        if offset + HEADER_SIZE > len(chunk):
            chunk = pread_upto(fd, min(_READ_CHUNK, size - position), position)
            chunk_start, offset = position, 0
            if len(chunk) < HEADER_SIZE:
                return
        header = read_header(chunk, offset)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > size:
            raise RecordDecodeError(f"no whole batch at byte {position} of a segment")
        if offset + header.size > len(chunk):
            chunk = pread_upto(fd, min(max(_READ_CHUNK, header.size), size - position), position)
            chunk_start, offset = position, 0
        view = memoryview(chunk)[offset : offset + header.size]
        yield (header if header.position == 0 else read_header(view)), view
        position += header.size
