"""State rebuilt from ``__consumer_offsets``: a restarted coordinator has every commit and group."""

from __future__ import annotations

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.messages import CommitRequest, OffsetCommit
from odradek.protocol.errors import ErrorCode

from .support import SESSION_MS, Harness, assignment, form_group


def test_offsets_survive_a_restart() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    a.commit({("t", 0): 10})
    a.commit({("t", 0): 11, ("t", 1): 3})
    h.coordinator.offsets.commit_offsets(
        CommitRequest("simple", -1, "", None, (OffsetCommit("t", 0, 99),))
    )
    after = h.restarted()
    fetched = {
        tp: c.offset for tp, c in after.coordinator.offsets.fetch_offsets("g", None).offsets if c
    }
    assert fetched == {("t", 0): 11, ("t", 1): 3}
    simple = after.coordinator.offsets.fetch_offsets("simple", [("t", 0)]).offsets
    assert simple[0][1] is not None and simple[0][1].offset == 99


def test_a_stable_group_survives_a_restart_and_its_members_carry_on() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    after = h.restarted()
    a.h = b.h = after
    assert after.state() == "Stable"
    assert a.heartbeat() == b.heartbeat() == ErrorCode.none
    assert a.sync().assignment in (assignment({"t": [0]}), assignment({"t": [1]}))
    described = after.coordinator.describe_group("g")
    assert {m.member_id for m in described.members} == {a.member_id, b.member_id}
    assert described.protocol_name == "range"
    # Their sessions start at the restart; a member that never comes back is removed.
    after.run_for(SESSION_MS - 1)
    assert a.heartbeat() == ErrorCode.none
    after.run_for(SESSION_MS - 1)
    assert a.heartbeat() == ErrorCode.rebalance_in_progress
    assert b.heartbeat() == ErrorCode.unknown_member_id


def test_deleted_groups_and_offsets_stay_deleted() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    a.commit({("t", 0): 1})
    a.leave()
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    h.coordinator.offsets.commit_offsets(
        CommitRequest("s", -1, "", None, (OffsetCommit("t", 0, 1),))
    )
    h.coordinator.offsets.delete_offsets("s", [("t", 0)])
    after = h.restarted()
    assert after.coordinator.groups == {}


def test_replay_ignores_records_it_cannot_read() -> None:
    h = Harness()
    h.coordinator.replay(b"\x00\x09junk", b"")
    h.coordinator.replay(None, b"x")
    key = rec.encode_key(rec.OffsetKey("g", "t", 0))
    h.coordinator.replay(key, b"\x00\x07garbage")
    assert h.coordinator.groups.get("g") is None or not h.coordinator.groups["g"].offsets


def test_static_member_mapping_survives_a_restart() -> None:
    h = Harness()
    a = h.member(instance_id="a")
    form_group(h, a)
    after = h.restarted()
    a2 = after.member(instance_id="a")
    result = a2.join()
    assert result.generation_id == a.generation
    assert after.state() == "Stable"
    a.h = after
    assert a.heartbeat() == ErrorCode.fenced_instance_id
