"""The share coordinator's state machine (Kafka's ``ShareCoordinatorShard``): the persisted state
of every share-partition whose key falls in a partition of ``__share_group_state`` this broker
leads — its state epoch, leader epoch, start offset and the state batches of the records in
flight past it (acknowledged or archived ones, and available ones with their delivery counts).

Operations, as the share state APIs ask them (each answers with an error code and what it read):
InitializeShareGroupState sets a share-partition's start offset in a new state epoch (a snapshot,
everything before forgotten); WriteShareGroupState merges the batches a partition leader sends
over what is stored (an update record, or a whole snapshot every
``share.coordinator.snapshot.update.records.per.snapshot`` updates); ReadShareGroupState and
ReadShareGroupStateSummary answer from the state (a read from a newer leader epoch records it);
DeleteShareGroupState writes tombstones. A write or read from a leader epoch older than the stored
one is FENCED_LEADER_EPOCH, one with an older state epoch FENCED_STATE_EPOCH — a deposed leader
cannot overwrite its successor's progress.

The state follows each operation at once and is put back when the log refuses its record (the
runtime's ``failed``). Loading replays a partition's snapshots, updates and tombstones. Time is
the injected clock's (the snapshots' timestamps). Crash: nothing of its own; the state is the
log's, replayed on the next load. Called on the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from odradek.clock import Clock
from odradek.cluster.share.persister import StateBatch
from odradek.coordinator.common.runtime import CoordinatorWrite
from odradek.coordinator.common.timers import Timers
from odradek.coordinator.share.records import (
    SNAPSHOT_KEY,
    UPDATE_KEY,
    ShareSnapshot,
    ShareUpdate,
    StateKey,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
    partition_for,
)
from odradek.protocol.errors import ErrorCode

NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class ShareState:
    """One share-partition's state as stored (``updates``: update records since its snapshot)."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    snapshot_epoch: int = 0
    create_timestamp: int = -1
    write_timestamp: int = -1
    updates: int = 0


@dataclass(frozen=True, slots=True)
class StateAnswer:
    """An operation's answer for one share-partition (``state`` None: nothing stored)."""

    error: ErrorCode
    state: ShareState | None = None
    message: str | None = None


