"""A leader's append policy (Kafka's appendRecordsToLeader) on a real log, no sockets."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from odradek.clock import ManualClock
from odradek.cluster.replication.partition import FetchIsolation, Partition
from odradek.protocol.errors import ErrorCode, KafkaError, RecordsRejected
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage import LogConfig, PartitionLog

NOW = 1_700_000_000_000


def partition(tmp_path: Path, config: LogConfig | None = None, **kwargs: int) -> Partition:
    clock = ManualClock()
    log = PartitionLog.open(tmp_path / "t-0", config or LogConfig(), clock)
    p = Partition("t", 0, log, local_id=1, clock=clock, **kwargs)
    p.make_leader(0, (1,), (1,), 0)
    return p


def records(count: int) -> bytes:
    return encode_batch([NewRecord(b"k", b"v") for _ in range(count)], now_ms=NOW)


def test_appends_assign_offsets_and_move_the_high_watermark(tmp_path: Path) -> None:
    p = partition(tmp_path)
    first = p.append_as_leader(records(3), 1, NOW)
    second = p.append_as_leader(records(2), -1, NOW)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert p.high_watermark == 5
    assert p.replicated(5) == ErrorCode.none
    assert p.replicated(6) is None


def test_acks_all_below_min_insync_is_refused_before_the_append(tmp_path: Path) -> None:
    p = partition(tmp_path, min_insync_replicas=2)
    with pytest.raises(KafkaError) as caught:
        p.append_as_leader(records(1), -1, NOW)
    assert caught.value.code == ErrorCode.not_enough_replicas
    assert p.log.log_end_offset == 0
    assert p.append_as_leader(records(1), 1, NOW).first_offset == 0


def test_a_commit_seen_after_the_in_sync_set_shrank_says_so(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.append_as_leader(records(1), -1, NOW)
    p.min_insync_replicas = 2  # as a config change while the produce waited
    assert p.replicated(1) == ErrorCode.not_enough_replicas_after_append


def test_refused_records_leave_the_log_unchanged(tmp_path: Path) -> None:
    p = partition(tmp_path, LogConfig(compact=True))
    keyless = encode_batch([NewRecord(None, b"v")], now_ms=NOW)
    with pytest.raises(RecordsRejected):
        p.append_as_leader(keyless, 1, NOW)
    assert p.log.log_end_offset == 0


def test_an_append_wakes_the_waiters_once(tmp_path: Path) -> None:
    p = partition(tmp_path)
    woken: list[int] = []
    p.add_waiter(lambda: woken.append(1))
    p.append_as_leader(records(1), 1, NOW)
    p.append_as_leader(records(1), 1, NOW)
    assert woken == [1]


def test_acks_all_waits_wake_on_high_watermark_moves_after_the_fetches(tmp_path: Path) -> None:
    """An append the followers do not have yet changes no acks=all answer: it wakes the
    parked fetches only. A high watermark move wakes both, fetches first (Kafka completes its
    delayed fetches before its delayed produces)."""
    p = partition(tmp_path)
    p.make_leader(1, (1, 2), (1, 2), 1)
    woken: list[str] = []
    p.replication.add_waiter(lambda: woken.append("produce"))
    p.add_waiter(lambda: woken.append("fetch"))
    p.append_as_leader(records(2), -1, NOW)
    assert woken == ["fetch"]
    p.add_waiter(lambda: woken.append("fetch"))
    p.follower_fetched(2, 2)
    assert p.high_watermark == 2
    assert woken == ["fetch", "fetch", "produce"]


def test_alone_in_the_isr_an_append_wakes_the_acks_all_waits_too(tmp_path: Path) -> None:
    p = partition(tmp_path)
    woken: list[str] = []
    p.replication.add_waiter(lambda: woken.append("produce"))
    p.append_as_leader(records(1), -1, NOW)
    assert woken == ["produce"]


def replicated_pair(tmp_path: Path, **kwargs: int) -> tuple[Partition, Partition, ManualClock]:
    """Broker 1 leading, broker 2 following, in epoch 3, both in the ISR."""
    clock = ManualClock()
    leader = Partition(
        "t",
        0,
        PartitionLog.open(tmp_path / "a" / "t-0", LogConfig(), clock),
        local_id=1,
        clock=clock,
        replica_lag_time_max_ms=10_000,
        **kwargs,
    )
    follower = Partition(
        "t",
        0,
        PartitionLog.open(tmp_path / "b" / "t-0", LogConfig(), clock),
        local_id=2,
        clock=clock,
    )
    leader.make_leader(3, (1, 2), (1, 2), 0)
    follower.make_follower(1, 3, (1, 2), (1, 2))
    return leader, follower, clock


def copy_to(follower: Partition, leader: Partition) -> None:
    """One round of the follower's fetch: read from its log end, append, take the HW."""
    leader.follower_fetched(2, follower.log.log_end_offset)
    piece = (
        leader.log.read(follower.log.log_end_offset, 1 << 20)
        if (follower.log.log_end_offset < leader.log.log_end_offset)
        else None
    )
    if piece is not None:
        follower.append_as_follower(piece.read_bytes())
    follower.follow_high_watermark(leader.high_watermark)


