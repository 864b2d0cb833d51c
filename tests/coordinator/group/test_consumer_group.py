"""The KIP-848 consumer group protocol on the coordinator's state machine (no sockets, a
manual clock): member and group epochs, target assignments, incremental revocation, sessions,
static members, the conversion of an empty classic group, and offsets with member epochs."""

from __future__ import annotations

import uuid
from dataclasses import replace

from odradek.client.admin import decode_assignment
from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group.assignors import TopicInfo
from odradek.coordinator.group.consumer_group import ConsumerGroupSettings
from odradek.coordinator.group.messages import CommitRequest, ConsumerHeartbeatRequest, OffsetCommit
from odradek.protocol.errors import ErrorCode

from .consumer_support import Member, consumer_harness, restarted, settle
from .support import form_group


def test_a_first_member_gets_every_partition_at_once() -> None:
    h, catalog = consumer_harness(t=6)
    a = Member(h)
    assert a.heartbeat() is ErrorCode.none
    assert a.epoch == 1
    assert a.partitions(catalog.id("t")) == set(range(6))
    assert h.coordinator.consumer.describe("g").state == "Stable"


def test_partitions_move_only_after_their_owner_revoked_them() -> None:
    h, catalog = consumer_harness(t=6)
    t = catalog.id("t")
    a, b = Member(h), Member(h)
    a.heartbeat()
    assert b.heartbeat() is ErrorCode.none
    # b joins epoch 2, but every partition is still a's: b gets nothing yet.
    assert b.epoch == 2 and b.partitions(t) == set()
    assert h.coordinator.consumer.describe("g").state == "Reconciling"
    # a is told to give up three partitions and keeps epoch 1 until it has.
    a.heartbeat()
    assert a.epoch == 1 and len(a.partitions(t)) == 3
    b.heartbeat()
    assert b.partitions(t) == set()  # a has not yet said it let them go
    a.heartbeat()  # reports the three it still owns: revoked
    assert a.epoch == 2
    b.heartbeat()
    assert len(b.partitions(t)) == 3
    assert a.partitions(t) | b.partitions(t) == set(range(6))
    assert h.coordinator.consumer.describe("g").state == "Stable"


def test_three_members_share_six_and_a_leaver_s_share_moves() -> None:
    h, catalog = consumer_harness(t=6)
    t = catalog.id("t")
    members = [Member(h) for _ in range(3)]
    settle(*members)
    assert sorted(len(m.partitions(t)) for m in members) == [2, 2, 2]
    kept = {id(m): m.partitions(t) for m in members[:2]}
    assert members[2].leave() is ErrorCode.none
    settle(*members[:2])
    assert sorted(len(m.partitions(t)) for m in members[:2]) == [3, 3]
    for m in members[:2]:
        assert kept[id(m)] <= m.partitions(t)  # sticky: nobody lost what it had
    assert h.coordinator.consumer.describe("g").group_epoch == 4


def test_a_member_that_stops_heartbeating_is_fenced_after_its_session() -> None:
    h, catalog = consumer_harness(t=4)
    a, b = Member(h), Member(h)
    settle(a, b)
    h.run_for(44_000)
    a.heartbeat()
    h.run_for(2_000)  # b's 45 s have passed
    assert b.heartbeat() is ErrorCode.unknown_member_id
    settle(a)
    assert a.partitions(catalog.id("t")) == set(range(4))


def test_stale_and_future_epochs_are_fenced() -> None:
    h, _ = consumer_harness(t=2)
    a = Member(h)
    a.heartbeat()
    assert a.heartbeat(epoch=a.epoch + 1) is ErrorCode.fenced_member_epoch
    b = Member(h)
    b.heartbeat()
    settle(a, b)
    # The previous epoch is accepted while what it owns is part of its assignment (the answer
    # that moved it on may have been lost) ...
    assert a.heartbeat(epoch=a.epoch - 1) is ErrorCode.none
    # ... not with partitions it no longer has.
    a.owned |= b.owned
    assert a.heartbeat(epoch=a.epoch - 1) is ErrorCode.fenced_member_epoch
    assert Member(h, member_id="nobody").heartbeat(epoch=3) is ErrorCode.unknown_member_id


