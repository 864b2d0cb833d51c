"""Committing and fetching offsets, the errors of bad commits, expiry and deletion."""

from __future__ import annotations

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.messages import CommitRequest, OffsetCommit
from odradek.protocol.errors import ErrorCode

from .support import SESSION_MS, Harness, form_group

DAY_MS = 24 * 3600 * 1000


def committed(h: Harness, group: str = "g") -> dict[tuple[str, int], int]:
    fetched = h.coordinator.offsets.fetch_offsets(group, None)
    return {tp: c.offset for tp, c in fetched.offsets if c is not None}


def simple_commit(h: Harness, group: str, offsets: dict[tuple[str, int], int]) -> dict:
    return h.coordinator.offsets.commit_offsets(
        CommitRequest(
            group, -1, "", None, tuple(OffsetCommit(t, p, o) for (t, p), o in offsets.items())
        )
    )


def test_members_commit_and_fetch_offsets() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    assert a.commit({("t", 0): 10, ("t", 1): 20}) == {
        ("t", 0): ErrorCode.none,
        ("t", 1): ErrorCode.none,
    }
    assert b.commit({("t", 1): 21}) == {("t", 1): ErrorCode.none}
    assert committed(h) == {("t", 0): 10, ("t", 1): 21}
    fetched = h.coordinator.offsets.fetch_offsets("g", [("t", 0), ("t", 5), ("u", 0)])
    assert fetched.error == ErrorCode.none
    assert [(tp, c.offset if c else None) for tp, c in fetched.offsets] == [
        (("t", 0), 10),
        (("t", 5), None),
        (("u", 0), None),
    ]
    written = [k for k, _ in h.log.decoded() if isinstance(k, rec.OffsetKey)]
    assert written == [
        rec.OffsetKey("g", "t", 0),
        rec.OffsetKey("g", "t", 1),
        rec.OffsetKey("g", "t", 1),
    ]
    partition = {p for p, _, _ in h.log.records}
    assert partition == {rec.partition_for("g", 4)}


def test_commit_keeps_metadata_and_leader_epoch_and_time() -> None:
    h = Harness()
    h.coordinator.offsets.commit_offsets(
        CommitRequest("s", -1, "", None, (OffsetCommit("t", 0, 7, 3, "checkpoint-7"),))
    )
    ((_, c),) = h.coordinator.offsets.fetch_offsets("s", None).offsets
    assert c is not None
    assert (c.offset, c.leader_epoch, c.metadata) == (7, 3, "checkpoint-7")
    assert c.commit_timestamp == h.clock.time_ms()


def test_commits_outside_group_management_make_a_simple_group() -> None:
    h = Harness()
    assert simple_commit(h, "simple", {("t", 0): 3}) == {("t", 0): ErrorCode.none}
    listed = h.coordinator.list_groups()
    assert [(g.group_id, g.state, g.protocol_type) for g in listed] == [("simple", "Empty", "")]


def test_stale_generation_is_illegal_and_the_group_carries_on() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    zombie_generation = a.generation - 1
    assert a.commit({("t", 0): 5}, generation=zombie_generation) == {
        ("t", 0): ErrorCode.illegal_generation
    }
    assert a.heartbeat(generation=zombie_generation) == ErrorCode.illegal_generation
    assert a.sync().error == ErrorCode.none
    assert b.commit({("t", 1): 9}) == {("t", 1): ErrorCode.none}
    assert a.heartbeat() == b.heartbeat() == ErrorCode.none
    assert committed(h) == {("t", 1): 9}


def test_unknown_member_commit_heartbeat_sync_are_refused() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    stranger = h.member()
    stranger.member_id, stranger.generation = "stranger", a.generation
    assert stranger.commit({("t", 0): 1}) == {("t", 0): ErrorCode.unknown_member_id}
    assert stranger.heartbeat() == ErrorCode.unknown_member_id
    assert stranger.sync().error == ErrorCode.unknown_member_id
    assert a.heartbeat() == ErrorCode.none
    assert h.state() == "Stable"


def test_commit_to_an_unknown_group_with_a_generation() -> None:
    h = Harness()
    ghost = h.member(group="nope")
    ghost.member_id, ghost.generation = "m", 3
    assert ghost.commit({("t", 0): 1}) == {("t", 0): ErrorCode.group_id_not_found}
    assert "nope" not in h.coordinator.groups


def test_commit_without_member_id_into_an_active_group_is_refused() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    assert simple_commit(h, "g", {("t", 0): 1}) == {("t", 0): ErrorCode.unknown_member_id}


def test_commit_during_a_rebalance() -> None:
    h = Harness()
    a, b = h.member(), h.member()
    form_group(h, a, b)
    c = h.member()
    box_c = c.send_join()
    # PreparingRebalance: the current generation may still commit (e.g. before revoking).
    assert a.commit({("t", 0): 4}) == {("t", 0): ErrorCode.none}
    box_a, box_b = a.send_join(), b.send_join()
    for m, box in ((a, box_a), (b, box_b), (c, box_c)):
        m.joined(box)
    # CompletingRebalance: the new generation has no assignment yet.
    assert a.commit({("t", 0): 5}) == {("t", 0): ErrorCode.rebalance_in_progress}
    assert committed(h) == {("t", 0): 4}


