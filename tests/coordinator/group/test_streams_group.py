"""Streams groups (KIP-1071) in the group coordinator, on a manual clock: the topology checked
against the topics, task assignment (balanced, sticky, standbys), the two-phase revocation,
leaving, session expiry, offsets with member epochs, describing, listing, deleting, group kind
clashes and replay."""

from __future__ import annotations

from odradek.coordinator.group.messages import CommitRequest, OffsetCommit
from odradek.coordinator.group.share_group import ShareHeartbeatRequest
from odradek.coordinator.group.streams_group import (
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    MemberState,
    StreamsGroupSettings,
    StreamsHeartbeatRequest,
    StreamsHeartbeatResult,
    StreamsMember,
    Subtopology,
    TaskAssignment,
    TopicSpec,
    Topology,
    assign,
    configure,
    decode_current,
    decode_member,
    decode_topology,
    encode_current,
    encode_member,
    encode_topology,
)
from odradek.protocol.errors import ErrorCode

from .consumer_support import Catalog, Member, restarted
from .support import Harness

SESSION_MS = 45_000

# A word count: lines read from "in", words repartitioned, counted in a store.
WORD_COUNT = Topology(
    1,
    (
        Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-rep",)),
        Subtopology(
            "1",
            repartition_source_topics=(TopicSpec("app-rep"),),
            state_changelog_topics=(
                TopicSpec("app-changelog", configs=(("cleanup.policy", "compact"),)),
            ),
        ),
    ),
)
NO_TASKS = TaskAssignment()


def harness(**topics: int) -> tuple[Harness, Catalog]:
    h = Harness()
    catalog = Catalog(**topics)
    h.coordinator.consumer.topics = catalog
    return h, catalog


def ready(**extra: int) -> tuple[Harness, Catalog]:
    """A group whose topics all exist: "in" with 4 partitions, the internal ones made."""
    return harness(**{"in": 4, "app-rep": 4, "app-changelog": 4, **extra})


class App:
    """A Kafka Streams member as the coordinator sees it: it owns what it was last given and
    gives up revoked tasks on its next heartbeat."""

    def __init__(
        self,
        h: Harness,
        member_id: str,
        process: str | None = None,
        instance: str | None = None,
    ) -> None:
        self.h = h
        self.member_id = member_id
        self.process = process or member_id
        self.instance = instance
        # (subtopology, partition, changelog offset) of the tasks whose state it has on disk,
        # reported when it joins.
        self.offsets: tuple[tuple[str, int, int], ...] | None = None
        self.epoch = 0
        self.owned = NO_TASKS
        self.last: StreamsHeartbeatResult | None = None

    def beat(
        self, topology: Topology | None = None, report: bool = True, epoch: int | None = None
    ) -> StreamsHeartbeatResult:
        joining = self.epoch == 0
        result = self.h.coordinator.streams.heartbeat(
            StreamsHeartbeatRequest(
                "g",
                self.member_id,
                self.epoch if epoch is None else epoch,
                "client",
                "/127.0.0.1",
                rebalance_timeout_ms=60_000 if joining else -1,
                topology=(topology or WORD_COUNT) if joining else topology,
                owned=self.owned if (report or joining) else None,
                process_id=self.process if joining else None,
                instance_id=self.instance,
                task_offsets=self.offsets if joining else None,
            )
        )
        self.last = result
        if result.error == ErrorCode.none:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = result.assignment
        return result

    def leave(self, epoch: int = -1) -> StreamsHeartbeatResult:
        return self.h.coordinator.streams.heartbeat(
            StreamsHeartbeatRequest(
                "g", self.member_id, epoch, "client", "/127.0.0.1", instance_id=self.instance
            )
        )

    def active(self) -> set[tuple[str, int]]:
        return {(s, p) for s, ps in self.owned.active.items() for p in ps}

    def standby(self) -> set[tuple[str, int]]:
        return {(s, p) for s, ps in self.owned.standby.items() for p in ps}


def settle(*apps: App, rounds: int = 6) -> None:
    for _ in range(rounds):
        for app in apps:
            app.beat()


def every_task() -> set[tuple[str, int]]:
    return {(s, p) for s in "01" for p in range(4)}


