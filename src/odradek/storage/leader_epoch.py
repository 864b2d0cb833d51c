"""The leader epoch cache of one partition: at which offset each leader epoch began (KIP-101).

Every batch a leader appends carries its leader epoch in the header.  The cache keeps, per epoch,
the first offset written in it, which is what OffsetForLeaderEpoch answers from and what a
follower compares with the leader's answer to find where its log diverges (KIP-101, KIP-279).

Format: ``leader-epoch-checkpoint`` in the partition directory, Kafka's text format (see
:mod:`odradek.storage.formats`).

Crash: the file is replaced whole by :func:`~odradek.storage.fileio.write_file_atomically`, so
it is the old or the new list.  The file is always the memory's list, or (after a new latest
entry not yet written) a prefix of it: a new latest entry is kept in memory and written by the
log's next flush, or its close, before the recovery point moves over any batch of its epoch.
Not at each new epoch: a broker taking thousands of leaderships writes no file for them then
(Kafka, since KAFKA-15046, writes it at once and fsyncs it later).  A flush handed to the
flusher at a roll writes it on the event loop, without an fsync, once per roll at most; the
flusher fsyncs it.  After a crash, whether the process was killed or the
machine lost power, the file may then lack only entries newer than all it holds, whose batches
all lie past the recovery point: recovery rereads those batches, and records each epoch above
the file's latest at its first batch (Kafka's rule when it recovers a segment).  A new leader's
entry at the log end with no batch of its epoch yet may be lost so: the partition's leader
assigns it again as it starts (its epoch, or a later one), before it answers
OffsetForLeaderEpoch, and a follower's entries are replaced by its leader's history.  An
entry that overrules others (a follower's log taking an older leader's history) and
truncations at the end are written at once: there the file would otherwise keep an entry that
recovery's reread cannot correct.  Truncations at the
start are not (see :meth:`LeaderEpochCache.truncate_from_start`): the file may keep entries
before the log's start, and the log removes those when it opens, by truncating the cache to the
offsets it recovered.  A file that cannot be parsed (torn by something that is not our rename,
or damaged) reads as None, and the log rebuilds the cache from its batch headers.

Caller: :class:`~odradek.storage.log.PartitionLog`, on the event-loop thread.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from odradek.storage.fileio import fsync_directory, read_file, write_file_atomically
from odradek.storage.formats import (
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
)

log = logging.getLogger(__name__)

# OffsetForLeaderEpoch's "unknown" epoch and end offset.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """The ``(epoch, start offset)`` entries of one partition, epochs and offsets growing
    strictly, kept in memory and in ``leader-epoch-checkpoint``."""

    def __init__(self, path: Path, entries: Iterable[EpochEntry] = ()) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for entry in entries:
            self._epochs.append(entry.epoch)
            self._starts.append(entry.start_offset)
        self._dirty = False
        # Written without an fsync since the last one: the log's flush fsyncs it.
        self.unsynced = False

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache | None:
        """The cache in ``path``; None if the file is missing or is not a whole checkpoint."""
        try:
            data = read_file(path)
        except FileNotFoundError:
            return None
        try:
            entries = parse_leader_epoch_checkpoint(data)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("%s is unreadable (%s); it will be rebuilt from the log", path, e)
            return None
        return cls(path, (EpochEntry(epoch, start) for epoch, start in entries))

    # -- reading ---------------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(EpochEntry(e, s) for e, s in zip(self._epochs, self._starts, strict=True))

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def dirty(self) -> bool:
        """Whether the file lags behind the entries in memory (see :meth:`write_if_dirty`)."""
        return self._dirty

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as OffsetForLeaderEpoch answers for ``requested_epoch``.

        The epoch is the largest one known that is not above the requested one (KIP-279: a
        follower asking about an epoch this log never saw learns the one before it), and the end
        offset is the start of the next epoch known, or ``log_end_offset`` for the latest
        epoch.  An epoch below every known one gets the start of the first known epoch, as in
        Kafka 2.1 and later: the log before it is gone, and the asker should not keep more than
        this log starts with.  UNDEFINED for both when the requested epoch is UNDEFINED, above
        the latest one, or the cache is empty.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at ``offset`` was written in, if the cache goes back that far."""
        i = bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else None

    # -- changing --------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything changed.

        As in Kafka 3.x, the latest epoch seen again at or after its start changes nothing (the
        common case: every append); anything else is a new latest entry, and entries it
        contradicts (an epoch not below it, or a start offset not below its own) are dropped
        first, so the entries keep growing strictly.  A new latest entry is written by the next
        :meth:`write_if_dirty` (the log's flush or close); one that dropped entries is written
        at once (see the module doc).
        """
        return self.assign_all((EpochEntry(epoch, start_offset),))

    def assign_all(self, entries: Iterable[EpochEntry]) -> bool:
        """:meth:`assign` each entry in turn, writing the file once at the end if an entry
        dropped others; returns whether anything changed."""
        changed = overruled = False
        for entry in entries:
            result = self._assign(entry.epoch, entry.start_offset)
            changed = changed or result is not None
            overruled = overruled or bool(result)
        if overruled:
            self.write(sync=False)
        elif changed:
            self._dirty = True
        return changed

    def _assign(self, epoch: int, start_offset: int) -> bool | None:
        """None if nothing changed, else whether entries were dropped."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and self._epochs[-1] == epoch and start_offset >= self._starts[-1]:
            return None
        removed: list[EpochEntry] = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append(EpochEntry(self._epochs.pop(), self._starts.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            # One entry at the same start offset is a leader re-elected before it wrote
            # anything; more than that means this log held data of epochs now overruled.
            log.warning(
                "%s: epoch %d at offset %d overrules the entries %s",
                self.path,
                epoch,
                start_offset,
                removed,
            )
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return bool(removed)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated there),
        written to the file at once: an epoch whose batches are gone must not survive a crash
        in the file, where a later append of the same epoch would not replace it."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
        self.write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset`` (retention, DeleteRecords): drop the entries
        before it, the epoch holding it now starting there.  Written by the next
        :meth:`write_if_dirty` (the log's flush), not at once: an older file only has entries
        before the log start, which opening the log drops again."""
        keep = bisect_right(self._starts, start_offset)
        if keep == 0 or (keep == 1 and self._starts[0] == start_offset):
            return  # nothing before it (every open asks: the file is not written again)
        epoch = self._epochs[keep - 1]
        del self._epochs[:keep]
        del self._starts[:keep]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._dirty = True

    def clear(self) -> None:
        """Forget every entry (the log was emptied), written to the file at once."""
        self._epochs.clear()
        self._starts.clear()
        self.write()

    def write(self, *, sync: bool = True, sync_directory: bool = True) -> None:
        entries = list(zip(self._epochs, self._starts, strict=True))
        write_file_atomically(
            self.path,
            format_leader_epoch_checkpoint(entries),
            sync=sync,
            sync_directory=sync_directory,
        )
        self._dirty = False
        self.unsynced = not sync

    def write_if_dirty(self, *, sync: bool = True, sync_directory: bool = True) -> bool:
        """Write pending truncations, or fsync an entry written without it (a flush).  With
        ``sync_directory=False`` the caller fsyncs the directory after, if this returns True;
        with ``sync=False`` nothing is fsynced (the caller syncs the whole file system)."""
        if self._dirty:
            self.write(sync=sync, sync_directory=sync_directory)
            return True
        if self.unsynced and sync:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if sync_directory:
                fsync_directory(self.path.parent)
            self.unsynced = False
            return True
        return False
