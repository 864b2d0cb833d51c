"""Transactional offset commits (TxnOffsetCommit): pending per producer until the producer's
marker reaches the group's partition, then committed or dropped — as Kafka's
``OffsetMetadataManager`` — and rebuilt the same way from the log on restart."""

from __future__ import annotations

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.messages import CommitRequest, OffsetCommit, TxnCommitRequest
from odradek.protocol.errors import ErrorCode

from .support import Harness, form_group

PID, EPOCH = 4000, 3
OTHER_PID = 4001
TP = ("t", 0)


def txn_commit(
    h: Harness,
    offsets: dict[tuple[str, int], int],
    *,
    group: str = "g",
    producer_id: int = PID,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str = "",
) -> dict[tuple[str, int], ErrorCode]:
    return h.coordinator.offsets.commit_transactional_offsets(
        TxnCommitRequest(
            group_id=group,
            transactional_id=f"txn-{producer_id}",
            producer_id=producer_id,
            producer_epoch=EPOCH,
            offsets=tuple(
                OffsetCommit(t, p, o, metadata=metadata) for (t, p), o in offsets.items()
            ),
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )
    )


def plain_commit(h: Harness, offset: int, group: str = "g") -> None:
    result = h.coordinator.offsets.commit_offsets(
        CommitRequest(group, -1, "", None, (OffsetCommit(*TP, offset),))
    )
    assert result == {TP: ErrorCode.none}


def end(h: Harness, commit: bool, group: str = "g", producer_id: int = PID) -> None:
    """The producer's marker lands in the group's partition (the log, then the coordinator)."""
    partition = h.coordinator.partition_for(group)
    h.log.mark(partition, producer_id, commit)
    h.coordinator.offsets.complete_transaction(partition, producer_id, commit)


def offset_of(h: Harness, group: str = "g", tp: tuple[str, int] = TP) -> int | None:
    fetched = h.coordinator.offsets.fetch_offsets(group, [tp])
    assert fetched.error == ErrorCode.none
    ((_, found),) = fetched.offsets
    return None if found is None else found.offset


def test_a_transactional_commit_is_invisible_until_its_transaction_commits() -> None:
    h = Harness()
    assert txn_commit(h, {TP: 5, ("t", 1): 7}) == {TP: ErrorCode.none, ("t", 1): ErrorCode.none}
    assert offset_of(h) is None
    end(h, commit=True)
    assert offset_of(h) == 5
    assert offset_of(h, tp=("t", 1)) == 7
    # Written as one transactional batch of the producer.
    assert h.log.producers == [PID, PID]


def test_an_aborted_transaction_leaves_the_last_committed_offset() -> None:
    h = Harness()
    plain_commit(h, 2)
    txn_commit(h, {TP: 9})
    assert offset_of(h) == 2
    end(h, commit=False)
    assert offset_of(h) == 2
    # A later marker of the same producer has nothing left to apply.
    end(h, commit=True)
    assert offset_of(h) == 2


def test_an_aborted_commit_to_a_new_simple_group_leaves_no_group() -> None:
    h = Harness()
    txn_commit(h, {TP: 9}, group="fresh")
    assert "fresh" in h.coordinator.groups
    end(h, commit=False, group="fresh")
    assert "fresh" not in h.coordinator.groups


def test_require_stable_reports_pending_partitions_as_unstable() -> None:
    h = Harness()
    plain_commit(h, 2)
    txn_commit(h, {TP: 9})
    stable = h.coordinator.offsets.fetch_offsets("g", [TP, ("t", 1)], require_stable=True)
    assert stable.unstable == {TP}
    everything = h.coordinator.offsets.fetch_offsets("g", None, require_stable=True)
    assert everything.unstable == {TP}
    assert h.coordinator.offsets.fetch_offsets("g", [TP]).unstable == frozenset()
    end(h, commit=True)
    assert (
        h.coordinator.offsets.fetch_offsets("g", [TP], require_stable=True).unstable == frozenset()
    )
    assert offset_of(h) == 9


def test_a_later_plain_commit_wins_over_an_earlier_transactional_one() -> None:
    h = Harness()
    txn_commit(h, {TP: 9})
    plain_commit(h, 20)
    end(h, commit=True)
    assert offset_of(h) == 20
    after = h.restarted()
    assert offset_of(after) == 20


def test_transactions_of_two_producers_end_independently() -> None:
    h = Harness()
    txn_commit(h, {TP: 5})
    txn_commit(h, {("t", 1): 6}, producer_id=OTHER_PID)
    end(h, commit=False, producer_id=OTHER_PID)
    assert offset_of(h, tp=("t", 1)) is None
    end(h, commit=True)
    assert offset_of(h) == 5


def test_member_checks_of_v3_requests() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    ok = txn_commit(h, {TP: 1}, generation=a.generation, member_id=a.member_id)
    assert ok == {TP: ErrorCode.none}
    stale = txn_commit(h, {TP: 1}, generation=a.generation + 1, member_id=a.member_id)
    assert stale == {TP: ErrorCode.illegal_generation}
    stranger = txn_commit(h, {TP: 1}, generation=a.generation, member_id="nobody")
    assert stranger == {TP: ErrorCode.unknown_member_id}
    # Before v3 a request carries no member: accepted even from an active group (unlike
    # OffsetCommit), as Kafka.
    assert txn_commit(h, {TP: 1}) == {TP: ErrorCode.none}


def test_fenced_static_member() -> None:
    h = Harness()
    a = h.member(instance_id="i-1")
    form_group(h, a)
    fenced = txn_commit(
        h, {TP: 1}, generation=a.generation, member_id="an-old-id", instance_id="i-1"
    )
    assert fenced == {TP: ErrorCode.fenced_instance_id}


