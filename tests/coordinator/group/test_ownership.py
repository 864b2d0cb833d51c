"""Which groups a coordinator serves: those of the ``__consumer_offsets`` partitions it leads,
loaded from their records and unloaded when leadership moves (Kafka's GroupMetadataManager)."""

from __future__ import annotations

from odradek.coordinator.common.internal_topic import write_error
from odradek.coordinator.group import records as rec
from odradek.coordinator.group.messages import (
    CommitRequest,
    HeartbeatRequest,
    JoinResult,
    MemberIdentity,
    OffsetCommit,
    SyncRequest,
    SyncResult,
)
from odradek.protocol.errors import ErrorCode

from .support import SESSION_MS, Box, Harness, form_group

# With 4 offsets partitions: "g" lives in partition 3, "h" in 0.
G_PARTITION = 3
H_PARTITION = 0


def test_group_ids_map_to_the_partitions_the_tests_assume() -> None:
    assert rec.partition_for("g", 4) == G_PARTITION
    assert rec.partition_for("h", 4) == H_PARTITION


def every_answer(h: Harness, group: str) -> dict[str, ErrorCode]:
    """What each kind of request about ``group`` gets, as a member of it would ask."""
    c = h.coordinator
    join = Box()
    c.join_group(h.member(group).join_request(), join)
    sync = Box()
    c.sync_group(SyncRequest(group, 1, "m", None, ()), sync)
    join_result, sync_result = join.value, sync.value
    assert isinstance(join_result, JoinResult) and isinstance(sync_result, SyncResult)
    commit = c.offsets.commit_offsets(
        CommitRequest(group, -1, "", None, (OffsetCommit("t", 0, 5),))
    )
    return {
        "join": join_result.error,
        "sync": sync_result.error,
        "heartbeat": c.heartbeat(HeartbeatRequest(group, 1, "m")),
        "leave": c.leave_group(group, [MemberIdentity("m")]).error,
        "commit": commit[("t", 0)],
        "fetch": c.offsets.fetch_offsets(group, None).error,
        "describe": c.describe_group(group).error,
        "delete": c.delete_groups([group])[group],
        "delete offsets": c.offsets.delete_offsets(group, [("t", 0)])[0],
    }


def test_groups_of_partitions_not_led_here_get_not_coordinator() -> None:
    h = Harness()
    a = h.member("g")
    form_group(h, a)
    a.commit({("t", 0): 7})
    h.coordinator.unload(G_PARTITION)
    answers = every_answer(h, "g")
    assert set(answers.values()) == {ErrorCode.not_coordinator}, answers
    assert h.coordinator.list_groups() == []
    # Nothing was written for a group not served here.
    assert all(rec.decode_key(key).group == "g" for _, key, _ in h.log.records)
    written = len(h.log.records)
    every_answer(h, "g")
    assert len(h.log.records) == written
    # Other partitions are served as before.
    b = h.member("h")
    form_group(h, b)
    assert b.heartbeat() == ErrorCode.none
    assert [g.group_id for g in h.coordinator.list_groups()] == ["h"]


def test_a_partition_being_loaded_answers_load_in_progress_then_its_groups_are_back() -> None:
    h = Harness()
    a, b = h.member("g"), h.member("g")
    form_group(h, a, b)
    a.commit({("t", 0): 11, ("t", 1): 4})
    records = list(h.log.records)
    h.coordinator.unload(G_PARTITION)

    h.coordinator.begin_loading(G_PARTITION)
    assert h.coordinator.loading_in_progress
    for _, key, value in records[:1]:
        h.coordinator.replay(key, value)
    answers = every_answer(h, "g")
    assert set(answers.values()) == {ErrorCode.coordinator_load_in_progress}, answers
    assert h.coordinator.list_groups() == []
    h.run_for(3 * SESSION_MS)  # no timer runs for a group still loading

    for _, key, value in records[1:]:
        h.coordinator.replay(key, value)
    h.coordinator.finish_loading([G_PARTITION])
    assert not h.coordinator.loading_in_progress
    assert h.state("g") == "Stable"
    assert a.heartbeat() == b.heartbeat() == ErrorCode.none
    fetched = {
        tp: c.offset for tp, c in h.coordinator.offsets.fetch_offsets("g", None).offsets if c
    }
    assert fetched == {("t", 0): 11, ("t", 1): 4}
    # The members' sessions start at the load: one that does not come back is removed.
    h.run_for(SESSION_MS - 1)
    assert a.heartbeat() == ErrorCode.none
    h.run_for(SESSION_MS - 1)
    assert a.heartbeat() == ErrorCode.rebalance_in_progress
    assert b.heartbeat() == ErrorCode.unknown_member_id


