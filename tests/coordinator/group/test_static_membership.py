"""Static members (group.instance.id, KIP-345): a restart is not a rebalance."""

from __future__ import annotations

from odradek.coordinator.group.messages import JoinResult, MemberIdentity
from odradek.protocol.errors import ErrorCode

from .support import REBALANCE_MS, SESSION_MS, Harness, assignment, form_group


def test_a_restarted_static_member_rejoins_without_a_rebalance() -> None:
    h = Harness()
    a = h.member(instance_id="a")
    b = h.member(instance_id="b")
    form_group(h, a, b)
    generation = a.generation
    old_b = b.member_id
    stored_before = len(h.log.records)

    # b restarts: a new client with the same instance id and no member id.
    b2 = h.member(instance_id="b")
    result = b2.join()
    assert result.generation_id == generation
    assert result.member_id != old_b
    assert result.leader != b2.member_id or b.is_leader is False
    assert h.state() == "Stable"
    assert b2.sync().assignment == assignment({"t": [1]}), "it keeps its old assignment"
    assert a.heartbeat() == ErrorCode.none, "the other member sees no rebalance"
    # The old incarnation is fenced.
    assert b.heartbeat() == ErrorCode.fenced_instance_id
    assert len(h.log.records) == stored_before + 1, "the new member id is stored"


def test_a_restarted_static_leader_does_not_become_leader_of_a_stable_group() -> None:
    h = Harness()
    a = h.member(instance_id="a")
    b = h.member(instance_id="b")
    form_group(h, a, b)
    assert a.is_leader
    a2 = h.member(instance_id="a")
    result = a2.join()
    # Told the old leader id, the restarted leader syncs as a follower and keeps its partitions.
    assert result.leader == a.member_id != a2.member_id
    assert result.members == ()
    assert a2.sync().assignment == assignment({"t": [0]})
    assert h.coordinator.groups["g"].leader_id == a2.member_id
    assert h.state() == "Stable"


def test_a_static_member_that_misses_a_rebalance_keeps_its_place() -> None:
    h = Harness()
    a = h.member(instance_id="a")
    b = h.member(instance_id="b")
    form_group(h, a, b)
    c = h.member(instance_id="c")
    box_c, box_a = c.send_join(), a.send_join()
    # b stays alive (heartbeats) but does not rejoin before the rebalance timeout.
    for _ in range(REBALANCE_MS // 5000):
        assert b.heartbeat() == ErrorCode.rebalance_in_progress
        h.run_for(5000)
    ra, rc = a.joined(box_a), c.joined(box_c)
    assert ra.generation_id == rc.generation_id == b.generation + 1
    leader = ra if a.is_leader else rc
    assert {m.group_instance_id for m in leader.members} == {"a", "b", "c"}
    assert b.heartbeat() == ErrorCode.illegal_generation, "b learns it must rejoin"


def test_a_static_member_that_dies_is_removed_after_its_session() -> None:
    h = Harness()
    a = h.member(instance_id="a")
    b = h.member(instance_id="b")
    form_group(h, a, b)
    for _ in range(3):
        h.run_for(SESSION_MS // 2)
        assert a.heartbeat() in (ErrorCode.none, ErrorCode.rebalance_in_progress)
    assert h.state() == "PreparingRebalance"
    a.join()
    assert {m.member_id for m in a.last_join.members} == {a.member_id}  # type: ignore[union-attr]


def test_fenced_instance_id_for_a_stale_member_id_in_every_request() -> None:
    h = Harness()
    a = h.member(instance_id="a")
    form_group(h, a)
    stale = a.member_id
    a2 = h.member(instance_id="a")
    a2.join()
    a.member_id = stale
    assert a.heartbeat() == ErrorCode.fenced_instance_id
    assert a.sync().error == ErrorCode.fenced_instance_id
    assert a.commit({("t", 0): 5}) == {("t", 0): ErrorCode.fenced_instance_id}
    replies: list[object] = []
    h.coordinator.join_group(a.join_request(), replies.append)
    assert isinstance(replies[0], JoinResult)
    assert replies[0].error == ErrorCode.fenced_instance_id
    left = h.coordinator.leave_group("g", [MemberIdentity(stale, "a")])
    assert [code for _, code in left.members] == [ErrorCode.fenced_instance_id]
    assert a2.heartbeat() == ErrorCode.none


def test_a_static_member_leaves_by_instance_id() -> None:
    h = Harness()
    a = h.member(instance_id="a")
    b = h.member(instance_id="b")
    form_group(h, a, b)
    left = h.coordinator.leave_group("g", [MemberIdentity("", "b"), MemberIdentity("", "zz")])
    assert [code for _, code in left.members] == [ErrorCode.none, ErrorCode.unknown_member_id]
    assert h.state() == "PreparingRebalance"


def test_a_static_member_changing_protocol_on_restart_rebalances() -> None:
    h = Harness()
    a = h.member(instance_id="a", protocols=("range", "roundrobin"))
    b = h.member(instance_id="b", protocols=("range", "roundrobin"))
    form_group(h, a, b)
    a2 = h.member(instance_id="a", protocols=("roundrobin",))
    box = a2.send_join()
    assert not box.done
    assert h.state() == "PreparingRebalance"
    box_b = b.send_join()
    assert a2.joined(box).protocol_name == "roundrobin"
    assert b.joined(box_b).generation_id == a2.generation