def test_configure_derives_internal_topics_and_reports_what_is_missing() -> None:
    missing_source = configure(WORD_COUNT, {})
    assert [s.code for s in missing_source.statuses] == [MISSING_SOURCE_TOPICS]
    missing_internal = configure(WORD_COUNT, {"in": 3})
    assert [s.code for s in missing_internal.statuses] == [MISSING_INTERNAL_TOPICS]
    created = {t.name: t.partitions for t in missing_internal.missing_internal}
    assert created == {"app-rep": 3, "app-changelog": 3}
    done = configure(WORD_COUNT, {"in": 3, "app-rep": 3, "app-changelog": 3})
    assert done.ready and dict(done.tasks) == {"0": 3, "1": 3}


def test_a_missing_source_topic_assigns_nothing_until_it_exists() -> None:
    h, catalog = harness()
    app = App(h, "a")
    first = app.beat()
    assert first.error == ErrorCode.none and first.member_epoch == 1
    assert [s.code for s in first.statuses] == [MISSING_SOURCE_TOPICS]
    assert app.active() == set()
    assert h.coordinator.streams.describe("g").state == "NotReady"
    catalog.topics.update(Catalog(**{"in": 2}).topics)
    second = app.beat()
    assert [s.code for s in second.statuses] == [MISSING_INTERNAL_TOPICS]
    assert {t.name for t in second.creatable_topics} == {"app-rep", "app-changelog"}
    catalog.topics.update(Catalog(**{"app-rep": 2, "app-changelog": 2}).topics)
    third = app.beat()
    assert third.statuses == () and third.member_epoch == 3
    assert app.active() == {(s, p) for s in "01" for p in range(2)}
    assert h.coordinator.streams.describe("g").state == "Stable"


def test_the_assignor_is_balanced_sticky_and_places_standbys_elsewhere() -> None:
    tasks = {"0": 4, "1": 4}
    first = assign({"a": ("pa", NO_TASKS), "b": ("pb", NO_TASKS)}, tasks, 1)
    actives = [first[m].active for m in "ab"]
    assert sum(len(ps) for a in actives for ps in a.values()) == 8
    assert all(sum(len(ps) for ps in a.values()) == 4 for a in actives)
    for m, other in (("a", "b"), ("b", "a")):
        # Each task's standby is on the other process.
        assert first[m].standby == first[other].active
    grown = assign(
        {"a": ("pa", first["a"]), "b": ("pb", first["b"]), "c": ("pc", NO_TASKS)}, tasks, 0
    )
    sizes = sorted(sum(len(ps) for ps in grown[m].active.values()) for m in "abc")
    assert sizes == [2, 3, 3]
    for m in "ab":  # what a and b keep is what they had
        kept = {(s, p) for s, ps in grown[m].active.items() for p in ps}
        had = {(s, p) for s, ps in first[m].active.items() for p in ps}
        assert kept <= had
    assert assign({"a": ("p", NO_TASKS), "b": ("p", NO_TASKS)}, tasks, 1)["a"].standby == {}


def test_two_members_share_the_tasks_with_revocation_first() -> None:
    h, _ = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    assert a.active() == every_task()
    b.beat()
    assert b.epoch == 2 and b.active() == set()  # a still owns everything
    assert b.last is not None and b.last.assignment is not None
    # a is asked to give up half its tasks and stays at its epoch until it has.
    a.beat(report=False)
    member = h.coordinator.groups["g"].streams.members["a"]  # type: ignore[union-attr]
    assert member.state is MemberState.UNREVOKED_TASKS and a.epoch == 1
    assert len(a.active()) == 4
    assert b.beat(report=False).assignment is None  # nothing released yet
    a.beat()  # reports it no longer owns the revoked tasks
    assert a.epoch == 2
    b.beat()
    assert b.active() == every_task() - a.active() and len(b.active()) == 4
    assert h.coordinator.streams.describe("g").state == "Stable"


def test_leaving_gives_the_tasks_back() -> None:
    h, _ = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    settle(a, b)
    assert b.leave().error == ErrorCode.none
    a.beat()
    assert a.active() == every_task()
    assert a.leave().error == ErrorCode.none
    assert h.coordinator.streams.describe("g").state == "Empty"
    assert App(h, "z").beat(epoch=3).error == ErrorCode.unknown_member_id