def test_unknown_group_with_a_generation_is_an_illegal_generation() -> None:
    h = Harness()
    assert txn_commit(h, {TP: 1}, group="nobody", generation=3, member_id="m") == {
        TP: ErrorCode.illegal_generation
    }
    assert "nobody" not in h.coordinator.groups


def test_metadata_too_large_refuses_only_that_partition() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    result = h.coordinator.offsets.commit_transactional_offsets(
        TxnCommitRequest(
            "g",
            "txn",
            PID,
            EPOCH,
            (OffsetCommit("t", 0, 1, metadata="toolong"), OffsetCommit("t", 1, 2, metadata="ok")),
        )
    )
    assert result == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): ErrorCode.none}
    end(h, commit=True)
    assert offset_of(h, tp=("t", 0)) is None
    assert offset_of(h, tp=("t", 1)) == 2


def test_not_coordinator_and_loading() -> None:
    h = Harness()
    partition = h.coordinator.partition_for("g")
    h.coordinator.begin_loading(partition)
    assert txn_commit(h, {TP: 1}) == {TP: ErrorCode.coordinator_load_in_progress}
    h.coordinator.unload(partition)
    assert txn_commit(h, {TP: 1}) == {TP: ErrorCode.not_coordinator}


def test_a_refused_write_changes_nothing() -> None:
    h = Harness()
    h.log.fail_with = ErrorCode.not_leader_or_follower
    assert txn_commit(h, {TP: 1}) == {TP: ErrorCode.not_coordinator}
    h.log.fail_with = ErrorCode.invalid_producer_epoch
    assert txn_commit(h, {TP: 1}) == {TP: ErrorCode.invalid_producer_epoch}
    h.log.fail_with = None
    end(h, commit=True)
    assert offset_of(h) is None


def test_pending_offsets_do_not_expire_and_keep_their_group() -> None:
    h = Harness(offsets_retention_ms=1_000)
    plain_commit(h, 2)
    txn_commit(h, {TP: 9})
    h.clock.advance(2_000)
    assert h.coordinator.offsets.expire_offsets() == 0
    assert "g" in h.coordinator.groups
    end(h, commit=False)
    assert h.coordinator.offsets.expire_offsets() == 1
    assert "g" not in h.coordinator.groups


def test_an_open_transaction_on_another_partition_keeps_a_group_from_expiring() -> None:
    h = Harness(offsets_retention_ms=1_000)
    plain_commit(h, 2)
    txn_commit(h, {("t", 1): 9})
    h.clock.advance(2_000)
    assert h.coordinator.offsets.expire_offsets() == 1  # t-0 has nothing pending
    assert "g" in h.coordinator.groups


def test_deleting_a_group_deletes_its_pending_offsets() -> None:
    h = Harness()
    plain_commit(h, 2)
    txn_commit(h, {TP: 9, ("t", 1): 4})
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    tombstones = {
        (k.topic, k.partition)
        for k, v in h.log.decoded()
        if isinstance(k, rec.OffsetKey) and v is None
    }
    assert tombstones == {TP, ("t", 1)}
    end(h, commit=True)
    assert offset_of(h) is None
    after = h.restarted()
    assert "g" not in after.coordinator.groups


def test_offset_delete_removes_a_pending_commit() -> None:
    h = Harness()
    txn_commit(h, {TP: 9, ("t", 1): 4})
    assert h.coordinator.offsets.delete_offsets("g", [TP]) == (ErrorCode.none, {TP: ErrorCode.none})
    end(h, commit=True)
    assert offset_of(h) is None
    assert offset_of(h, tp=("t", 1)) == 4
    after = h.restarted()
    assert offset_of(after) is None
    assert offset_of(after, tp=("t", 1)) == 4


def test_deleted_topics_take_pending_commits_with_them() -> None:
    h = Harness()
    txn_commit(h, {TP: 9, ("u", 0): 4})
    h.coordinator.offsets.remove_offsets_of_topics({"t"})
    end(h, commit=True)
    assert offset_of(h) is None
    assert offset_of(h, tp=("u", 0)) == 4


def test_replay_keeps_commits_without_a_marker_pending() -> None:
    h = Harness()
    plain_commit(h, 2)
    txn_commit(h, {TP: 9})
    after = h.restarted()
    assert offset_of(after) == 2
    assert after.coordinator.offsets.fetch_offsets("g", [TP], require_stable=True).unstable == {TP}
    end(after, commit=True)
    assert offset_of(after) == 9


def test_replay_applies_markers_in_log_order() -> None:
    h = Harness()
    txn_commit(h, {TP: 5})
    end(h, commit=True)
    txn_commit(h, {TP: 6})
    end(h, commit=False)
    txn_commit(h, {("t", 1): 7}, producer_id=OTHER_PID)
    end(h, commit=True, producer_id=OTHER_PID)
    after = h.restarted()
    assert offset_of(after) == 5
    assert offset_of(after, tp=("t", 1)) == 7
    assert (
        after.coordinator.offsets.fetch_offsets("g", None, require_stable=True).unstable
        == frozenset()
    )


def test_unloading_a_partition_forgets_its_open_transactions() -> None:
    h = Harness()
    txn_commit(h, {TP: 9})
    partition = h.coordinator.partition_for("g")
    assert (partition, PID) in h.coordinator.offsets.open_transactions
    h.coordinator.unload(partition)
    assert h.coordinator.offsets.open_transactions == {}
