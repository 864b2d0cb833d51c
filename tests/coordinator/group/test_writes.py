"""Operations ask for writes, the runtime appends them: a write the log refuses leaves the state as
it was before the operation (nothing of it is seen by the operations after), and the request is
answered with the write's error, as Kafka maps it. On a manual clock, with an in-memory log."""

from __future__ import annotations

from odradek.coordinator.common.runtime import CoordinatorWrite, append_writes
from odradek.coordinator.group.messages import CommitRequest, OffsetCommit
from odradek.protocol.errors import ErrorCode, KafkaError

from .consumer_support import Member, consumer_harness
from .support import Harness, form_group

NOT_ENOUGH = ErrorCode.not_enough_replicas


def committed(h: Harness, group: str = "g") -> int | None:
    fetched = h.coordinator.offsets.fetch_offsets(group, [("t", 0)])
    ((_, found),) = fetched.offsets
    return None if found is None else found.offset


def simple_commit(h: Harness, offset: int, group: str = "g") -> ErrorCode:
    request = CommitRequest(group, -1, "", None, (OffsetCommit("t", 0, offset),))
    return h.coordinator.offsets.commit_offsets(request)[("t", 0)]


def test_an_operation_asks_for_its_records_and_the_runtime_appends_them() -> None:
    h = Harness()
    request = CommitRequest("g", -1, "", None, (OffsetCommit("t", 0, 5),))
    # The state machine alone: the records are asked for, nothing changes until they are in.
    results = h.machine.offsets.commit_offsets(request)
    assert results == {("t", 0): ErrorCode.none}
    (write,) = h.machine.take_writes()
    assert write.partition == h.machine.partition_for("g") and len(write.records) == 1
    assert h.machine.groups == {}
    write.applied(0)
    assert committed(h) == 5


def test_a_refused_commit_changes_nothing() -> None:
    h = Harness()
    assert simple_commit(h, 5) == ErrorCode.none
    h.log.fail_with = NOT_ENOUGH
    assert simple_commit(h, 9) == ErrorCode.coordinator_not_available
    assert h.log.last_error == NOT_ENOUGH
    assert committed(h) == 5
    assert len(h.log.records) == 1
    # A group a refused commit would have made is not there at all.
    assert simple_commit(h, 1, group="new") == ErrorCode.coordinator_not_available
    assert "new" not in h.machine.groups
    h.log.fail_with = None
    assert simple_commit(h, 9) == ErrorCode.none
    assert committed(h) == 9
    assert committed(h.restarted()) == 9


def test_a_refused_assignment_leaves_the_generation_unassigned() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    generation = a.generation
    # b leaves; a rejoins the next generation alone and, as leader, assigns — refused.
    assert b.leave() == ErrorCode.none
    a.join()
    h.log.fail_with = ErrorCode.not_leader_or_follower
    before = len(h.log.records)
    result = a.sync({a.member_id: b"mine"})
    assert result.error == ErrorCode.not_coordinator
    assert len(h.log.records) == before
    # Not Stable with an assignment nobody stored: the group rebalances again.
    assert h.state() == "PreparingRebalance"
    assert all(m.assignment == b"" for m in h.machine.groups["g"].members.values())
    h.log.fail_with = None
    a.join()
    assert a.generation == generation + 2
    assert a.sync({a.member_id: b"mine"}).assignment == b"mine"
    assert h.state() == "Stable"


def test_a_refused_group_deletion_keeps_the_group() -> None:
    h = Harness()
    assert simple_commit(h, 3) == ErrorCode.none
    h.log.fail_with = NOT_ENOUGH
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.coordinator_not_available}
    assert committed(h) == 3
    h.log.fail_with = None
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert "g" not in h.machine.groups


def test_a_refused_offset_delete_keeps_the_offsets() -> None:
    h = Harness()
    assert simple_commit(h, 3) == ErrorCode.none
    h.log.fail_with = NOT_ENOUGH
    error, _ = h.coordinator.offsets.delete_offsets("g", [("t", 0)])
    assert error == ErrorCode.none  # the state machine's own answer, before the append
    assert h.log.last_error == NOT_ENOUGH  # the whole request's answer
    assert committed(h) == 3


def test_a_refused_consumer_group_heartbeat_is_taken_back() -> None:
    h, _ = consumer_harness(t=2)
    first = Member(h)
    assert first.heartbeat() == ErrorCode.none
    group = h.machine.groups["g"].consumer
    assert group is not None
    epoch, members = group.group_epoch, dict(group.members)
    target = dict(group.target)
    h.log.fail_with = NOT_ENOUGH
    # A second member joins: its records are applied at once, then put back when refused.
    second = Member(h)
    assert second.heartbeat() == ErrorCode.none  # the state machine's own answer
    assert h.log.last_error == NOT_ENOUGH  # what the request is answered with
    assert group.group_epoch == epoch
    assert group.members == members and group.target == target
    # A new group that was refused is not there at all.
    assert Member(h, group="other").heartbeat() == ErrorCode.none
    assert "other" not in h.machine.groups
    h.log.fail_with = None
    assert second.heartbeat(epoch=0) == ErrorCode.none
    assert group.group_epoch == epoch + 1 and second.member_id in group.members


def test_a_consumer_group_member_whose_fencing_is_refused_keeps_its_session() -> None:
    h, _ = consumer_harness(t=1)
    member = Member(h)
    assert member.heartbeat() == ErrorCode.none
    h.log.fail_with = NOT_ENOUGH
    h.run_for(h.config.consumer.session_timeout_ms + 1)
    group = h.machine.groups["g"].consumer
    assert group is not None and member.member_id in group.members
    assert h.log.refused >= 1
    # Its session was given back: once the log takes records again, it is fenced.
    h.log.fail_with = None
    h.run_for(h.config.consumer.session_timeout_ms + 1)
    assert member.member_id not in group.members


def test_after_a_refused_write_the_rest_of_the_operations_writes_are_not_appended() -> None:
    h = Harness()
    outcomes: list[str] = []
    for name in ("first", "second"):
        h.machine.write(
            "g",
            [(name.encode(), b"v")],
            applied=lambda _, name=name: outcomes.append(f"{name} applied"),
            failed=lambda code, name=name: outcomes.append(f"{name} {code.name}"),
        )
    appended: list[bytes] = []

    def append(write: CoordinatorWrite) -> int:
        if not appended:
            appended.append(write.records[0][0])
            raise KafkaError(ErrorCode.record_list_too_large)
        appended.append(write.records[0][0])
        return 0

    assert append_writes(h.machine, append)[1] == ErrorCode.record_list_too_large
    assert appended == [b"first"]
    assert outcomes == ["first record_list_too_large", "second record_list_too_large"]