def test_a_member_without_heartbeats_is_removed() -> None:
    h, _ = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    settle(a, b)
    for _ in range(3):
        h.run_for(SESSION_MS // 2)
        b.beat()
    streams = h.coordinator.groups["g"].streams
    assert streams is not None and set(streams.members) == {"b"}
    assert a.beat().error == ErrorCode.unknown_member_id
    settle(b)
    assert b.active() == every_task()


def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() -> None:
    h, _ = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    a.beat(report=False)
    for _ in range(5):
        h.run_for(20_000)
        b.beat()
    streams = h.coordinator.groups["g"].streams
    assert streams is not None and set(streams.members) == {"b"}
    settle(b)
    assert b.active() == every_task()


def test_epochs_are_checked() -> None:
    h, _ = ready()
    a = App(h, "a")
    a.beat()
    assert a.beat(epoch=5).error == ErrorCode.fenced_member_epoch
    assert App(h, "").beat().error == ErrorCode.invalid_request
    no_topology = h.coordinator.streams.heartbeat(
        StreamsHeartbeatRequest("g", "x", 0, "c", "/h", rebalance_timeout_ms=1, owned=NO_TASKS)
    )
    assert no_topology.error == ErrorCode.invalid_request


def test_a_member_with_another_topology_epoch_is_told_it_is_stale() -> None:
    h, _ = ready()
    App(h, "a").beat()
    newer = Topology(2, WORD_COUNT.subtopologies)
    result = App(h, "b").beat(newer)
    assert STALE_TOPOLOGY in [s.code for s in result.statuses]


def test_standby_replicas() -> None:
    h = Harness(streams=StreamsGroupSettings(num_standby_replicas=1))  # type: ignore[arg-type]
    h.coordinator.consumer.topics = Catalog(**{"in": 2, "app-rep": 2, "app-changelog": 2})
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    settle(a, b)
    assert a.active() | b.active() == {(s, p) for s in "01" for p in range(2)}
    # Only subtopology 1 has a store (a changelog topic): only its tasks get standbys.
    assert a.standby() == {t for t in b.active() if t[0] == "1"}
    assert b.standby() == {t for t in a.active() if t[0] == "1"}


def test_offsets_are_committed_with_the_member_epoch() -> None:
    h, _ = ready()
    a = App(h, "a")
    a.beat()

    def commit(member: str, epoch: int) -> ErrorCode:
        results = h.coordinator.offsets.commit_offsets(
            CommitRequest("g", epoch, member, None, (OffsetCommit("in", 0, 42),))
        )
        return results[("in", 0)]

    assert commit("a", a.epoch) == ErrorCode.none
    assert commit("a", a.epoch + 1) == ErrorCode.stale_member_epoch
    assert commit("b", 1) == ErrorCode.unknown_member_id
    assert commit("", -1) == ErrorCode.unknown_member_id  # the group is not empty
    fetched = h.coordinator.offsets.fetch_offsets("g", None)
    assert {tp: c.offset for tp, c in fetched.offsets if c is not None} == {("in", 0): 42}
    assert h.coordinator.consumer.check_fetch("g", "a", a.epoch) == ErrorCode.none
    assert h.coordinator.consumer.check_fetch("g", "a", 99) == ErrorCode.stale_member_epoch


def test_describe_list_and_delete() -> None:
    h, _ = ready()
    a = App(h, "a")
    a.beat()
    described = h.coordinator.streams.describe("g")
    assert described.error == ErrorCode.none and described.group_epoch == 1
    assert described.topology == WORD_COUNT
    (member,) = described.members
    assert member.member.process_id == "a" and member.target.active == a.owned.active
    assert h.coordinator.streams.describe("nope").error == ErrorCode.group_id_not_found
    listed = h.coordinator.list_groups(types=["streams"])
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("g", "streams", "Stable")]
    assert h.coordinator.list_groups(types=["consumer"]) == []
    assert h.coordinator.describe_group("g").error == ErrorCode.group_id_not_found
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.non_empty_group}
    a.leave()
    assert h.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    assert h.coordinator.list_groups() == []


