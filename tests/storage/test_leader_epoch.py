"""The leader epoch cache: Kafka's file format, OffsetForLeaderEpoch answers (KIP-101/279),
truncation at both ends, and how the partition log keeps it through appends, truncation,
retention, crashes and a lost or damaged file."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.record_batch import (
    set_base_offset,
    set_partition_leader_epoch,
    validate_batches,
)
from odradek.storage import (
    EpochTruncation,
    LogConfig,
    LogManager,
    PartitionLog,
    UnexpectedAppendOffset,
)
from odradek.storage.flusher import LogFlusher
from odradek.storage.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

from .conftest import (
    BATCH_SIZE,
    FLUSHER_WAIT_S,
    append,
    held,
    make_batch,
    open_manager,
    read_all,
)

Opener = Callable[..., PartitionLog]
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
CONFIG = LogConfig(segment_bytes=4 * BATCH_SIZE, index_interval_bytes=BATCH_SIZE)


def entries(*pairs: tuple[int, int]) -> tuple[EpochEntry, ...]:
    return tuple(EpochEntry(epoch, start) for epoch, start in pairs)


def cache_of(tmp_path: Path, *pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", entries(*pairs))


def epoch_file(tmp_path: Path) -> Path:
    return tmp_path / "topic-0" / "leader-epoch-checkpoint"


def kill(log: PartitionLog) -> None:
    """What kill -9 leaves: the page cache as it is, no flush, no checkpoint written."""
    for segment in log.segments:
        segment.close()


def append_in_epochs(log: PartitionLog, *epochs: int) -> None:
    """One single-record batch per epoch given, in that order."""
    for epoch in epochs:
        append(log, make_batch(), leader_epoch=epoch)


def replicated(base_offset: int, epoch: int, count: int = 1) -> bytearray:
    """A batch as a follower fetches it: offsets and leader epoch set by the leader."""
    batch = bytearray(make_batch(count))
    set_base_offset(batch, 0, base_offset)
    set_partition_leader_epoch(batch, 0, epoch)
    return batch


def append_replicated(log: PartitionLog, *batches: bytearray) -> None:
    records = bytearray(b"".join(batches))
    log.append_as_follower(records, validate_batches(records, 1 << 30))


# -- the file ------------------------------------------------------------------------------------


def test_reads_and_writes_kafkas_file_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    kafka_written = b"0\n3\n0 0\n2 57\n7 1200\n"  # as Kafka's LeaderEpochCheckpointFile has it
    path.write_bytes(kafka_written)
    cache = LeaderEpochCache.load(path)
    assert cache is not None
    assert cache.entries == entries((0, 0), (2, 57), (7, 1200))
    path.unlink()
    cache.write()
    assert path.read_bytes() == kafka_written
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()


def test_an_empty_cache_writes_kafkas_empty_file(tmp_path: Path) -> None:
    cache = cache_of(tmp_path)
    cache.write()
    assert cache.path.read_bytes() == b"0\n0\n"
    loaded = LeaderEpochCache.load(cache.path)
    assert loaded is not None and loaded.entries == ()


@pytest.mark.parametrize(
    "damaged",
    [
        b"",  # created, never written
        b"0\n3\n0 0\n2 57\n7 12",  # torn mid-line
        b"0\n3\n0 0\n2 57\n",  # torn at a line end: fewer entries than declared
        b"1\n1\n0 0\n",  # an unknown version
        b"0\n2\n3 10\n2 20\n",  # epochs going back
        b"0\n2\n2 10\n3 10\n",  # start offsets not growing
        b"0\n1\n\xff\xfe 0\n",  # not text
    ],
)
def test_an_unreadable_file_loads_as_none(tmp_path: Path, damaged: bytes) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(damaged)
    assert LeaderEpochCache.load(path) is None


def test_a_missing_file_loads_as_none(tmp_path: Path) -> None:
    assert LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint") is None


# -- OffsetForLeaderEpoch ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "answer"),
    [
        (5, (5, 30)),  # the latest epoch ends at the log end
        (3, (3, 20)),  # an earlier epoch ends where the next begins
        (1, (1, 10)),
        (4, (3, 20)),  # KIP-279: unknown here, so the largest epoch below it, and its end
        (2, (1, 10)),
        (0, (0, 0)),  # below the first epoch: its start (Kafka >= 2.1; the log before is gone)
        (6, UNDEFINED),  # above the latest: not known
        (UNDEFINED_EPOCH, UNDEFINED),
    ],
)
def test_end_offset_for(tmp_path: Path, requested: int, answer: tuple[int, int]) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (5, 20))
    assert cache.end_offset_for(requested, 30) == answer


def test_an_empty_cache_knows_no_epoch(tmp_path: Path) -> None:
    cache = cache_of(tmp_path)
    assert cache.end_offset_for(0, 10) == UNDEFINED
    assert cache.latest_epoch is None and cache.latest_entry is None


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (1, 5), (3, 10))
    assert [cache.epoch_for_offset(o) for o in (4, 5, 9, 10, 99)] == [None, 1, 1, 3, 3]


# -- assign and truncate -------------------------------------------------------------------------


def test_assign_records_new_epochs_and_the_next_flush_writes_them(tmp_path: Path) -> None:
    cache = cache_of(tmp_path)
    assert cache.assign(0, 0)
    assert not cache.path.exists()  # kept in memory: no write on the appending thread
    assert cache.dirty
    assert cache.write_if_dirty(sync=False)
    assert cache.path.read_bytes() == b"0\n1\n0 0\n"
    assert not cache.assign(0, 5)  # the same epoch, later: every append of an epoch
    assert not cache.dirty
    assert cache.assign(2, 7)
    assert cache.entries == entries((0, 0), (2, 7))
    assert cache.path.read_bytes() == b"0\n1\n0 0\n"  # a prefix of the entries
    cache.write_if_dirty()
    assert cache.path.read_bytes() == b"0\n2\n0 0\n2 7\n"
    assert cache.latest_epoch == 2


def test_an_entry_that_overrules_others_is_written_at_once(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (5, 20))
    cache.write()
    assert cache.assign(2, 5)  # a follower taking an older leader's history
    assert cache.path.read_bytes() == b"0\n2\n1 0\n2 5\n"
    assert not cache.dirty


def test_assign_overrules_entries_it_contradicts(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (5, 20))
    assert cache.assign(5, 15)  # the latest epoch, earlier: it starts there
    assert cache.entries == entries((1, 0), (3, 10), (5, 15))
    assert cache.assign(4, 12)  # a lower epoch: Kafka 3.x drops the entries above it
    assert cache.entries == entries((1, 0), (3, 10), (4, 12))
    assert cache.assign(6, 10)  # a higher epoch at an offset already taken
    assert cache.entries == entries((1, 0), (6, 10))
    written = LeaderEpochCache.load(cache.path)
    assert written is not None and written.entries == cache.entries
    with pytest.raises(ValueError):
        cache.assign(-1, 20)


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (5, 20))
    cache.truncate_from_end(21)  # inside the latest epoch: nothing starts at or after it
    assert cache.entries == entries((1, 0), (3, 10), (5, 20))
    cache.truncate_from_end(20)  # epoch 5 started there: it goes
    assert cache.entries == entries((1, 0), (3, 10))
    assert cache.path.read_bytes() == b"0\n2\n1 0\n3 10\n"  # written at once
    cache.truncate_from_end(0)
    assert cache.entries == ()


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, (1, 0), (3, 10), (5, 20))
    cache.truncate_from_start(0)
    assert cache.entries == entries((1, 0), (3, 10), (5, 20))
    cache.truncate_from_start(12)  # the epoch holding the new start now begins there
    assert cache.entries == entries((3, 12), (5, 20))
    cache.truncate_from_start(20)  # exactly at an epoch's start: it is kept as it is
    assert cache.entries == entries((5, 20))
    cache.truncate_from_start(25)
    assert cache.entries == entries((5, 25))
    assert not cache.path.exists()  # written lazily, by the log's flush
    cache.write_if_dirty()
    assert cache.path.read_bytes() == b"0\n1\n5 25\n"


# -- in the partition log ------------------------------------------------------------------------


def test_appends_record_each_new_epoch_in_the_partition_directory(
    open_log: Opener, tmp_path: Path
) -> None:
    log = open_log(CONFIG)
    assert log.latest_epoch is None
    assert not epoch_file(tmp_path).exists()  # an empty new log writes nothing
    append_in_epochs(log, 0, 0, 2, 2, 2, 5)
    assert log.leader_epochs == entries((0, 0), (2, 2), (5, 5))
    assert not epoch_file(tmp_path).exists()  # written by the flush, not by the appends
    log.flush()
    assert epoch_file(tmp_path).read_bytes() == b"0\n3\n0 0\n2 2\n5 5\n"
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(5) == (5, 6)
    assert [h.partition_leader_epoch for h in read_all(log)] == [0, 0, 2, 2, 2, 5]


def test_epochs_survive_a_clean_reopen(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1, 3, 4, 4)
    log.flush()
    log.close()
    log = open_log(CONFIG)
    assert log.leader_epochs == entries((1, 0), (3, 2), (4, 3))
    assert log.end_offset_for_epoch(3) == (3, 3)


def test_epochs_survive_a_kill(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1, 3, 4, 4, 4)
    kill(log)
    log = open_log(CONFIG, needs_recovery=True, recovery_point=0)
    assert log.log_end_offset == 6
    assert log.leader_epochs == entries((1, 0), (3, 2), (4, 3))


def test_a_torn_tail_takes_the_epochs_it_started_with_it(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1, 1, 1, 2, 3)  # segments 0 and 4; epochs 2 and 3 in the last one
    kill(log)
    os.truncate(tmp_path / "topic-0" / f"{4:020d}.log", BATCH_SIZE + 20)
    log = open_log(CONFIG, needs_recovery=True, recovery_point=4)
    assert log.log_end_offset == 5
    assert log.leader_epochs == entries((1, 0), (2, 4))
    assert log.end_offset_for_epoch(2) == (2, 5)
    append_in_epochs(log, 4)
    log.flush()
    assert epoch_file(tmp_path).read_bytes() == b"0\n3\n1 0\n2 4\n4 5\n"


def test_recovery_records_epochs_missing_from_the_file(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1, 1, 1, 1, 2, 3)
    kill(log)
    # A file from before epoch 2 (one written elsewhere, or by an older broker): the batches
    # recovery rereads carry their epochs, and those are recorded again.
    epoch_file(tmp_path).write_bytes(b"0\n1\n1 0\n")
    log = open_log(CONFIG, needs_recovery=True, recovery_point=4)
    assert log.leader_epochs == entries((1, 0), (2, 5), (3, 6))


@pytest.mark.parametrize("damage", ["corrupt", "torn", "missing"])
def test_a_lost_or_damaged_file_is_rebuilt_from_the_batches(
    open_log: Opener, tmp_path: Path, damage: str
) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 0, 0, 3, 3, 3, 3, 7, 8, 8)  # three segments
    log.flush()
    log.close()
    path = epoch_file(tmp_path)
    if damage == "corrupt":
        path.write_bytes(b"not a checkpoint\n")
    elif damage == "torn":
        path.write_bytes(path.read_bytes()[:-3])
    else:
        path.unlink()
    log = open_log(CONFIG)  # even a clean open
    assert log.leader_epochs == entries((0, 0), (3, 2), (7, 6), (8, 7))
    assert path.read_bytes() == b"0\n4\n0 0\n3 2\n7 6\n8 7\n"


def test_a_corrupt_file_of_an_empty_log_is_replaced(open_log: Opener, tmp_path: Path) -> None:
    open_log(CONFIG).close()
    epoch_file(tmp_path).write_bytes(b"\x00\x00")
    log = open_log(CONFIG)
    assert log.leader_epochs == ()
    assert epoch_file(tmp_path).read_bytes() == b"0\n0\n"


def test_truncate_to_cuts_the_epochs(open_log: Opener, tmp_path: Path) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1, 2, 2, 2, 3, 3)
    log.truncate_to(5)
    assert log.leader_epochs == entries((1, 0), (2, 2))
    assert epoch_file(tmp_path).read_bytes() == b"0\n2\n1 0\n2 2\n"
    log.truncate_to(1)
    assert log.leader_epochs == entries((1, 0))
    log.truncate_to(0)  # emptied: no epoch left
    assert log.leader_epochs == ()
    assert epoch_file(tmp_path).read_bytes() == b"0\n0\n"


def test_truncate_fully_and_start_at(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 2)
    log.truncate_fully_and_start_at(40)
    assert (log.log_start_offset, log.log_end_offset, log.leader_epochs) == (40, 40, ())
    append_replicated(log, replicated(40, 6))
    assert log.leader_epochs == entries((6, 40))


def test_retention_moves_the_first_epoch_start(open_log: Opener, tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2 * BATCH_SIZE, retention_bytes=2 * BATCH_SIZE)
    log = open_log(config)
    append_in_epochs(log, 1, 1, 1, 2, 2, 3, 3)  # segments 0, 2, 4, 6
    log.flush()
    assert log.apply_retention() == 2
    assert log.log_start_offset == 4
    assert log.leader_epochs == entries((2, 4), (3, 5))
    # Not written yet (no fsync on the retention path); a kill leaves the old file, and the
    # reopened log drops what lies before its start again.
    assert epoch_file(tmp_path).read_bytes() == b"0\n3\n1 0\n2 3\n3 5\n"
    kill(log)
    log = open_log(config, needs_recovery=True, recovery_point=4, log_start_offset=4)
    assert log.leader_epochs == entries((2, 4), (3, 5))
    log.flush()
    assert epoch_file(tmp_path).read_bytes() == b"0\n2\n2 4\n3 5\n"


def test_delete_records_moves_the_first_epoch_start(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1, 2, 2, 2)
    log.delete_records_before(3)
    assert log.leader_epochs == entries((2, 3))
    assert log.end_offset_for_epoch(1) == (1, 3)  # below the first epoch: its start


def test_a_new_leader_assigns_its_epoch_before_writing(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1, 1)
    log.assign_epoch_start_offset(4, log.log_end_offset)
    assert log.end_offset_for_epoch(1) == (1, 3)
    assert log.end_offset_for_epoch(4) == (4, 3)
    append_in_epochs(log, 4)
    assert log.leader_epochs == entries((1, 0), (4, 3))


# -- as a follower -------------------------------------------------------------------------------


def test_append_as_follower_keeps_offsets_and_epochs(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_replicated(log, replicated(0, 1, count=2), replicated(2, 1), replicated(3, 4))
    # A gap: the leader's log is compacted there.
    append_replicated(log, replicated(9, 4), replicated(10, 6, count=3))
    assert log.log_end_offset == 13
    assert [(h.base_offset, h.partition_leader_epoch) for h in read_all(log)] == [
        (0, 1),
        (2, 1),
        (3, 4),
        (9, 4),
        (10, 6),
    ]
    assert log.leader_epochs == entries((1, 0), (4, 3), (6, 10))


def test_append_as_follower_refuses_offsets_before_the_log_end(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_replicated(log, replicated(0, 1, count=3))
    with pytest.raises(UnexpectedAppendOffset) as refused:
        append_replicated(log, replicated(2, 1))
    assert (refused.value.first_offset, refused.value.log_end_offset) == (2, 3)
    with pytest.raises(UnexpectedAppendOffset):
        append_replicated(log, replicated(5, 1, count=2), replicated(6, 1))  # overlapping
    assert log.log_end_offset == 3
    assert [h.base_offset for h in read_all(log)] == [0]


def test_append_as_follower_rolls_past_a_gap_too_big_for_the_index(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_replicated(log, replicated(0, 1))
    far = 3 << 31
    append_replicated(log, replicated(far, 2))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 1
    assert [h.base_offset for h in read_all(log)] == [0, far]


def diverged_follower(open_log: Opener) -> PartitionLog:
    """A follower holding offsets 0-1 of epoch 1, 2-4 of epoch 2, 5-7 of epoch 4, one record
    per batch (truncation cuts whole batches)."""
    log = open_log(CONFIG)
    for offset, epoch in enumerate([1, 1, 2, 2, 2, 4, 4, 4]):
        append_replicated(log, replicated(offset, epoch))
    return log


def test_truncation_when_the_leader_has_the_epoch(open_log: Opener) -> None:
    log = diverged_follower(open_log)
    # KIP-101: the leader's epoch 4 ended at 6; the follower keeps no more than the leader has.
    assert log.truncate_to_epoch_end(4, 6, high_watermark=0) == EpochTruncation(6, True)
    assert log.log_end_offset == 6
    assert log.leader_epochs == entries((1, 0), (2, 2), (4, 5))


def test_truncation_never_goes_past_the_log_end(open_log: Opener) -> None:
    log = diverged_follower(open_log)
    assert log.epoch_truncation_offset(4, 50, high_watermark=0) == EpochTruncation(8, True)


def test_truncation_takes_rounds_when_the_leader_names_an_unknown_epoch(open_log: Opener) -> None:
    log = diverged_follower(open_log)
    # KIP-279: asked about epoch 4, the leader answers with its largest epoch below it, 3 (its
    # epoch 3 ended at 9), which this follower never saw: cut to the end of its largest epoch
    # below 3 (epoch 2, ending at 5) and ask again about that.
    assert log.truncate_to_epoch_end(3, 9, high_watermark=0) == EpochTruncation(5, False)
    assert log.latest_epoch == 2
    assert log.leader_epochs == entries((1, 0), (2, 2))
    # Asked about epoch 2, the leader says it ended at 4 there.
    assert log.truncate_to_epoch_end(2, 4, high_watermark=0) == EpochTruncation(4, True)
    assert log.log_end_offset == 4


def test_truncation_when_the_leader_knows_an_epoch_below_all_of_ours(open_log: Opener) -> None:
    log = diverged_follower(open_log)
    log.delete_records_before(2)  # epoch 1 is gone here
    # The leader's epoch 0 ended at 1: this log's end for it is its own start, 2.
    assert log.truncate_to_epoch_end(0, 1, high_watermark=0) == EpochTruncation(1, True)
    # Below the log start: the log starts afresh there, with no epochs.
    assert (log.log_start_offset, log.log_end_offset, log.leader_epochs) == (1, 1, ())


def test_truncation_when_the_leader_knows_no_end_offset(open_log: Opener) -> None:
    log = diverged_follower(open_log)
    # The leader has no epochs (or not this far back): fall back to the high watermark.
    assert log.truncate_to_epoch_end(*UNDEFINED, high_watermark=5) == EpochTruncation(5, True)
    assert log.log_end_offset == 5
    assert log.epoch_truncation_offset(UNDEFINED_EPOCH, 3, high_watermark=0) == EpochTruncation(
        3, True
    )


def test_the_leaders_answer_for_a_follower_matches_kip_101(tmp_path: Path) -> None:
    clock = ManualClock()
    leader = PartitionLog.open(tmp_path / "t-0", CONFIG, clock)
    follower = PartitionLog.open(tmp_path / "t-1", CONFIG, clock)
    # Both have epoch 1 up to 3; the follower then wrote 3-4 as leader of epoch 2, which the
    # new leader (epoch 3) never got.
    append_in_epochs(leader, 1, 1, 1)
    leader.assign_epoch_start_offset(3, leader.log_end_offset)
    append_in_epochs(leader, 3, 3, 3, 3)
    append_in_epochs(follower, 1, 1, 1, 2, 2)
    latest = follower.latest_epoch
    assert latest == 2
    answer = leader.end_offset_for_epoch(latest)
    assert answer == (1, 3)
    truncation = follower.truncate_to_epoch_end(*answer, high_watermark=0)
    assert truncation == EpochTruncation(3, True)
    assert follower.leader_epochs == entries((1, 0))
    while (piece := leader.read(follower.log_end_offset, 1 << 20)) is not None:
        records = bytearray(piece.read_bytes())
        follower.append_as_follower(records, validate_batches(records, 1 << 30))
    assert follower.leader_epochs == leader.leader_epochs == entries((1, 0), (3, 3))
    assert [h.base_offset for h in read_all(follower)] == list(range(7))


def test_epochs_survive_a_killed_broker(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager([tmp_path], clock)
    manager.open(lambda topic: CONFIG)
    log = manager.create("t", 0, CONFIG)
    append_in_epochs(log, 0, 0, 1, 1, 1, 3)
    log.delete_records_before(3)
    manager.checkpoint()
    assert manager.wait_for_flushes(FLUSHER_WAIT_S)
    kill(log)  # no clean-shutdown marker: the next open recovers
    manager = LogManager([tmp_path], clock)
    manager.open(lambda topic: CONFIG)
    reopened = manager.get("t", 0)
    assert reopened is not None
    assert reopened.leader_epochs == entries((1, 3), (3, 5))
    assert reopened.end_offset_for_epoch(1) == (1, 5)
    manager.close()
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n1 3\n3 5\n"


# -- when the file is written ---------------------------------------------------------------------


def test_a_new_epoch_lost_by_a_kill_after_a_flush_is_recovered(
    open_log: Opener, tmp_path: Path
) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1)
    log.flush()
    log.assign_epoch_start_offset(3, log.log_end_offset)  # a new leader, in memory only
    append_in_epochs(log, 3, 3)
    assert epoch_file(tmp_path).read_bytes() == b"0\n1\n1 0\n"
    recovery_point = log.recovery_point
    kill(log)
    log = open_log(CONFIG, needs_recovery=True, recovery_point=recovery_point)
    assert log.leader_epochs == entries((1, 0), (3, 2))
    assert log.end_offset_for_epoch(1) == (1, 2)


def test_a_new_leaders_entry_lost_by_a_kill_is_assigned_again(
    open_log: Opener,
) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 1, 1)
    log.flush()
    log.assign_epoch_start_offset(3, 2)
    before = log.end_offset_for_epoch(1), log.end_offset_for_epoch(2)
    kill(log)
    log = open_log(CONFIG, needs_recovery=True, recovery_point=2)
    assert log.leader_epochs == entries((1, 0))
    # A leader assigns its epoch as it starts, before it answers OffsetForLeaderEpoch.
    log.assign_epoch_start_offset(3, log.log_end_offset)
    assert (log.end_offset_for_epoch(1), log.end_offset_for_epoch(2)) == before


def test_a_background_flush_writes_new_epochs_before_the_recovery_point_moves(
    tmp_path: Path, clock: ManualClock
) -> None:
    flusher = LogFlusher()
    log = PartitionLog.open(tmp_path / "topic-0", CONFIG, clock, flusher=flusher)
    append_in_epochs(log, 2, 2, 5)
    assert not epoch_file(tmp_path).exists()
    with held(flusher):
        assert log.flush_in_background()
        # Written as the flush is handed out, before the flusher can fsync it.
        assert epoch_file(tmp_path).read_bytes() == b"0\n2\n2 0\n5 2\n"
        assert log.recovery_point == 0
    assert flusher.wait_idle(FLUSHER_WAIT_S)
    assert log.recovery_point == 3
    log.close()


def test_an_empty_leaders_log_writes_nothing_as_it_starts_again(
    open_log: Opener, tmp_path: Path
) -> None:
    log = open_log(CONFIG)
    log.assign_epoch_start_offset(0, 0)  # a new partition's first leader
    assert not epoch_file(tmp_path).exists()
    log.flush()
    log.close()
    written = epoch_file(tmp_path).stat()
    log = open_log(CONFIG)
    assert log.leader_epochs == entries((0, 0))  # kept at the log end, not dropped
    log.assign_epoch_start_offset(0, log.log_end_offset)  # make_leader as the broker starts
    log.flush()
    log.close()
    again = epoch_file(tmp_path).stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)


def test_a_log_closed_without_a_flush_keeps_its_epochs(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append_in_epochs(log, 4)
    log.close()
    log = open_log(CONFIG)
    assert log.leader_epochs == entries((4, 0))


def test_new_logs_write_no_epoch_file_until_the_manager_stops(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = open_manager(tmp_path, clock, CONFIG)
    made = manager.prepare("t", [0, 1], CONFIG, leader_epoch=0)
    for partition_log in made:
        manager.add(partition_log)
        assert partition_log.leader_epochs == entries((0, 0))
    assert not (tmp_path / "t-0" / "leader-epoch-checkpoint").exists()
    append_in_epochs(made[0], 0)
    # kill -9: the next open recovers the logs without the file.
    crashed = LogManager([tmp_path], clock)
    crashed.open(lambda topic: CONFIG)
    recovered = crashed.get("t", 0)
    assert recovered is not None and recovered.leader_epochs == entries((0, 0))
    empty = crashed.get("t", 1)
    assert empty is not None and empty.leader_epochs == ()  # its leader assigns it again
    crashed.close()
    for partition_log in made:
        kill(partition_log)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n0 0\n"
