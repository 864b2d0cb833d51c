"""The state of one share group on one partition (KIP-932's share-partition, Kafka's
``SharePartition``), kept by the partition's leader: which records the group's members hold, for
how long, and how often each was delivered.

Offsets below ``start_offset`` are done for the group. Between ``start_offset`` and
``end_offset`` (the first offset never acquired) the records still in flight are kept one entry
each, in offset order; an offset there without an entry is done too (acknowledged, archived, a
control record, an aborted one under read_committed, or a gap the log does not have). A record in
flight is AVAILABLE (to be delivered again) or ACQUIRED by one member until its lock's deadline.
Acknowledging it ACCEPT or REJECT ends it (ACKNOWLEDGED, ARCHIVED); RELEASE makes it AVAILABLE
again, unless it was delivered ``delivery_count_limit`` times, when it is ARCHIVED (a poison
record stops there); RENEW moves its lock's deadline. A lock that passes its deadline releases the
record the same way. At most ``max_record_locks`` records are in flight: no new record is acquired
beyond that until some are done.

Time is the caller's (monotonic ms from the injected clock): nothing here waits or reads a
clock. Persisted by the share coordinator (its manager writes :meth:`SharePartition.state_batches`
and makes one again from them with :meth:`SharePartition.restore`): a record in flight is stored
AVAILABLE with its delivery count (an acquisition's lock does not outlive its leader), every
offset done between it and the start offset ACKNOWLEDGED. Called on the broker's event loop only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from odradek.cluster.share.persister import ACKNOWLEDGED, AVAILABLE, StateBatch
from odradek.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's record states, by their ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """A batch read from the log, as acquisition needs it: its offsets, and whether its records
    can never be delivered (a control batch, or one of an aborted transaction under
    read_committed)."""

    base_offset: int
    last_offset: int
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    first_offset: int
    last_offset: int
    # One type for the whole range, or one per offset.
    types: tuple[int, ...]


class SharePartition:
    """One share group's records of one partition (see the module doc)."""

    def __init__(
        self,
        start_offset: int,
        *,
        delivery_count_limit: int,
        max_record_locks: int,
    ) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        # Offset order: new entries are always above every entry there.
        self._records: dict[int, InFlight] = {}
        self._available = 0
        # The share coordinator's state epoch of what is persisted (a reset starts a new one).
        self.state_epoch = 0

    @classmethod
    def restore(
        cls,
        start_offset: int,
        batches: Iterable[StateBatch],
        *,
        state_epoch: int,
        delivery_count_limit: int,
        max_record_locks: int,
    ) -> SharePartition:
        """The share-partition as persisted: every AVAILABLE offset of ``batches`` in flight
        again with its delivery count, every other one done (nothing below ``start_offset``)."""
        share = cls(
            start_offset,
            delivery_count_limit=delivery_count_limit,
            max_record_locks=max_record_locks,
        )
        share.state_epoch = state_epoch
        for batch in sorted(batches, key=lambda b: b.first_offset):
            last = batch.last_offset
            if last < start_offset:
                continue
            if batch.delivery_state == AVAILABLE:
                for offset in range(max(batch.first_offset, share.end_offset), last + 1):
                    share._records[offset] = InFlight(
                        RecordState.AVAILABLE, batch.delivery_count, None, 0
                    )
                    share._available += 1
            share.end_offset = max(share.end_offset, last + 1)
        share._advance()
        return share

    def state_batches(self) -> list[StateBatch]:
        """What to persist: the offsets from the start offset to the end offset, as ranges."""
        batches: list[StateBatch] = []

        def add(first: int, last: int, state: int, count: int) -> None:
            prev = batches[-1] if batches else None
            if (
                prev is not None
                and prev.last_offset + 1 == first
                and (prev.delivery_state, prev.delivery_count) == (state, count)
            ):
                batches[-1] = StateBatch(prev.first_offset, last, state, count)
            else:
                batches.append(StateBatch(first, last, state, count))

        next_offset = self.start_offset
        for offset, record in self._records.items():
            if offset > next_offset:
                add(next_offset, offset - 1, ACKNOWLEDGED, 0)
            add(offset, offset, AVAILABLE, record.delivery_count)
            next_offset = offset + 1
        if next_offset < self.end_offset:
            add(next_offset, self.end_offset - 1, ACKNOWLEDGED, 0)
        return batches

    # -- reading the state ---------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self._records)

    def state_of(self, offset: int) -> InFlight | None:
        return self._records.get(offset)

    def next_deadline(self) -> int | None:
        deadlines = [
            r.deadline_ms for r in self._records.values() if r.state is RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    def next_fetch_offset(self) -> int | None:
        """Where a fetch for the group reads from: the first record to deliver again, else the
        first never acquired; None when there is none and no room for new ones."""
        if self._available:
            for offset, record in self._records.items():
                if record.state is RecordState.AVAILABLE:
                    return offset
        if len(self._records) >= self.max_record_locks:
            return None
        return self.end_offset

    def lag(self, log_end: int) -> int:
        """Records not yet done for the group, ``log_end`` the partition's readable end."""
        return max(log_end - self.end_offset, 0) + len(self._records)

    # -- changing it ---------------------------------------------------------------------------

    def reset(self, start_offset: int) -> None:
        """Start again from ``start_offset`` (AlterShareGroupOffsets; a log truncated under the
        group), forgetting what was in flight."""
        self._records.clear()
        self._available = 0
        self.start_offset = self.end_offset = start_offset
        self.state_epoch += 1

    def acquire(
        self,
        member_id: str,
        batches: Iterable[FetchedBatch],
        max_records: int,
        now_ms: int,
        lock_ms: int,
    ) -> list[AcquiredRange]:
        """Acquire for ``member_id``, locked until ``now_ms + lock_ms``, at most
        ``max_records`` of the fetched records that are AVAILABLE or new."""
        deadline = now_ms + lock_ms
        taken: list[tuple[int, int]] = []
        for batch in batches:
            if len(taken) >= max_records:
                break
            offset = max(batch.base_offset, self.start_offset)
            while offset <= batch.last_offset and len(taken) < max_records:
                if offset < self.end_offset:
                    record = self._records.get(offset)
                    if (
                        record is not None
                        and record.state is RecordState.AVAILABLE
                        and record.delivery_count >= self.delivery_count_limit
                    ):
                        # Restored as delivered as often as allowed: archived, never sent.
                        del self._records[offset]
                        self._available -= 1
                    elif record is not None and record.state is RecordState.AVAILABLE:
                        record.state = RecordState.ACQUIRED
                        record.delivery_count += 1
                        record.member_id = member_id
                        record.deadline_ms = deadline
                        self._available -= 1
                        taken.append((offset, record.delivery_count))
                    offset += 1
                    continue
                if batch.skipped:
                    # Never delivered: the whole batch is done for the group at once.
                    self.end_offset = batch.last_offset + 1
                    break
                if len(self._records) >= self.max_record_locks:
                    return _ranges(taken)
                self._records[offset] = InFlight(RecordState.ACQUIRED, 1, member_id, deadline)
                self.end_offset = offset + 1
                taken.append((offset, 1))
                offset += 1
        self._advance()
        return _ranges(taken)

    def acknowledge(
        self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int, lock_ms: int
    ) -> ErrorCode:
        """Apply a member's acknowledgements: all of them, or none (INVALID_RECORD_STATE when
        one names a record the member does not hold; INVALID_REQUEST for a malformed batch)."""
        planned: list[tuple[int, int]] = []
        for batch in batches:
            count = batch.last_offset - batch.first_offset + 1
            if count <= 0 or len(batch.types) not in (1, count):
                return ErrorCode.invalid_request
            if batch.first_offset < self.start_offset or batch.last_offset >= self.end_offset:
                # Not all in flight, whatever the client says (and no loop over its range).
                return ErrorCode.invalid_record_state
            for i in range(count):
                kind = batch.types[0] if len(batch.types) == 1 else batch.types[i]
                if kind not in AcknowledgeType.__members__.values():
                    return ErrorCode.invalid_request
                offset = batch.first_offset + i
                record = self._records.get(offset)
                if kind == AcknowledgeType.GAP and record is None:
                    continue
                if (
                    record is None
                    or record.state is not RecordState.ACQUIRED
                    or record.member_id != member_id
                ):
                    return ErrorCode.invalid_record_state
                planned.append((offset, kind))
        for offset, kind in planned:
            record = self._records[offset]
            if kind == AcknowledgeType.RENEW:
                record.deadline_ms = now_ms + lock_ms
            elif kind == AcknowledgeType.RELEASE:
                self._release(offset, record)
            else:  # ACCEPT, REJECT, GAP: done
                del self._records[offset]
        self._advance()
        return ErrorCode.none

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose lock passed its deadline; how many."""
        expired = [
            (offset, record)
            for offset, record in self._records.items()
            if record.state is RecordState.ACQUIRED and record.deadline_ms <= now_ms
        ]
        for offset, record in expired:
            self._release(offset, record)
        if expired:
            self._advance()
        return len(expired)

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (its share session closed); how many."""
        held = [
            (offset, record)
            for offset, record in self._records.items()
            if record.state is RecordState.ACQUIRED and record.member_id == member_id
        ]
        for offset, record in held:
            self._release(offset, record)
        if held:
            self._advance()
        return len(held)

    def _release(self, offset: int, record: InFlight) -> None:
        if record.delivery_count >= self.delivery_count_limit:
            del self._records[offset]  # ARCHIVED: delivered as often as allowed
            return
        record.state = RecordState.AVAILABLE
        record.member_id = None
        self._available += 1

    def _advance(self) -> None:
        self.start_offset = next(iter(self._records), self.end_offset)


def _ranges(taken: list[tuple[int, int]]) -> list[AcquiredRange]:
    """Consecutive offsets of one delivery count as one range."""
    ranges: list[AcquiredRange] = []
    for offset, count in taken:
        last = ranges[-1] if ranges else None
        if last is not None and last.last_offset + 1 == offset and last.delivery_count == count:
            ranges[-1] = AcquiredRange(last.first_offset, offset, count)
        else:
            ranges.append(AcquiredRange(offset, offset, count))
    return ranges