def test_unloading_answers_waiting_joins_and_syncs_and_cancels_the_groups_timers() -> None:
    h = Harness()
    a, b = h.member("g"), h.member("g")
    form_group(h, a, b)
    # A rebalance: a waits in JoinGroup for b.
    waiting_join = a.send_join()
    assert not waiting_join.done and h.state("g") == "PreparingRebalance"
    # Another group of the partition, between JoinGroup and SyncGroup.
    c, d = h.member("c"), h.member("c")
    first, second = c.send_join(), d.send_join()
    c.joined(first)  # generation 1 formed with c alone; d's join starts generation 2
    first = c.send_join()
    c.joined(first)
    d.joined(second)
    assert h.state("c") == "CompletingRebalance" and c.generation == d.generation == 2
    follower = d if c.is_leader else c
    waiting_sync = follower.send_sync()
    assert not waiting_sync.done
    # A group of another partition keeps going.
    e = h.member("h")
    form_group(h, e)
    timers_before = len(h.coordinator.timers)

    assert h.coordinator.unload(G_PARTITION) == 2
    join_result, sync_result = waiting_join.value, waiting_sync.value
    assert isinstance(join_result, JoinResult) and isinstance(sync_result, SyncResult)
    assert join_result.error == ErrorCode.not_coordinator
    assert sync_result.error == ErrorCode.not_coordinator
    assert set(h.coordinator.groups) == {"h"}
    # Only the other group's session and the offset expiry are left.
    assert len(h.coordinator.timers) < timers_before
    assert ("session", "h", e.member_id) in h.coordinator.timers
    assert not any(
        isinstance(key, tuple) and key[1:2] in (("g",), ("c",))
        for key in h.coordinator.timers._entries
    )
    written = [r for r in h.log.records if r[0] == G_PARTITION]
    h.run_for(3 * SESSION_MS)
    # No timer of an unloaded group wrote anything; the other group's still run.
    assert [r for r in h.log.records if r[0] == G_PARTITION] == written
    assert e.heartbeat() == ErrorCode.unknown_member_id  # it did not heartbeat meanwhile


def test_a_group_unloaded_and_loaded_again_is_what_its_records_say() -> None:
    h = Harness()
    a = h.member("g")
    form_group(h, a)
    a.commit({("t", 0): 3})
    generation = a.generation
    h.coordinator.unload(G_PARTITION)
    h.coordinator.begin_loading(G_PARTITION)
    for partition, key, value in h.log.records:
        if partition == G_PARTITION:
            h.coordinator.replay(key, value)
    h.coordinator.finish_loading([G_PARTITION])
    assert a.heartbeat() == ErrorCode.none
    assert a.generation == generation
    assert a.commit({("t", 0): 4}) == {("t", 0): ErrorCode.none}


def test_write_errors_map_as_kafka_maps_them_for_group_members() -> None:
    assert write_error(ErrorCode.request_timed_out) == ErrorCode.coordinator_not_available
    assert write_error(ErrorCode.not_enough_replicas) == ErrorCode.coordinator_not_available
    assert (
        write_error(ErrorCode.not_enough_replicas_after_append)
        == ErrorCode.coordinator_not_available
    )
    assert write_error(ErrorCode.not_leader_or_follower) == ErrorCode.not_coordinator
    assert write_error(ErrorCode.none) == ErrorCode.none
