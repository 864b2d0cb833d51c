"""Joining, syncing, heartbeats, leaving and dying: the group state machine on a manual clock."""

from __future__ import annotations

from dataclasses import replace

from odradek.coordinator.group.messages import JoinResult, MemberIdentity, Protocol, SyncResult
from odradek.protocol.errors import ErrorCode

from .support import REBALANCE_MS, SESSION_MS, Harness, assignment, form_group


def test_first_join_without_member_id_is_told_to_come_back_with_one() -> None:
    h = Harness()
    a = h.member()
    first: list[object] = []
    h.coordinator.join_group(a.join_request(), first.append)
    (result,) = first
    assert isinstance(result, JoinResult)
    assert result.error == ErrorCode.member_id_required
    assert result.member_id.startswith("client-")
    assert h.state() == "Empty"  # a pending member is not a member yet
    a.member_id = result.member_id
    joined = a.join()
    assert joined.generation_id == 1
    assert joined.leader == a.member_id
    assert [m.member_id for m in joined.members] == [a.member_id]
    assert joined.protocol_name == "range"


def test_join_v3_and_older_get_a_member_id_at_once() -> None:
    h = Harness()
    a = h.member()
    replies: list[object] = []
    h.coordinator.join_group(
        replace(a.join_request(), require_known_member_id=False), replies.append
    )
    (result,) = replies
    assert isinstance(result, JoinResult)
    assert result.error == ErrorCode.none
    assert result.member_id and result.generation_id == 1


def test_two_members_form_one_generation_and_get_the_leaders_assignment() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    a.join()
    assert a.sync({a.member_id: assignment({"t": [0, 1]})}).error == ErrorCode.none
    assert h.state() == "Stable"

    box_b = b.send_join()
    assert not box_b.done, "the new member waits for the old one to rejoin"
    assert h.state() == "PreparingRebalance"
    assert a.heartbeat() == ErrorCode.rebalance_in_progress
    box_a = a.send_join()
    ra, rb = a.joined(box_a), b.joined(box_b)
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == rb.leader == a.member_id
    assert {m.member_id for m in ra.members} == {a.member_id, b.member_id}
    assert rb.members == (), "only the leader gets the members' metadata"
    assert h.state() == "CompletingRebalance"

    follower = b.send_sync()
    assert not follower.done, "a follower waits for the leader's assignment"
    leader = a.send_sync({a.member_id: assignment({"t": [0]}), b.member_id: assignment({"t": [1]})})
    assert isinstance(leader.value, SyncResult) and isinstance(follower.value, SyncResult)
    assert leader.value.assignment == assignment({"t": [0]})
    assert follower.value.assignment == assignment({"t": [1]})
    assert h.state() == "Stable"
    assert a.heartbeat() == b.heartbeat() == ErrorCode.none

    stored = h.log.group_values("g")[-1]
    assert stored is not None and stored.generation == 2
    assert {m.member_id: m.assignment for m in stored.members} == {
        a.member_id: assignment({"t": [0]}),
        b.member_id: assignment({"t": [1]}),
    }


def test_a_member_missing_from_the_leaders_assignment_gets_nothing() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b, assign={})
    assert a.sync().assignment == b"" and b.sync().assignment == b""