def test_oversized_metadata_fails_only_its_partition() -> None:
    h = Harness(offset_metadata_max_bytes=10)
    a = h.member()
    form_group(h, a)
    result = h.coordinator.offsets.commit_offsets(
        CommitRequest(
            "g",
            a.generation,
            a.member_id,
            None,
            (
                OffsetCommit("t", 0, 1, metadata="x" * 11),
                OffsetCommit("t", 1, 2, metadata="x" * 10),
            ),
        )
    )
    assert result == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): ErrorCode.none}
    assert committed(h) == {("t", 1): 2}
    assert a.heartbeat() == ErrorCode.none


def test_a_commit_too_large_to_write_is_invalid_commit_offset_size() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    h.log.fail_with = ErrorCode.record_list_too_large
    assert a.commit({("t", 0): 1}) == {("t", 0): ErrorCode.invalid_commit_offset_size}
    h.log.fail_with = None
    assert committed(h) == {}
    assert a.commit({("t", 0): 1}) == {("t", 0): ErrorCode.none}


def test_a_failed_group_write_fails_the_sync_and_the_group_rebalances() -> None:
    h = Harness()
    a = h.member()
    a.join()
    h.log.fail_with = ErrorCode.message_too_large
    assert a.sync({a.member_id: b"x"}).error == ErrorCode.unknown_server_error
    assert h.state() == "PreparingRebalance"
    h.log.fail_with = None
    a.join()
    assert a.sync({a.member_id: b"x"}).assignment == b"x"


def test_commit_renews_the_members_session() -> None:
    h = Harness()
    a = h.member()
    form_group(h, a)
    for _ in range(5):
        h.run_for(SESSION_MS - 1)
        assert a.commit({("t", 0): 1}) == {("t", 0): ErrorCode.none}
    assert h.state() == "Stable"


def test_offsets_of_a_simple_group_expire_one_by_one() -> None:
    h = Harness(offsets_retention_ms=DAY_MS, offsets_retention_check_interval_ms=60_000)
    simple_commit(h, "s", {("t", 0): 1})
    h.run_for(DAY_MS // 2)
    simple_commit(h, "s", {("t", 1): 2})
    h.run_for(DAY_MS // 2 + 60_000)
    assert committed(h, "s") == {("t", 1): 2}
    h.run_for(DAY_MS // 2)
    assert "s" not in h.coordinator.groups
    tombstones = [k for k, v in h.log.decoded() if v is None]
    assert tombstones == [rec.OffsetKey("s", "t", 0), rec.OffsetKey("s", "t", 1)]


def test_offsets_of_an_empty_consumer_group_expire_after_it_empties() -> None:
    h = Harness(
        offsets_retention_ms=DAY_MS,
        offsets_retention_check_interval_ms=60_000,
        max_session_timeout_ms=3 * DAY_MS,
    )
    a = h.member(session_ms=2 * DAY_MS)
    form_group(h, a)
    a.commit({("t", 0): 1})
    h.run_for(DAY_MS + 60_000)  # an active group keeps the offsets of its subscribed topics
    assert committed(h) == {("t", 0): 1}
    a.leave()  # the group is empty from now on
    assert h.state() == "Empty"
    h.run_for(DAY_MS - 60_000)
    assert committed(h) == {("t", 0): 1}
    h.run_for(60_000)
    assert committed(h) == {}
    assert "g" not in h.coordinator.groups
    assert h.log.decoded()[-1] == (rec.GroupKey("g"), None)


def test_active_group_keeps_offsets_of_subscribed_topics_only() -> None:
    h = Harness(
        offsets_retention_ms=DAY_MS,
        offsets_retention_check_interval_ms=60_000,
        min_session_timeout_ms=1,
        max_session_timeout_ms=10 * DAY_MS,
    )
    a = h.member(session_ms=10 * DAY_MS, topics=("t",))
    form_group(h, a)
    a.commit({("t", 0): 1, ("old", 0): 2})
    h.run_for(DAY_MS + 60_000)
    assert h.state() == "Stable"
    assert committed(h) == {("t", 0): 1}


def test_deleted_topics_take_their_offsets() -> None:
    h = Harness()
    simple_commit(h, "s", {("t", 0): 1, ("u", 0): 2})
    h.coordinator.offsets.remove_offsets_of_topics({"u"})
    assert committed(h, "s") == {("t", 0): 1}
    h.coordinator.offsets.remove_offsets_of_topics({"t"})
    assert "s" not in h.coordinator.groups


def test_offset_delete() -> None:
    h = Harness()
    a = h.member(topics=("t",))
    form_group(h, a)
    a.commit({("t", 0): 1, ("u", 0): 2})
    error, results = h.coordinator.offsets.delete_offsets("g", [("t", 0), ("u", 0), ("v", 0)])
    assert error == ErrorCode.none
    assert results == {
        ("t", 0): ErrorCode.group_subscribed_to_topic,
        ("u", 0): ErrorCode.none,
        ("v", 0): ErrorCode.none,
    }
    assert committed(h) == {("t", 0): 1}
    assert h.coordinator.offsets.delete_offsets("nope", [("t", 0)]) == (
        ErrorCode.group_id_not_found,
        {},
    )
    a.leave()
    assert h.coordinator.offsets.delete_offsets("g", [("t", 0)]) == (
        ErrorCode.none,
        {("t", 0): ErrorCode.none},
    )
    assert committed(h) == {}