def test_bad_requests() -> None:
    h, _ = consumer_harness(t=1)
    coordinator = h.coordinator.consumer

    def ask(**fields: object) -> ErrorCode:
        base: dict[str, object] = {
            "group_id": "g",
            "member_id": "m",
            "member_epoch": 0,
            "rebalance_timeout_ms": 1000,
            "subscribed_topic_names": ("t",),
            "owned": (),
        }
        base.update(fields)
        return coordinator.heartbeat(ConsumerHeartbeatRequest(**base)).error  # type: ignore[arg-type]

    assert ask(server_assignor="sticky") is ErrorCode.unsupported_assignor
    assert ask(group_id="") is ErrorCode.invalid_request
    assert ask(rebalance_timeout_ms=-1) is ErrorCode.invalid_request
    assert ask(member_epoch=-7) is ErrorCode.invalid_request
    assert ask(member_epoch=5, group_id="none") is ErrorCode.group_id_not_found
    assert ask(server_assignor="range") is ErrorCode.none


def test_group_max_size() -> None:
    h, _ = consumer_harness(t=1)
    h.coordinator.config = h.config.__class__(
        offsets_partitions=4,
        consumer=h.config.consumer.__class__(max_size=1),
    )
    assert Member(h).heartbeat() is ErrorCode.none
    assert Member(h).heartbeat() is ErrorCode.group_max_size_reached


def test_range_assignor_on_request() -> None:
    h, catalog = consumer_harness(t=4)
    a, b = Member(h, assignor="range", member_id="a"), Member(h, assignor="range", member_id="b")
    settle(a, b)
    assert a.partitions(catalog.id("t")) == {0, 1}
    assert b.partitions(catalog.id("t")) == {2, 3}
    assert h.coordinator.consumer.describe("g").assignor_name == "range"


def test_the_group_survives_a_restart() -> None:
    h, catalog = consumer_harness(t=6)
    a, b = Member(h), Member(h)
    settle(a, b)
    before = h.coordinator.consumer.describe("g")
    after = restarted(h, catalog)
    a.h = b.h = after
    described = after.coordinator.consumer.describe("g")
    assert described == before
    assert a.heartbeat() is ErrorCode.none and b.heartbeat() is ErrorCode.none
    assert a.owned | b.owned == {(catalog.id("t"), p) for p in range(6)}


def test_records_are_kafka_s_key_types() -> None:
    h, _ = consumer_harness(t=2)
    Member(h).heartbeat()
    kinds = [crec.decode_key(key).kind for _, key, _ in h.log.records]
    assert kinds == [5, 4, 3, 7, 6, 8]


def test_static_member_leaves_for_now_and_comes_back_with_its_partitions() -> None:
    h, catalog = consumer_harness(t=4)
    a = Member(h, instance_id="i-a")
    b = Member(h, instance_id="i-b")
    settle(a, b)
    had = a.partitions(catalog.id("t"))
    assert a.leave(epoch=-2) is ErrorCode.none
    settle(b)
    assert len(b.partitions(catalog.id("t"))) == 2  # a's wait for it
    again = Member(h, instance_id="i-a")
    assert Member(h, instance_id="i-b").heartbeat() is ErrorCode.unreleased_instance_id
    assert again.heartbeat() is ErrorCode.none
    settle(again, b)
    assert again.partitions(catalog.id("t")) == had


def test_offset_commits_carry_the_member_epoch() -> None:
    h, _ = consumer_harness(t=2)
    a = Member(h)
    a.heartbeat()

    def commit(member_id: str, epoch: int) -> ErrorCode:
        result = h.coordinator.offsets.commit_offsets(
            CommitRequest("g", epoch, member_id, None, (OffsetCommit("t", 0, 5),))
        )
        return result[("t", 0)]

    assert commit(a.member_id, a.epoch) is ErrorCode.none
    assert commit(a.member_id, a.epoch - 1) is ErrorCode.stale_member_epoch
    assert commit("someone", a.epoch) is ErrorCode.unknown_member_id
    assert commit("", -1) is ErrorCode.unknown_member_id  # the group is not empty