def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    h = Harness()
    a, b, c = h.member(), h.member(), h.member()
    form_group(h, a, b, c)
    generation = a.generation
    h.advance(SESSION_MS // 2)
    assert a.heartbeat() == b.heartbeat() == ErrorCode.none
    # c has died: it sends nothing.
    h.advance(SESSION_MS // 2 - 1)
    assert a.heartbeat() == b.heartbeat() == ErrorCode.none
    h.advance(1)
    assert h.state() == "PreparingRebalance"
    assert a.heartbeat() == ErrorCode.rebalance_in_progress
    box_a, box_b = a.send_join(), b.send_join()
    ra, rb = a.joined(box_a), b.joined(box_b)
    assert ra.generation_id == rb.generation_id == generation + 1
    leader = a if a.is_leader else b
    assert {m.member_id for m in leader.last_join.members} == {a.member_id, b.member_id}  # type: ignore[union-attr]
    assert c.heartbeat() == ErrorCode.unknown_member_id
    assert rb.error == ErrorCode.none


def test_heartbeats_just_inside_the_session_keep_a_member() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    for _ in range(20):
        h.advance(SESSION_MS - 1)
        assert a.heartbeat() == ErrorCode.none
    h.advance(SESSION_MS)
    assert h.state() == "Empty"
    assert a.heartbeat() == ErrorCode.unknown_member_id


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    c = h.member()
    box_c = c.send_join()
    box_a = a.send_join()
    # b keeps heartbeating (so its session lives) but never rejoins.
    for _ in range(REBALANCE_MS // 5000):
        h.advance(5000)
        assert b.heartbeat() in (ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id)
    assert box_a.done and box_c.done
    ra, rc = a.joined(box_a), c.joined(box_c)
    assert ra.generation_id == rc.generation_id == 3
    assert b.heartbeat() == ErrorCode.unknown_member_id


def test_leaving_members_rebalance_and_the_last_one_empties_the_group() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    assert b.leave() == ErrorCode.none
    assert h.state() == "PreparingRebalance"
    a.join()  # all remaining members rejoined: the rebalance completes at once
    assert a.generation == 3
    assert a.sync({a.member_id: assignment({"t": [0, 1]})}).error == ErrorCode.none
    assert a.leave() == ErrorCode.none
    assert h.state() == "Empty"
    empty = h.log.group_values("g")[-1]
    assert empty is not None and empty.generation == 4 and empty.members == ()
    assert empty.protocol is None


def test_leave_of_unknown_members_is_refused_per_member() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    result = h.coordinator.leave_group("g", [MemberIdentity("nobody"), MemberIdentity(a.member_id)])
    assert [code for _, code in result.members] == [ErrorCode.unknown_member_id, ErrorCode.none]
    assert h.coordinator.leave_group("no-such-group", [MemberIdentity("x")]).error == (
        ErrorCode.unknown_member_id
    )


def test_a_member_killed_during_a_join_is_reaped_by_the_join_timeout() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    b = h.member()
    b.send_join()  # b joins, a must rejoin; then a dies without rejoining
    h.advance(REBALANCE_MS)
    # The rebalance timeout dropped a; b is a generation of its own.
    assert h.state() == "CompletingRebalance"
    assert a.heartbeat() == ErrorCode.unknown_member_id


def test_a_member_that_joins_and_never_syncs_is_removed() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    c = h.member()
    box_c = c.send_join()
    box_a, box_b = a.send_join(), b.send_join()
    for m, box in ((a, box_a), (b, box_b), (c, box_c)):
        m.joined(box)
    leader = next(m for m in (a, b, c) if m.is_leader)
    others = [m for m in (a, b, c) if m is not leader]
    leader.send_sync({m.member_id: b"x" for m in (a, b, c)})
    others[0].sync()
    # others[1] never syncs; it keeps heartbeating, but the rebalance timeout removes it.
    for _ in range(REBALANCE_MS // 5000 - 1):
        h.advance(5000)
        assert {m.heartbeat() for m in (a, b, c)} == {ErrorCode.none}
    h.advance(5000)
    assert h.state() == "PreparingRebalance"
    assert others[1].heartbeat() == ErrorCode.unknown_member_id


def test_pending_member_that_never_returns_is_forgotten() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    replies: list[object] = []
    h.coordinator.join_group(h.member().join_request(), replies.append)
    assert isinstance(replies[0], JoinResult)
    assert replies[0].error == ErrorCode.member_id_required
    assert h.state() == "Stable", "a pending member does not rebalance the group"
    h.advance(SESSION_MS + 1)
    assert h.coordinator.groups["g"].pending_members == set()


def test_initial_rebalance_delay_gathers_members_into_the_first_generation() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    a, b, c = h.member(), h.member(), h.member()
    box_a = a.send_join()
    h.run_for(2000)
    box_b = b.send_join()
    h.run_for(2000)  # the first delay passed, but b arrived meanwhile: wait another round
    assert not box_a.done
    box_c = c.send_join()
    h.run_for(1999)
    assert not box_a.done  # the second round ends at 6000, with c new: a third until 9000
    h.run_for(3000)
    assert not box_a.done
    h.run_for(1)
    for m, box in ((a, box_a), (b, box_b), (c, box_c)):
        assert m.joined(box).generation_id == 1


def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.member(rebalance_ms=5000)
    box = a.send_join()
    for _ in range(10):
        h.run_for(1000)
        if box.done:
            break
        h.member().send_join()
    assert box.done
    assert h.clock.monotonic_ms() <= 6000


def test_joining_a_stable_group_again_with_the_same_protocols_needs_no_rebalance() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    follower = b if not b.is_leader else a
    result = follower.join()
    assert result.generation_id == 2
    assert h.state() == "Stable"


def test_protocol_is_the_one_most_members_prefer_among_those_all_support() -> None:
    h = Harness()
    a = h.member(protocols=("cooperative-sticky", "range"))
    b = h.member(protocols=("range", "cooperative-sticky"))
    c = h.member(protocols=("range", "roundrobin", "cooperative-sticky"))
    form_group(h, a, b, c)
    assert a.last_join is not None and a.last_join.protocol_name == "range"
    d = h.member(protocols=("roundrobin",))
    replies: list[object] = []
    h.coordinator.join_group(d.join_request(), replies.append)
    assert isinstance(replies[0], JoinResult)
    assert replies[0].error == ErrorCode.inconsistent_group_protocol
    assert h.state() == "Stable"


def test_members_see_a_changed_protocol_after_the_cooperative_upgrade() -> None:
    h = Harness()
    a = h.member(protocols=("range", "cooperative-sticky"))
    b = h.member(protocols=("range", "cooperative-sticky"))
    form_group(h, a, b)
    assert a.last_join is not None and a.last_join.protocol_name == "range"
    a.protocols = b.protocols = ("cooperative-sticky", "range")
    form_group(h, a, b)
    assert a.last_join.protocol_name == "cooperative-sticky"


def test_metadata_is_passed_through_unchanged() -> None:
    h = Harness()
    a = h.member()
    odd = bytes(range(256)) * 10
    request = replace(a.join_request(), protocols=(Protocol("custom", odd),))
    replies: list[object] = []
    h.coordinator.join_group(request, replies.append)
    a.member_id = replies[0].member_id  # type: ignore[attr-defined]
    replies.clear()
    request = replace(request, member_id=a.member_id)
    h.coordinator.join_group(request, replies.append)
    result = replies[0]
    assert isinstance(result, JoinResult)
    assert result.members[0].metadata == odd