def test_a_group_survives_a_restart_with_its_members_tasks_and_offsets() -> None:
    h, catalog = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    a.beat(report=False)  # a has tasks to revoke when the coordinator goes
    h.coordinator.offsets.commit_offsets(
        CommitRequest("g", a.epoch, "a", None, (OffsetCommit("in", 1, 7),))
    )
    before = h.coordinator.streams.describe("g")
    after = restarted(h, catalog)
    described = after.coordinator.streams.describe("g")
    assert described.error == ErrorCode.none
    assert (described.group_epoch, described.assignment_epoch) == (2, 2)
    assert described.topology == WORD_COUNT
    assert [(m.member, m.target) for m in described.members] == [
        (m.member, m.target) for m in before.members
    ]
    streams = after.coordinator.groups["g"].streams
    assert streams is not None and streams.members["a"].state is MemberState.UNREVOKED_TASKS
    # The members go on where they were: a gives up its revoked tasks, b gets them.
    a.h = b.h = after
    settle(a, b)
    assert a.active() | b.active() == every_task() and not a.active() & b.active()
    assert len(a.active()) == len(b.active()) == 4
    fetched = after.coordinator.offsets.fetch_offsets("g", None)
    assert {tp: c.offset for tp, c in fetched.offsets if c is not None} == {("in", 1): 7}
    a.leave()
    b.leave()
    assert after.coordinator.delete_groups(["g"]) == {"g": ErrorCode.none}
    gone = restarted(after, catalog)
    assert gone.coordinator.streams.describe("g").error == ErrorCode.group_id_not_found
    assert "g" not in gone.coordinator.groups


def test_the_records_round_trip() -> None:
    member = StreamsMember(
        "m",
        "client",
        "/10.0.0.1",
        "process",
        member_epoch=7,
        previous_member_epoch=5,
        state=MemberState.UNREVOKED_TASKS,
        instance_id="i",
        rack_id="r",
        rebalance_timeout_ms=1234,
        topology_epoch=3,
        user_endpoint=("host", 65000),
        client_tags=(("zone", "a"),),
        assigned=TaskAssignment({"0": frozenset({1, 2})}, {"1": frozenset({0})}),
        revoking=TaskAssignment({"0": frozenset({3})}),
    )
    restored = decode_current("m", encode_current(member), None)
    restored = decode_member("m", encode_member(member), restored)
    assert restored == member
    topology = Topology(
        4,
        (
            *WORD_COUNT.subtopologies,
            Subtopology(
                "2",
                source_topics=("x", "y"),
                source_topic_regex=("z.*",),
                copartition_groups=(((0, 1), ()),),
            ),
        ),
    )
    assert decode_topology(encode_topology(topology)) == topology


def test_group_kinds_do_not_mix() -> None:
    h, _ = ready(t=1)
    h.member().join()  # a classic group named "g"
    assert App(h, "a").beat().error == ErrorCode.group_id_not_found
    other, _ = ready(t=1)
    assert App(other, "a").beat().error == ErrorCode.none
    box = other.member().send_join()
    assert box.done and box.value.error == ErrorCode.inconsistent_group_protocol
    consumer = Member(other)
    assert consumer.heartbeat() == ErrorCode.group_id_not_found
    share = other.coordinator.share.heartbeat(
        ShareHeartbeatRequest("g", "s", 0, None, ("t",), "c", "/h")
    )
    assert share.error == ErrorCode.group_id_not_found


def test_an_empty_group_with_only_offsets_becomes_a_streams_group() -> None:
    h, _ = ready()
    h.coordinator.offsets.commit_offsets(
        CommitRequest("g", -1, "", None, (OffsetCommit("in", 0, 3),))
    )
    assert App(h, "a").beat().error == ErrorCode.none
    fetched = h.coordinator.offsets.fetch_offsets("g", None)
    assert {tp: c.offset for tp, c in fetched.offsets if c is not None} == {("in", 0): 3}


def test_max_size() -> None:
    h = Harness(streams=StreamsGroupSettings(max_size=1))  # type: ignore[arg-type]
    h.coordinator.consumer.topics = Catalog(**{"in": 1})
    App(h, "a").beat()
    assert App(h, "b").beat().error == ErrorCode.group_max_size_reached


def test_source_patterns_match_topics_as_they_appear() -> None:
    h, catalog = harness(**{"events-a": 2})
    patterned = Topology(1, (Subtopology("0", source_topic_regex=("events-.*",)),))
    app = App(h, "a")
    app.beat(patterned)
    assert app.active() == {("0", 0), ("0", 1)}
    catalog.topics.update(Catalog(**{"events-b": 3, "other": 5}).topics)
    app.beat()
    assert app.active() == {("0", p) for p in range(3)}
    assert App(h, "b").beat(Topology(1, (Subtopology("0", source_topic_regex=("(",)),))).error == (
        ErrorCode.invalid_request
    )