def test_the_high_watermark_waits_for_the_follower(tmp_path: Path) -> None:
    leader, follower, _ = replicated_pair(tmp_path)
    leader.append_as_leader(records(2), -1, NOW)
    assert leader.high_watermark == 0
    assert leader.replicated(2) is None
    copy_to(follower, leader)  # the follower gets the batch
    assert follower.log.log_end_offset == 2 and leader.high_watermark == 0
    copy_to(follower, leader)  # its next fetch tells the leader it has it
    assert leader.high_watermark == 2
    assert leader.replicated(2) == ErrorCode.none
    copy_to(follower, leader)
    assert follower.high_watermark == 2
    assert [e.epoch for e in follower.log.leader_epochs] == [3]


def test_a_follower_refuses_produce_and_the_epochs_are_checked(tmp_path: Path) -> None:
    leader, follower, _ = replicated_pair(tmp_path)
    with pytest.raises(KafkaError) as caught:
        follower.append_as_leader(records(1), 1, NOW)
    assert caught.value.code == ErrorCode.not_leader_or_follower
    assert leader.check_leader_epoch(3) == ErrorCode.none
    assert leader.check_leader_epoch(-1) == ErrorCode.none
    assert leader.check_leader_epoch(2) == ErrorCode.fenced_leader_epoch
    assert leader.check_leader_epoch(4) == ErrorCode.unknown_leader_epoch
    with pytest.raises(KafkaError) as caught:
        leader.follower_fetched(7, 0)  # no replica of the partition
    assert caught.value.code == ErrorCode.not_leader_or_follower


def test_a_lagging_follower_is_proposed_out_of_the_isr_and_back_in(tmp_path: Path) -> None:
    leader, follower, clock = replicated_pair(tmp_path)
    leader.append_as_leader(records(1), 1, NOW)
    assert leader.propose_isr_shrink() is None
    clock.advance(10_001)
    assert leader.propose_isr_expand() is None
    proposal = leader.propose_isr_shrink()
    assert proposal is not None and proposal.isr == (1,)
    leader.isr_written(proposal.isr, proposal.leader_epoch, proposal.zk_version + 1)
    assert leader.high_watermark == 1  # the leader alone is the ISR now
    copy_to(follower, leader)
    copy_to(follower, leader)
    proposal = leader.propose_isr_expand()
    assert proposal is not None and proposal.isr == (1, 2)


def test_losing_leadership_answers_parked_produces(tmp_path: Path) -> None:
    leader, _, _ = replicated_pair(tmp_path)
    leader.append_as_leader(records(1), -1, NOW)
    woken: list[int] = []
    leader.add_waiter(lambda: woken.append(1))
    assert leader.make_follower(2, 4, (1, 2), (2,)) is True
    assert woken == [1]
    assert leader.replicated(1) == ErrorCode.not_leader_or_follower
    assert leader.make_follower(2, 3, (1, 2), (2,)) is False  # an older state changes nothing


def test_the_read_bound_follows_the_isolation(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.make_leader(1, (1, 2), (1, 2), 1)
    p.append_as_leader(records(2), 1, NOW)
    assert p.read_bound(FetchIsolation.LOG_END) == 2
    assert p.read_bound(FetchIsolation.HIGH_WATERMARK) == 0  # broker 2 has not fetched yet
    p.follower_fetched(2, 2)
    assert p.read_bound(FetchIsolation.HIGH_WATERMARK) == 2
    assert p.read_bound(FetchIsolation.TXN_COMMITTED) == 2


def test_a_consumer_is_sent_to_an_in_sync_replica_in_its_rack(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.make_leader(1, (1, 2, 3), (1, 2, 3), 1)
    assert p.preferred_read_replica({3, 2}) == 2
    assert p.preferred_read_replica({1, 3}) == -1  # the leader is in the rack: read here
    assert p.preferred_read_replica({4}) == -1  # no in-sync replica there


def test_a_follower_copies_a_batch_compaction_emptied_and_leaves_a_cut_one(
    tmp_path: Path,
) -> None:
    """The leader's log may hold batches no producer could send (compaction keeps an idempotent
    producer's last batch with no records in it), and a fetch may end inside a batch."""
    _, follower, _ = replicated_pair(tmp_path)
    emptied = bytearray(encode_batch([NewRecord(None, b"v", (), NOW)] * 3, now_ms=NOW)[:61])
    struct.pack_into(">qi", emptied, 0, 0, 49)  # base offset 0, batchLength of the header alone
    struct.pack_into(">i", emptied, 23, 2)  # lastOffsetDelta: offsets 0..2
    struct.pack_into(">i", emptied, 57, 0)  # recordCount
    struct.pack_into(">I", emptied, 17, crc32c.crc32c(bytes(emptied[21:])))
    second = bytearray(records(2))
    struct.pack_into(">q", second, 0, 3)
    follower.append_as_follower(bytes(emptied) + bytes(second) + bytes(second[:30]))
    assert follower.log.log_end_offset == 5


def test_becoming_leader_writes_no_file_and_the_next_flush_writes_the_epoch(
    tmp_path: Path,
) -> None:
    leader = partition(tmp_path)
    epochs = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert not epochs.exists()  # make_leader, on the event loop, wrote nothing
    leader.append_as_leader(records(2), 1, NOW)
    assert leader.make_leader(3, (1,), (1,), 1)  # re-elected in a later epoch
    assert not epochs.exists()
    assert leader.log.end_offset_for_epoch(0) == (0, 2)
    leader.log.flush()
    assert epochs.read_bytes() == b"0\n2\n0 0\n3 2\n"
