"""Share groups (KIP-932) in the group coordinator, on a manual clock: joining, the simple
assignment, epochs, sessions, leaving, describing, listing, deleting and replay."""

from __future__ import annotations

import uuid

from odradek.coordinator.group.assignors import TopicInfo
from odradek.coordinator.group.share_group import (
    ShareGroupSettings,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
    assign,
)
from odradek.protocol.errors import ErrorCode

from .consumer_support import Catalog, Member, restarted
from .support import Harness

SESSION_MS = 45_000


def harness(**topics: int) -> tuple[Harness, Catalog]:
    h = Harness()
    catalog = Catalog(**topics)
    h.coordinator.consumer.topics = catalog
    return h, catalog


def beat(
    h: Harness,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None = ("t",),
    group: str = "g",
) -> ShareHeartbeatResult:
    return h.coordinator.share.heartbeat(
        ShareHeartbeatRequest(group, member, epoch, None, topics, "client", "/127.0.0.1")
    )


def partitions(result: ShareHeartbeatResult) -> set[int]:
    assert result.assignment is not None
    return {p for ps in result.assignment.values() for p in ps}


def test_the_simple_assignment_covers_every_partition_and_every_member() -> None:
    t = TopicInfo(uuid.uuid4(), 4)
    two = assign({"a": ["t"], "b": ["t"]}, {"t": t})
    assert two["a"][t.topic_id] | two["b"][t.topic_id] == {0, 1, 2, 3}
    assert len(two["a"][t.topic_id]) == len(two["b"][t.topic_id]) == 2
    six = assign({m: ["t"] for m in "abcdef"}, {"t": t})
    assert all(len(a[t.topic_id]) == 1 for a in six.values())
    assert set().union(*(a[t.topic_id] for a in six.values())) == {0, 1, 2, 3}
    assert assign({"a": ["other"]}, {"t": t}) == {"a": {}}


def test_members_join_and_share_the_partitions() -> None:
    h, _ = harness(t=4)
    first = beat(h, "a", 0)
    assert first.error == ErrorCode.none and first.member_epoch == 1
    assert partitions(first) == {0, 1, 2, 3}
    second = beat(h, "b", 0)
    assert second.member_epoch == 2 and len(partitions(second)) == 2
    moved = beat(h, "a", 1, None)
    assert moved.member_epoch == 2 and partitions(moved) == {0, 1, 2, 3} - partitions(second)
    steady = beat(h, "a", 2, None)
    assert steady.error == ErrorCode.none and steady.assignment is None


def test_epochs_are_checked() -> None:
    h, _ = harness(t=1)
    beat(h, "a", 0)
    assert beat(h, "a", 7, None).error == ErrorCode.fenced_member_epoch
    assert beat(h, "nobody", 1, None).error == ErrorCode.unknown_member_id
    assert beat(h, "b", 0, None).error == ErrorCode.invalid_request
    assert beat(h, "", 0).error == ErrorCode.invalid_request


def test_a_member_without_heartbeats_is_removed() -> None:
    h, _ = harness(t=2)
    beat(h, "a", 0)
    beat(h, "b", 0)
    for _ in range(3):
        h.run_for(SESSION_MS // 2)
        beat(h, "b", h.coordinator.share.groups["g"].members["b"].member_epoch, None)
    group = h.coordinator.share.groups["g"]
    assert set(group.members) == {"b"}
    assert beat(h, "a", 1, None).error == ErrorCode.unknown_member_id
    assert partitions(beat(h, "b", 0)) == {0, 1}  # b rejoining gets everything


def test_leaving_reassigns_and_empties_the_group() -> None:
    h, _ = harness(t=2)
    beat(h, "a", 0)
    beat(h, "b", 0)
    left = beat(h, "a", -1, None)
    assert left.error == ErrorCode.none and left.member_epoch == -1
    rejoined = beat(h, "b", 2, None)
    assert partitions(rejoined) == {0, 1}
    beat(h, "b", -1, None)
    described = h.coordinator.share.describe("g")
    assert described.state == "Empty" and described.members == ()


def test_describe_list_and_delete() -> None:
    h, catalog = harness(t=2)
    beat(h, "a", 0)
    described = h.coordinator.share.describe("g")
    assert described.state == "Stable" and described.group_epoch == 1
    (member,) = described.members
    assert member.assignment == ((catalog.id("t"), "t", (0, 1)),)
    assert h.coordinator.share.describe("nope").error == ErrorCode.group_id_not_found
    listed = h.coordinator.list_groups(types=["share"])
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("g", "share", "Stable")]
    assert h.coordinator.list_groups(types=["consumer"]) == []
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.non_empty_group}
    beat(h, "a", -1, None)
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert h.coordinator.list_groups() == []


def test_a_group_survives_a_restart_with_its_epoch() -> None:
    h, catalog = harness(t=2)
    beat(h, "a", 0)
    beat(h, "b", 0)
    after = restarted(h, catalog)
    described = after.coordinator.share.describe("g")
    assert described.error == ErrorCode.none and described.group_epoch == 2
    assert described.state == "Empty"
    assert beat(after, "a", 0).member_epoch == 3
    deleted = restarted(after, catalog)
    beat(deleted, "a", 0)
    beat(deleted, "a", -1, None)
    assert deleted.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert restarted(deleted, catalog).coordinator.share.describe("g").error == (
        ErrorCode.group_id_not_found
    )


def test_a_consumer_group_id_is_not_a_share_group() -> None:
    h, _ = harness(t=1)
    h.member().join()  # a classic group named "g"
    assert beat(h, "a", 0).error == ErrorCode.group_id_not_found


def test_a_share_group_id_is_neither_a_classic_nor_a_consumer_group() -> None:
    h, _ = harness(t=1)
    assert beat(h, "a", 0).error == ErrorCode.none
    box = h.member().send_join()
    assert box.done and box.value.error == ErrorCode.group_id_not_found
    consumer = Member(h)
    assert consumer.heartbeat() == ErrorCode.group_id_not_found
    assert consumer.last is not None
    assert consumer.last.message == "Group g is not a consumer group."
    assert [g.group_id for g in h.coordinator.share.active()] == ["g"]


def test_max_size() -> None:
    h = Harness(share=ShareGroupSettings(max_size=1))  # type: ignore[arg-type]
    h.coordinator.consumer.topics = Catalog(t=1)
    beat(h, "a", 0)
    assert beat(h, "b", 0).error == ErrorCode.group_max_size_reached