def test_copartitioned_repartition_topics_follow_their_source_topics() -> None:
    joined = Topology(
        1,
        (
            Subtopology(
                "0",
                source_topics=("left",),
                repartition_source_topics=(TopicSpec("app-right-rep"),),
                copartition_groups=(((0,), (0,)),),
            ),
        ),
    )
    configured = configure(joined, {"left": 6})
    assert {t.name: t.partitions for t in configured.missing_internal} == {"app-right-rep": 6}
    assert configure(joined, {"left": 6, "app-right-rep": 6}).tasks == {"0": 6}


def test_a_shutdown_request_reaches_every_member() -> None:
    h, _ = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    result = h.coordinator.streams.heartbeat(
        StreamsHeartbeatRequest(
            "g", "a", a.epoch, "client", "/127.0.0.1", shutdown_application=True
        )
    )
    assert SHUTDOWN_APPLICATION in [s.code for s in result.statuses]
    assert SHUTDOWN_APPLICATION in [s.code for s in b.beat().statuses]


def test_a_member_leaving_with_a_shutdown_request_tells_the_others() -> None:
    h, _ = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    left = h.coordinator.streams.heartbeat(
        StreamsHeartbeatRequest("g", "a", -1, "client", "/127.0.0.1", shutdown_application=True)
    )
    assert left.error == ErrorCode.none
    assert SHUTDOWN_APPLICATION in [s.code for s in b.beat().statuses]


def test_group_configs_override_the_broker_settings() -> None:
    h, _ = ready()
    own: dict[str, str] = {}
    h.coordinator.streams.group_configs = lambda group: own
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    settle(a, b)
    assert a.standby() == b.standby() == set()
    own.update({"streams.num.standby.replicas": "1", "streams.heartbeat.interval.ms": "700"})
    assert a.beat().heartbeat_interval_ms == 700
    settle(a, b)
    assert a.standby() | b.standby() == {("1", p) for p in range(4)}
    assert not a.standby() & a.active() and not b.standby() & b.active()
    own["streams.session.timeout.ms"] = "1000"
    a.beat()
    b.beat()
    h.run_for(1_500)
    streams = h.coordinator.groups["g"].streams
    assert streams is not None and streams.members == {}


def test_each_member_gets_tasks_of_every_subtopology() -> None:
    h, _ = ready()
    a, b = App(h, "a"), App(h, "b")
    a.beat()
    b.beat()
    settle(a, b)
    for app in (a, b):
        assert {s for s, _ in app.active()} == {"0", "1"}


# -- static membership (KIP-1071 as Kafka 4.4 serves it) ----------------------------------------


def static_pair(h: Harness) -> tuple[App, App]:
    a = App(h, "a", process="pa", instance="ia")
    b = App(h, "b", process="pb", instance="ib")
    a.beat()
    b.beat()
    settle(a, b)
    return a, b


def members(h: Harness) -> dict[str, StreamsMember]:
    streams = h.coordinator.groups["g"].streams
    assert streams is not None
    return streams.members


def test_a_static_member_that_leaves_for_now_comes_back_to_its_tasks_without_a_rebalance() -> None:
    h, _ = ready()
    a, b = static_pair(h)
    held, epoch = a.active(), h.coordinator.streams.describe("g").group_epoch
    assert len(held) == 4
    left = a.leave(epoch=-2)
    assert (left.error, left.member_epoch) == (ErrorCode.none, -2)
    assert members(h)["a"].member_epoch == -2 and members(h)["a"].assigned.active == a.owned.active
    settle(b)
    assert b.active() == every_task() - held  # a's tasks wait for its instance
    described = h.coordinator.streams.describe("g")
    assert (described.group_epoch, described.state) == (epoch, "Reconciling")
    # The instance restarts under a new member id (a restarted Kafka Streams gets one).
    again = App(h, "a2", process="pa", instance="ia")
    first = again.beat()
    assert first.error == ErrorCode.none and first.member_epoch == epoch
    assert again.active() == held
    assert set(members(h)) == {"a2", "b"}
    described = h.coordinator.streams.describe("g")
    assert (described.group_epoch, described.state) == (epoch, "Stable")
    settle(again, b)
    assert again.active() == held and b.active() == every_task() - held