def merge_batches(
    old: Iterable[StateBatch], new: Sequence[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """``new`` over ``old`` (a newer batch wins every offset it covers), nothing below
    ``start_offset``, in offset order."""
    pieces: list[StateBatch] = []
    covered = sorted((b.first_offset, b.last_offset) for b in new)
    for batch in old:
        first = batch.first_offset
        for lo, hi in covered:
            if hi < first or lo > batch.last_offset:
                continue
            if lo > first:
                pieces.append(replace(batch, first_offset=first, last_offset=lo - 1))
            first = max(first, hi + 1)
        if first <= batch.last_offset:
            pieces.append(replace(batch, first_offset=first))
    pieces.extend(new)
    kept: list[StateBatch] = []
    for batch in sorted(pieces, key=lambda b: b.first_offset):
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = replace(batch, first_offset=start_offset)
        last = kept[-1] if kept else None
        if (
            last is not None
            and last.last_offset + 1 == batch.first_offset
            and (last.delivery_state, last.delivery_count)
            == (batch.delivery_state, batch.delivery_count)
        ):
            kept[-1] = replace(last, last_offset=batch.last_offset)
        else:
            kept.append(batch)
    return tuple(kept)


class ShareCoordinatorShard:
    """The persisted share-partition states of the partitions served here (see the module doc).
    ``partitions``: of ``__share_group_state``; ``records_per_snapshot``: updates between
    snapshots."""

    def __init__(self, partitions: int, records_per_snapshot: int, clock: Clock) -> None:
        self.partitions = partitions
        self.records_per_snapshot = records_per_snapshot
        self.clock = clock
        self.timers = Timers()
        self._states: dict[int, dict[StateKey, ShareState]] = {}
        self._loading: dict[int, int] = {}
        self._pending: dict[int, dict[StateKey, ShareState]] = {}
        self._writes: list[CoordinatorWrite] = []

    # -- what the runtime needs ----------------------------------------------------------------

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def partition_of(self, key: StateKey) -> int:
        return partition_for(key.coordinator_key(), self.partitions)

    def take_writes(self) -> list[CoordinatorWrite]:
        writes, self._writes = self._writes, []
        return writes

    def is_active(self, partition: int) -> bool:
        return partition in self._states

    @property
    def owned(self) -> list[int]:
        return sorted(self._states)

    # -- loading -------------------------------------------------------------------------------

    def is_loaded(self, index: int, epoch: int) -> bool:
        return index in self._loading or index in self._states

    def begin_loading(self, index: int, epoch: int) -> None:
        self._states.pop(index, None)
        self._loading[index] = epoch

    def replay(self, index: int, key: bytes | None, value: bytes | None) -> None:
        """Apply one record of partition ``index`` (raises ``RecordFormatError``)."""
        if key is None:
            return
        kind, state_key = decode_key(key)
        states = self._states_of(index)
        if value is None:
            states.pop(state_key, None)
        elif kind == SNAPSHOT_KEY:
            snapshot = decode_snapshot(value)
            states[state_key] = ShareState(
                snapshot.state_epoch,
                snapshot.leader_epoch,
                snapshot.start_offset,
                snapshot.batches,
                snapshot.snapshot_epoch,
                snapshot.create_timestamp,
                snapshot.write_timestamp,
            )
        else:
            current = states.get(state_key)
            if current is not None:
                states[state_key] = _updated(current, decode_update(value))

    def _states_of(self, index: int) -> dict[StateKey, ShareState]:
        """During a load the replayed states are kept aside until the load finishes."""
        if index in self._loading:
            return self._pending.setdefault(index, {})
        return self._states.setdefault(index, {})

    def finish_loading(self, index: int) -> None:
        self._loading.pop(index, None)
        self._states[index] = self._pending.pop(index, {})

    def unload(self, index: int) -> None:
        self._loading.pop(index, None)
        self._pending.pop(index, None)
        self._states.pop(index, None)

    # -- operations ----------------------------------------------------------------------------

    def _served(self, key: StateKey) -> tuple[int, dict[StateKey, ShareState]] | ErrorCode:
        index = self.partition_of(key)
        if index in self._loading:
            return ErrorCode.coordinator_load_in_progress
        states = self._states.get(index)
        if states is None:
            return ErrorCode.not_coordinator
        return index, states

    def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> StateAnswer:
        """InitializeShareGroupState: start the share-partition at ``start_offset`` in
        ``state_epoch``, forgetting everything before."""
        served = self._served(key)
        if isinstance(served, ErrorCode):
            return StateAnswer(served)
        index, states = served
        current = states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            return StateAnswer(ErrorCode.fenced_state_epoch, current)
        now = self.clock.time_ms()
        state = ShareState(
            state_epoch,
            current.leader_epoch if current is not None else -1,
            start_offset,
            (),
            current.snapshot_epoch + 1 if current is not None else 0,
            now,
            now,
        )
        self._snapshot(index, states, key, state, current)
        return StateAnswer(ErrorCode.none, state)

    def write(
        self,
        key: StateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> StateAnswer:
        """WriteShareGroupState: ``batches`` over what is stored, and the start offset moved
        to ``start_offset`` unless it is -1."""
        served = self._served(key)
        if isinstance(served, ErrorCode):
            return StateAnswer(served)
        index, states = served
        current = states.get(key)
        if current is not None:
            if state_epoch < current.state_epoch:
                return StateAnswer(ErrorCode.fenced_state_epoch, current)
            if leader_epoch < current.leader_epoch:
                return StateAnswer(ErrorCode.fenced_leader_epoch, current)
        now = self.clock.time_ms()
        if current is None or state_epoch > current.state_epoch:
            # No state yet (or a new state epoch): what is written is the whole state.
            start = max(start_offset, 0)
            state = ShareState(
                state_epoch,
                leader_epoch,
                start,
                merge_batches((), batches, start),
                current.snapshot_epoch + 1 if current is not None else 0,
                now,
                now,
            )
            self._snapshot(index, states, key, state, current)
            return StateAnswer(ErrorCode.none, state)
        update = ShareUpdate(current.snapshot_epoch, leader_epoch, start_offset, tuple(batches))
        state = _updated(current, update)
        if current.updates >= self.records_per_snapshot:
            state = replace(
                state, snapshot_epoch=current.snapshot_epoch + 1, write_timestamp=now, updates=0
            )
            self._snapshot(index, states, key, state, current)
        else:
            states[key] = state
            self._append(
                index,
                ((encode_key(UPDATE_KEY, key), encode_update(update)),),
                lambda: _put_back(states, key, current),
            )
        return StateAnswer(ErrorCode.none, state)

    def read(self, key: StateKey, leader_epoch: int) -> StateAnswer:
        """ReadShareGroupState: the state, unless ``leader_epoch`` is older than the stored one.
        A newer one is recorded (an update naming only it), so that the leader it replaced is
        fenced from then on, as Kafka's ``readStateAndMaybeUpdateLeaderEpoch``."""
        served = self._served(key)
        if isinstance(served, ErrorCode):
            return StateAnswer(served)
        index, states = served
        current = states.get(key)
        if current is None:
            return StateAnswer(ErrorCode.none)
        if leader_epoch < current.leader_epoch:
            return StateAnswer(ErrorCode.fenced_leader_epoch, current)
        if leader_epoch > current.leader_epoch:
            update = ShareUpdate(current.snapshot_epoch, leader_epoch, NO_OFFSET, ())
            states[key] = state = _updated(current, update)
            self._append(
                index,
                ((encode_key(UPDATE_KEY, key), encode_update(update)),),
                lambda: _put_back(states, key, current),
            )
            return StateAnswer(ErrorCode.none, state)
        return StateAnswer(ErrorCode.none, current)

    def summary(self, key: StateKey) -> StateAnswer:
        """ReadShareGroupStateSummary: the state, unfenced and unchanged."""
        served = self._served(key)
        if isinstance(served, ErrorCode):
            return StateAnswer(served)
        return StateAnswer(ErrorCode.none, served[1].get(key))

    def delete(self, key: StateKey) -> StateAnswer:
        """DeleteShareGroupState: tombstones for the share-partition's records."""
        served = self._served(key)
        if isinstance(served, ErrorCode):
            return StateAnswer(served)
        index, states = served
        current = states.pop(key, None)
        if current is not None:
            self._append(
                index,
                ((encode_key(SNAPSHOT_KEY, key), None), (encode_key(UPDATE_KEY, key), None)),
                lambda: _put_back(states, key, current),
            )
        return StateAnswer(ErrorCode.none)

    # -- records -------------------------------------------------------------------------------

    def _snapshot(
        self,
        index: int,
        states: dict[StateKey, ShareState],
        key: StateKey,
        state: ShareState,
        previous: ShareState | None,
    ) -> None:
        states[key] = state
        value = ShareSnapshot(
            state.snapshot_epoch,
            state.state_epoch,
            state.leader_epoch,
            state.start_offset,
            state.create_timestamp,
            state.write_timestamp,
            state.batches,
        )
        self._append(
            index,
            ((encode_key(SNAPSHOT_KEY, key), encode_snapshot(value)),),
            lambda: _put_back(states, key, previous),
        )

    def _append(
        self,
        index: int,
        records: tuple[tuple[bytes, bytes | None], ...],
        undo: Callable[[], None],
    ) -> None:
        self._writes.append(CoordinatorWrite(index, records, failed=lambda _: undo()))


def _updated(current: ShareState, update: ShareUpdate) -> ShareState:
    start = current.start_offset if update.start_offset == NO_OFFSET else update.start_offset
    return replace(
        current,
        leader_epoch=max(current.leader_epoch, update.leader_epoch),
        start_offset=start,
        batches=merge_batches(current.batches, update.batches, start),
        updates=current.updates + 1,
    )


def _put_back(
    states: dict[StateKey, ShareState], key: StateKey, previous: ShareState | None
) -> None:
    if previous is None:
        states.pop(key, None)
    else:
        states[key] = previous
