"""The share coordinator's state machine with an injected clock and no log: what each share
state operation answers and writes, fencing, a snapshot every N updates, a load replaying the
records into the same state, and a refused write putting the state back."""

from __future__ import annotations

import uuid

from odradek.clock import ManualClock
from odradek.cluster.share.persister import ACKNOWLEDGED, ARCHIVED, AVAILABLE, StateBatch
from odradek.coordinator.share.coordinator import ShareCoordinatorShard, merge_batches
from odradek.coordinator.share.records import SNAPSHOT_KEY, UPDATE_KEY, StateKey, decode_key
from odradek.protocol.errors import ErrorCode

PARTITIONS = 4
KEY = StateKey("g", uuid.UUID(int=7), 0)


def shard(clock: ManualClock, per_snapshot: int = 3) -> ShareCoordinatorShard:
    s = ShareCoordinatorShard(PARTITIONS, per_snapshot, clock)
    for index in range(PARTITIONS):
        s.begin_loading(index, 0)
        s.finish_loading(index)
    return s


def kinds(s: ShareCoordinatorShard) -> list[int | None]:
    """What the writes asked for since the last call: the key type of each record (None for a
    tombstone's)."""
    out: list[int | None] = []
    for write in s.take_writes():
        for key, value in write.records:
            out.append(decode_key(key)[0] if value is not None else None)
    return out


def test_initialize_then_write_then_read() -> None:
    clock = ManualClock()
    s = shard(clock)
    assert s.read(KEY, 0).state is None
    assert s.initialize(KEY, 0, 100).error == ErrorCode.none
    assert kinds(s) == [SNAPSHOT_KEY]
    batches = [StateBatch(100, 101, ACKNOWLEDGED, 0), StateBatch(102, 103, AVAILABLE, 2)]
    assert s.write(KEY, 0, 1, 100, batches).error == ErrorCode.none
    assert kinds(s) == [UPDATE_KEY]
    state = s.read(KEY, 1).state
    assert state is not None
    assert (state.state_epoch, state.leader_epoch, state.start_offset) == (0, 1, 100)
    assert state.batches == (
        StateBatch(100, 101, ACKNOWLEDGED, 0),
        StateBatch(102, 103, AVAILABLE, 2),
    )
    assert state.create_timestamp == clock.time_ms()


def test_an_older_writer_is_fenced() -> None:
    s = shard(ManualClock())
    s.initialize(KEY, 2, 0)
    s.write(KEY, 2, 5, 0, [])
    s.take_writes()
    assert s.write(KEY, 2, 4, 3, []).error == ErrorCode.fenced_leader_epoch
    assert s.write(KEY, 1, 6, 3, []).error == ErrorCode.fenced_state_epoch
    assert s.initialize(KEY, 1, 0).error == ErrorCode.fenced_state_epoch
    assert s.read(KEY, 4).error == ErrorCode.fenced_leader_epoch
    assert s.take_writes() == []
    state = s.summary(KEY).state
    assert state is not None and state.start_offset == 0


def test_a_snapshot_every_n_updates_and_a_load_replays_to_the_same_state() -> None:
    clock = ManualClock()
    s = shard(clock, per_snapshot=2)
    s.initialize(KEY, 0, 0)
    written: list[tuple[int, bytes, bytes | None]] = []

    def collect() -> list[int | None]:
        out: list[int | None] = []
        for write in s.take_writes():
            for key, value in write.records:
                written.append((write.partition, key, value))
                out.append(decode_key(key)[0])
        return out

    collect()
    seen = []
    for i in range(5):
        clock.advance(10)
        s.write(KEY, 0, 0, i, [StateBatch(i, i + 1, AVAILABLE, i + 1)])
        seen += collect()
    assert seen == [UPDATE_KEY, UPDATE_KEY, SNAPSHOT_KEY, UPDATE_KEY, UPDATE_KEY]
    reloaded = ShareCoordinatorShard(PARTITIONS, 2, clock)
    index = s.partition_of(KEY)
    reloaded.begin_loading(index, 1)
    assert reloaded.read(KEY, 0).error == ErrorCode.coordinator_load_in_progress
    for partition, key, value in written:
        assert partition == index
        reloaded.replay(index, key, value)
    reloaded.finish_loading(index)
    assert reloaded.read(KEY, 0).state == s.read(KEY, 0).state
    assert reloaded.read(KEY, 0).state.batches == (  # type: ignore[union-attr]
        StateBatch(4, 5, AVAILABLE, 5),
    )


def test_delete_writes_tombstones_and_a_refused_write_puts_the_state_back() -> None:
    s = shard(ManualClock())
    s.initialize(KEY, 0, 10)
    s.take_writes()
    s.write(KEY, 0, 0, 12, [])
    (write,) = s.take_writes()
    write.failed(ErrorCode.not_enough_replicas)
    state = s.summary(KEY).state
    assert state is not None and (state.start_offset, state.leader_epoch) == (10, -1)
    assert s.delete(KEY).error == ErrorCode.none
    assert kinds(s) == [None, None]
    assert s.read(KEY, 0).state is None


def test_a_partition_not_served_here_is_not_coordinator() -> None:
    s = ShareCoordinatorShard(PARTITIONS, 3, ManualClock())
    assert s.write(KEY, 0, 0, 0, []).error == ErrorCode.not_coordinator
    s.begin_loading(s.partition_of(KEY), 0)
    s.finish_loading(s.partition_of(KEY))
    assert s.write(KEY, 0, 0, 0, []).error == ErrorCode.none
    s.unload(s.partition_of(KEY))
    assert s.read(KEY, 0).error == ErrorCode.not_coordinator


def test_merge_keeps_the_newest_word_on_each_offset_and_nothing_below_the_start() -> None:
    old = [StateBatch(0, 9, AVAILABLE, 1)]
    new = [StateBatch(3, 4, ARCHIVED, 1), StateBatch(8, 12, ACKNOWLEDGED, 0)]
    assert merge_batches(old, new, 2) == (
        StateBatch(2, 2, AVAILABLE, 1),
        StateBatch(3, 4, ARCHIVED, 1),
        StateBatch(5, 7, AVAILABLE, 1),
        StateBatch(8, 12, ACKNOWLEDGED, 0),
    )


def test_a_read_from_a_new_leader_fences_the_one_it_replaced() -> None:
    s = shard(ManualClock())
    s.initialize(KEY, 0, 0)
    s.write(KEY, 0, 1, 0, [StateBatch(0, 0, AVAILABLE, 1)])
    s.take_writes()
    read = s.read(KEY, 2)
    assert read.error == ErrorCode.none
    assert read.state is not None and read.state.leader_epoch == 2
    assert kinds(s) == [UPDATE_KEY]
    assert s.write(KEY, 0, 1, 1, []).error == ErrorCode.fenced_leader_epoch
    assert s.read(KEY, 2).error == ErrorCode.none
    assert kinds(s) == []  # the same leader epoch again: nothing to record