def test_an_empty_classic_group_converts_and_back() -> None:
    h, catalog = consumer_harness(t=2)
    h.coordinator.consumer.topics = catalog
    h.machine.config = replace(
        h.machine.config, consumer=ConsumerGroupSettings(migration_policy="disabled")
    )
    classic = h.member()
    form_group(h, classic)
    classic.commit({("t", 0): 7})
    # Without online upgrades, a non-empty classic group refuses consumer-protocol members.
    assert Member(h).heartbeat() is ErrorCode.group_id_not_found
    classic.leave()
    a = Member(h)
    assert a.heartbeat() is ErrorCode.none
    fetched = h.coordinator.offsets.fetch_offsets("g", [("t", 0)]).offsets
    assert fetched[0][1] is not None and fetched[0][1].offset == 7
    listed = h.coordinator.list_groups()
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("g", "consumer", "Stable")]
    # A classic member joining while it has members becomes one of them (see below); once
    # empty, a classic member converts it back.
    a.leave()
    back = h.member()
    form_group(h, back)
    assert h.state() == "Stable"
    after = restarted(h, catalog)
    assert after.coordinator.groups["g"].consumer is None
    assert after.state() == "Stable"


def test_heartbeats_come_sooner_while_the_assignment_moves() -> None:
    h, _ = consumer_harness(t=4)
    a, b = Member(h), Member(h)
    a.heartbeat()
    # Stable, but just formed: others may be on their way.
    assert a.last is not None and a.last.heartbeat_interval_ms == 200
    h.run_for(5_000)
    a.heartbeat()
    assert a.last.heartbeat_interval_ms == 5_000
    b.heartbeat()
    assert b.last is not None and b.last.heartbeat_interval_ms == 200  # waits for a's
    a.heartbeat()
    assert a.last.heartbeat_interval_ms == 200  # must revoke
    settle(a, b)
    h.run_for(5_000)
    settle(a, b)
    assert a.last.heartbeat_interval_ms == b.last.heartbeat_interval_ms == 5_000


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h, catalog = consumer_harness(t=4)
    a, b = Member(h), Member(h)
    a.heartbeat()
    b.heartbeat()
    a.heartbeat(full=True)  # told to revoke two partitions; it never acknowledges
    assert h.coordinator.consumer.describe("g").state == "Reconciling"
    for _ in range(4):
        h.run_for(10_000)  # b keeps heartbeating; a goes on holding what it must give up
        b.heartbeat()
    assert a.heartbeat() is ErrorCode.unknown_member_id  # 30 s rebalance timeout passed
    settle(b)
    assert b.partitions(catalog.id("t")) == set(range(4))


def test_a_regex_subscription_follows_new_topics() -> None:
    h, catalog = consumer_harness(**{"orders-eu": 2, "billing": 1})
    coordinator = h.coordinator.consumer
    result = coordinator.heartbeat(
        ConsumerHeartbeatRequest(
            "g", "m", 0, rebalance_timeout_ms=1000, subscribed_topic_regex="orders-.*", owned=()
        )
    )
    assert result.error is ErrorCode.none and result.assignment is not None
    assert set(result.assignment) == {catalog.id("orders-eu")}
    catalog.topics["orders-us"] = TopicInfo(uuid.uuid4(), 3)
    again = coordinator.heartbeat(ConsumerHeartbeatRequest("g", "m", result.member_epoch, owned=()))
    assert again.member_epoch == result.member_epoch + 1
    assert again.assignment is not None and len(again.assignment[catalog.id("orders-us")]) == 3


def test_an_empty_consumer_group_is_deleted_with_its_offsets() -> None:
    h, catalog = consumer_harness(t=1)
    a = Member(h)
    a.heartbeat()
    h.coordinator.offsets.commit_offsets(
        CommitRequest("g", a.epoch, a.member_id, None, (OffsetCommit("t", 0, 3),))
    )
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.non_empty_group}
    a.leave()
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    after = restarted(h, catalog)
    assert "g" not in after.coordinator.groups
    assert after.coordinator.consumer.describe("g").error is ErrorCode.group_id_not_found