def test_a_second_live_member_with_the_same_instance_id_is_refused() -> None:
    h, _ = ready()
    a, _b = static_pair(h)
    twin = App(h, "twin", process="px", instance="ia")
    assert twin.beat().error == ErrorCode.unreleased_instance_id
    # Heartbeats under the instance id from another member id are fenced.
    assert twin.beat(epoch=a.epoch).error == ErrorCode.fenced_instance_id
    assert twin.leave(epoch=-2).error == ErrorCode.fenced_instance_id
    assert App(h, "x", instance="unknown").beat(epoch=1).error == ErrorCode.unknown_member_id
    assert set(members(h)) == {"a", "b"}
    assert a.beat().error == ErrorCode.none


def test_a_static_member_that_does_not_come_back_is_removed_when_its_session_ends() -> None:
    h, _ = ready()
    a, b = static_pair(h)
    epoch = h.coordinator.streams.describe("g").group_epoch
    a.leave(epoch=-2)
    for _ in range(3):
        h.run_for(SESSION_MS // 2)
        b.beat()
    assert set(members(h)) == {"b"}
    assert h.coordinator.streams.describe("g").group_epoch == epoch + 1
    settle(b)
    assert b.active() == every_task()
    # The instance id is free again: a new instance joins as a new member.
    late = App(h, "a3", process="pa", instance="ia")
    assert late.beat().error == ErrorCode.none
    assert h.coordinator.streams.describe("g").group_epoch == epoch + 2


def test_a_static_member_leaving_for_good_gives_its_tasks_away() -> None:
    h, _ = ready()
    a, b = static_pair(h)
    epoch = h.coordinator.streams.describe("g").group_epoch
    assert a.leave(epoch=-1).error == ErrorCode.none
    assert set(members(h)) == {"b"}
    assert h.coordinator.streams.describe("g").group_epoch == epoch + 1
    settle(b)
    assert b.active() == every_task()


def test_tasks_a_static_member_was_giving_up_when_it_left_go_to_the_others() -> None:
    h, _ = ready()
    a = App(h, "a", process="pa", instance="ia")
    a.beat()
    b = App(h, "b", process="pb", instance="ib")
    b.beat()
    a.beat(report=False)  # asked to give up half, it has not yet
    assert members(h)["a"].state is MemberState.UNREVOKED_TASKS
    a.leave(epoch=-2)
    assert members(h)["a"].revoking == NO_TASKS
    settle(b)
    assert len(b.active()) == 4 and not b.active() & members_active(h, "a")
    again = App(h, "a2", process="pa", instance="ia")
    again.beat()
    settle(again, b)
    assert again.active() | b.active() == every_task() and not again.active() & b.active()


def members_active(h: Harness, member_id: str) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in members(h)[member_id].assigned.active.items() for p in ps}


def test_a_static_member_left_for_now_survives_a_coordinator_restart() -> None:
    h, catalog = ready()
    a, b = static_pair(h)
    held = a.active()
    a.leave(epoch=-2)
    after = restarted(h, catalog)
    kept = members(after)["a"]
    assert (kept.member_epoch, kept.instance_id) == (-2, "ia")
    b.h = after
    again = App(after, "a2", process="pa", instance="ia")
    assert again.beat().error == ErrorCode.none and again.active() == held
    # What the takeover wrote replays to the same group.
    again_after = restarted(after, catalog)
    assert set(members(again_after)) == {"a2", "b"}
    assert members_active(again_after, "a2") == held
    target = again_after.coordinator.streams.describe("g").members
    assert {m.member.member_id for m in target} == {"a2", "b"}
    assert all(m.target != NO_TASKS for m in target)


def test_no_warmup_tasks_are_placed_as_in_kafka_4_4() -> None:
    """Kafka 4.4 has group.streams.num.warmup.replicas (2) but its refinement step hands the
    target on unchanged: a stateful task moving to a new member moves at once, with no warm-up
    copy first. The heartbeat tells the members the recovery lag and the offset interval."""
    h, _ = ready()
    own: dict[str, str] = {}
    h.coordinator.streams.group_configs = lambda group: own
    a = App(h, "a")
    first = a.beat()
    assert (first.acceptable_recovery_lag, first.task_offset_interval_ms) == (10_000, 60_000)
    b = App(h, "b")
    b.beat()
    settle(a, b)
    assert b.active() and {s for s, _ in b.active()} >= {"1"}  # stateful tasks moved to b
    for app in (a, b):
        assert app.owned.warmup == {}
    streams = h.coordinator.groups["g"].streams
    assert streams is not None and all(t.warmup == {} for t in streams.target.values())
    own.update({"streams.acceptable.recovery.lag": "5", "streams.task.offset.interval.ms": "20000"})
    again = a.beat()
    assert (again.acceptable_recovery_lag, again.task_offset_interval_ms) == (5, 20_000)