def test_added_partitions_are_assigned_at_the_next_heartbeat() -> None:
    h, catalog = consumer_harness(t=2)
    a, b = Member(h), Member(h)
    settle(a, b)
    epoch = h.coordinator.consumer.describe("g").group_epoch
    catalog.topics["t"] = TopicInfo(catalog.id("t"), 6)  # CreatePartitions
    settle(a, b)
    assert h.coordinator.consumer.describe("g").group_epoch == epoch + 1
    assert sorted(len(m.partitions(catalog.id("t"))) for m in (a, b)) == [3, 3]


def test_a_classic_member_joins_a_consumer_group_and_gets_partitions() -> None:
    # Kafka 4's online migration: classic JoinGroup/SyncGroup/Heartbeat into a KIP-848 group.
    h, catalog = consumer_harness(t=4)
    t = catalog.id("t")
    a = Member(h)
    a.heartbeat()
    classic = h.member()
    joined = classic.join()
    assert joined.protocol_name == "range" and joined.leader == ""  # it assigns nothing
    assert joined.generation_id == h.coordinator.consumer.describe("g").group_epoch
    # Every partition is still a's: nothing yet, and its heartbeat asks it to rejoin.
    assert decode_assignment(classic.sync().assignment) == ()
    assert classic.heartbeat() is ErrorCode.rebalance_in_progress
    settle(a)  # a lets two go
    classic.join()
    synced = classic.sync()
    assert (synced.error, synced.protocol_name) == (ErrorCode.none, "range")
    got = {p for _, p in decode_assignment(synced.assignment)}
    assert len(got) == 2 and got.isdisjoint(a.partitions(t))
    assert got | a.partitions(t) == set(range(4))
    assert classic.heartbeat() is ErrorCode.none
    assert classic.heartbeat(generation=classic.generation - 1) is ErrorCode.illegal_generation
    # Offsets commit with its generation, as a classic member's do.
    assert classic.commit({("t", min(got)): 5}) == {("t", min(got)): ErrorCode.none}
    # It leaves: its partitions go back to a.
    assert classic.leave() is ErrorCode.none
    settle(a)
    assert a.partitions(t) == set(range(4))
    assert classic.heartbeat() is ErrorCode.unknown_member_id


def test_a_classic_member_with_other_protocols_than_the_group_s_is_refused() -> None:
    h, _ = consumer_harness(t=2)
    Member(h).heartbeat()
    first = h.member(protocols=("range",))
    first.join()
    box = h.member(protocols=("roundrobin",)).send_join()
    assert getattr(box.value, "error", None) is ErrorCode.inconsistent_group_protocol


def test_a_consumer_member_upgrades_a_stable_classic_group_online() -> None:
    # Kafka 4's online upgrade (group.consumer.migration.policy bidirectional, the default):
    # the classic members keep their partitions as members of the consumer group, then give
    # up their share for the newcomer when they rejoin.
    h, catalog = consumer_harness(t=4)
    t = catalog.id("t")
    one, two = h.member(), h.member()
    form_group(h, one, two)  # the leader gives t-0 to one and t-1 to two
    assert h.state() == "Stable"

    a = Member(h)
    assert a.heartbeat() is ErrorCode.none
    assert h.coordinator.groups["g"].consumer is not None
    # one and two keep t-0 and t-1 at the group's epoch; a may only take what nobody holds.
    assert a.partitions(t) <= {2, 3}
    owned = {one.member_id: {0}, two.member_id: {1}}
    for _ in range(6):
        for c in (one, two):
            if c.heartbeat() is ErrorCode.rebalance_in_progress:
                c.join()
                owned[c.member_id] = {p for _, p in decode_assignment(c.sync().assignment)}
        a.heartbeat()
    shares = [owned[one.member_id], owned[two.member_id], a.partitions(t)]
    assert sorted(p for share in shares for p in share) == [0, 1, 2, 3]
    assert all(shares), shares
    assert one.heartbeat() is ErrorCode.none and two.heartbeat() is ErrorCode.none
    described = h.coordinator.consumer.describe("g")
    assert described.state == "Stable" and len(described.members) == 3
    # What was written replays to the same group.
    after = restarted(h, catalog)
    replayed = after.coordinator.consumer.describe("g")
    assert (replayed.group_epoch, len(replayed.members)) == (described.group_epoch, 3)