def test_a_static_member_back_with_another_process_id_bumps_the_epoch_and_keeps_its_tasks() -> None:
    h, _ = ready()
    a, b = static_pair(h)
    held, epoch = a.active(), h.coordinator.streams.describe("g").group_epoch
    a.leave(epoch=-2)
    # A stateless application's process id is new at each start: a changed member, as Kafka's
    # hasEpochRelevantMemberConfigChanged says, so a new group epoch; the assignor is sticky.
    again = App(h, "a2", process="pa-new", instance="ia")
    again.beat()
    assert h.coordinator.streams.describe("g").group_epoch == epoch + 1
    settle(again, b)
    assert again.active() == held and b.active() == every_task() - held


def test_a_static_member_takes_its_place_back_in_a_full_group() -> None:
    h = Harness(streams=StreamsGroupSettings(max_size=2))  # type: ignore[arg-type]
    h.coordinator.consumer.topics = Catalog(**{"in": 4, "app-rep": 4, "app-changelog": 4})
    a, _b = static_pair(h)
    assert App(h, "c").beat().error == ErrorCode.group_max_size_reached
    a.leave(epoch=-2)
    assert App(h, "a2", process="pa", instance="ia").beat().error == ErrorCode.none


# -- placing tasks where their state is (Kafka 4.4's sticky assignor) ---------------------------


def test_a_task_whose_owner_is_gone_goes_to_a_member_with_its_state() -> None:
    had = TaskAssignment({"0": frozenset({0, 1})})
    members = {"b": ("pb", had), "y": ("py", NO_TASKS), "z": ("pz", NO_TASKS)}
    # "a", which ran 2 and 3, is gone; "z" is an instance restarted with their state on disk.
    without = assign(members, {"0": 4}, 0)
    assert without["y"].active == {"0": frozenset({2})}  # the least loaded, first by id
    placed = assign(members, {"0": 4}, 0, offsets={"z": {("0", 2): 100, ("0", 3): 50}})
    assert placed["b"].active == {"0": frozenset({0, 1})}  # owners keep theirs first
    assert placed["z"].active == {"0": frozenset({2})}  # its state, as far as its quota goes
    assert placed["y"].active == {"0": frozenset({3})}


def test_standby_holders_rank_before_members_that_only_report_offsets() -> None:
    standby = TaskAssignment(standby={"0": frozenset({0})})
    members = {"p": ("pp", standby), "q": ("pq", NO_TASKS), "r": ("pr", standby)}
    offsets = {"p": {("0", 0): 10}, "q": {("0", 0): 1000}, "r": {("0", 0): 20}}
    # The most caught-up standby first; a member with only offsets comes after every standby.
    assert assign(members, {"0": 1}, 0, offsets=offsets)["r"].active == {"0": frozenset({0})}
    no_standbys = {m: (p, NO_TASKS) for m, (p, _) in members.items()}
    assert assign(no_standbys, {"0": 1}, 0, offsets=offsets)["q"].active == {"0": frozenset({0})}
    # Standby copies go first to members with the task's state.
    placed = assign(members, {"0": 1}, 1, offsets=offsets)
    assert placed["p"].standby == {"0": frozenset({0})}


def test_a_restarted_instance_gets_back_the_tasks_whose_state_it_reports() -> None:
    h, _ = ready()
    a, b, c = App(h, "a"), App(h, "b"), App(h, "c")
    for app in (a, b, c):
        app.beat()
    settle(a, b, c)
    held = a.active()
    assert len(held) == 3
    a.leave()
    # Restarted (a new member id, as a dynamic member gets) with its stores on disk; it joins
    # before the others have taken its tasks.
    again = App(h, "z", process="a")
    again.offsets = tuple((s, p, 100) for s, p in sorted(held))
    again.beat()
    streams = h.coordinator.groups["g"].streams
    assert streams is not None
    target = streams.target["z"].active
    assert {(s, p) for s, ps in target.items() for p in ps} == held
