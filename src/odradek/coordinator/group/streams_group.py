"""Streams groups (KIP-1071) in the group coordinator: StreamsGroupHeartbeat, StreamsGroupDescribe
and what OffsetCommit, OffsetFetch, ListGroups and DeleteGroups know of them.

A streams group lives in the coordinator's ``groups`` like a consumer group — the same
:class:`~odradek.coordinator.group.group.Group`, which keeps the committed offsets (Kafka Streams
commits with OffsetCommit and the member epoch, as a KIP-848 consumer) — with its KIP-1071 state
in ``Group.streams`` (:class:`StreamsGroup`).

A heartbeat works as Kafka's ``GroupMetadataManager.streamsGroupHeartbeat``:

- the first member brings the application's *topology* (subtopologies: source topics, repartition
  source and sink topics, state changelog topics, copartition groups); a member whose topology
  epoch differs from the group's is told STALE_TOPOLOGY;
- the topology is checked against the cluster's topics (:func:`configure`): a missing source
  topic is MISSING_SOURCE_TOPICS, source topics of a copartition group with different partition
  counts INCORRECTLY_PARTITIONED_TOPICS; missing internal topics (repartition and changelog
  topics, their partition counts derived as Kafka derives them) are MISSING_INTERNAL_TOPICS and
  handed to the handler, which creates them (Kafka's ``createStreamsInternalTopics``). Until the
  topology is configured no task is assigned (state ``NotReady``);
- a new member, a changed topology or changed partition counts bump the group epoch; a group
  epoch past the assignment epoch computes a new target assignment (:func:`assign`: every task
  of every subtopology active on exactly one member, balanced, sticky; ``num.standby.replicas``
  standby copies on other processes);
- each member moves towards its target as a KIP-848 member does: tasks it must give up are
  revoked first (it keeps its epoch, state ``UNREVOKED_TASKS``) and only once it reports that it
  no longer owns them does it take the new epoch; an active task still owned by another member
  is withheld (``UNRELEASED_TASKS``) until that member has given it up;
- a static member (an instance id, Kafka 4.4) leaving with epoch -2 stays in the group at that
  epoch with its tasks until its session ends; an instance joining with its instance id meanwhile
  takes its place, tasks and target under the new member id, with no new group epoch unless its
  process id, rack, client tags or topology epoch differ;
- warm-up tasks: as in Kafka 4.4, none are placed (its refinement step hands the target on
  unchanged); ``group.streams.num.warmup.replicas`` is kept for when they are, and the
  heartbeat tells the members the acceptable recovery lag and the task offset interval.

What is kept in ``__consumer_offsets``: the group's epoch, topology, members, target
assignment and each member's current assignment, as Kafka 4.3's streams group records
(:mod:`odradek.coordinator.group.streams_records`), written in the same batch as the step that
changed them and replayed on load, so a coordinator restart or move keeps the group and its
members (their sessions start again at load); DeleteGroups writes tombstones for all of them.
The topology's check against the topics is redone at load.

Timers (the coordinator's): a member missing ``group.streams.session.timeout.ms`` is removed, the
group epoch bumped and its tasks reassigned; one that has not revoked tasks within its rebalance
timeout is removed too. Runs on the broker's event loop thread, called through
:class:`~odradek.coordinator.group.coordinator.GroupCoordinator`.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from odradek.coordinator.group import streams_records as srec
from odradek.coordinator.group.group import Group, GroupState
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.coordinator.group.consumer_protocol import TopicCatalog
    from odradek.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

STREAMS_GROUP_TYPE = "streams"
STREAMS_PROTOCOL_TYPE = "streams"
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# Kafka's StreamsGroupHeartbeatResponse status codes.
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4


# Subtopology id -> partitions (task ids).
Tasks = Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class StreamsGroupSettings:
    """The broker's ``group.streams.*`` settings."""

    heartbeat_interval_ms: int = 5_000  # group.streams.heartbeat.interval.ms
    session_timeout_ms: int = 45_000  # group.streams.session.timeout.ms
    max_size: int = 2**31 - 1  # group.streams.max.size
    num_standby_replicas: int = 0  # group.streams.num.standby.replicas
    # group.streams.num.warmup.replicas: Kafka 4.4 has the setting and the refinement step
    # that would place warm-up tasks, but that step hands the target assignment on unchanged
    # (its AssignmentRefiner); so no warm-up task is assigned here either.
    num_warmup_replicas: int = 2
    acceptable_recovery_lag: int = 10_000  # group.streams.acceptable.recovery.lag
    task_offset_interval_ms: int = 60_000  # group.streams.task.offset.interval.ms


class StreamsGroupState(enum.Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_TASKS = "unrevoked_tasks"
    UNRELEASED_TASKS = "unreleased_tasks"


# -- topology ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """An internal topic as the topology asks for it (0 partitions: derived; 0 replication
    factor: the broker's default)."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicSpec, ...] = ()
    state_changelog_topics: tuple[TopicSpec, ...] = ()
    # Each group: indexes into source_topics and into repartition_source_topics.
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    # Patterns naming more source topics (a pattern-subscribed stream).
    source_topic_regex: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True, slots=True)
class Status:
    code: int
    detail: str


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """A topology checked against the cluster: tasks per subtopology when it can run, else why
    not; the internal topics to create either way."""

    tasks: Mapping[str, int]
    statuses: tuple[Status, ...] = ()
    missing_internal: tuple[TopicSpec, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.statuses


def configure(topology: Topology, partitions_of: Mapping[str, int]) -> ConfiguredTopology:
    """Kafka's ``InternalTopicManager.configureTopics``: the partition counts of the repartition
    topics (given, else the most partitions of the source topics of the subtopologies writing to
    them), of the changelog topics (the subtopology's task count), and what is missing."""
    subs = topology.subtopologies
    missing_sources = sorted({t for s in subs for t in s.source_topics if t not in partitions_of})
    if missing_sources:
        return ConfiguredTopology(
            {},
            (
                Status(
                    MISSING_SOURCE_TOPICS,
                    f"Source topics {', '.join(missing_sources)} are missing.",
                ),
            ),
        )
    repartition = _repartition_counts(subs, partitions_of)
    tasks: dict[str, int] = {}
    statuses: list[Status] = []
    missing: list[TopicSpec] = []
    for s in subs:
        tasks[s.subtopology_id] = _check_subtopology(
            s, repartition, partitions_of, statuses, missing
        )
    if missing:
        listed = ", ".join(sorted(t.name for t in missing))
        statuses.append(Status(MISSING_INTERNAL_TOPICS, f"Internal topics are missing: [{listed}]"))
    return ConfiguredTopology(tasks, tuple(statuses), tuple(missing))


def _repartition_counts(
    subs: Sequence[Subtopology], partitions_of: Mapping[str, int]
) -> dict[str, int]:
    """The partition count of each repartition topic that can be known: given, copartitioned
    with source topics, or derived from what feeds the subtopologies writing to it."""
    repartition: dict[str, int] = {}
    fixed: set[str] = set()
    for s in subs:
        for spec in s.repartition_source_topics:
            if spec.partitions > 0:
                repartition[spec.name] = spec.partitions
                fixed.add(spec.name)
    # A repartition topic in a copartition group with source topics takes their partition count.
    for s in subs:
        for sources, repartitions in s.copartition_groups:
            known = [
                partitions_of[s.source_topics[i]] for i in sources if 0 <= i < len(s.source_topics)
            ]
            for i in repartitions:
                if known and 0 <= i < len(s.repartition_source_topics):
                    name = s.repartition_source_topics[i].name
                    if name not in fixed:
                        repartition[name] = max(known)
                        fixed.add(name)
    # Derive the rest to a fixed point: a repartition topic takes the most partitions of what
    # feeds the subtopologies that write to it.
    for _ in range(len(subs) + 1):
        changed = False
        for s in subs:
            counts = [partitions_of[t] for t in s.source_topics]
            counts += [
                repartition[r.name] for r in s.repartition_source_topics if r.name in repartition
            ]
            if not counts:
                continue
            for sink in s.repartition_sink_topics:
                if sink not in fixed and repartition.get(sink, 0) < max(counts):
                    repartition[sink] = max(counts)
                    changed = True
        if not changed:
            break
    return repartition


def _check_subtopology(
    s: Subtopology,
    repartition: Mapping[str, int],
    partitions_of: Mapping[str, int],
    statuses: list[Status],
    missing: list[TopicSpec],
) -> int:
    """The subtopology's task count; what is wrong with its topics added to ``statuses``, its
    internal topics still to make to ``missing``."""
    counts = [partitions_of[t] for t in s.source_topics]
    for r in s.repartition_source_topics:
        if r.name not in repartition:
            statuses.append(
                Status(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"The number of partitions of repartition topic {r.name} is unknown.",
                )
            )
            continue
        counts.append(repartition[r.name])
        if partitions_of.get(r.name) is None:
            missing.append(replace(r, partitions=repartition[r.name]))
        elif partitions_of[r.name] != repartition[r.name]:
            statuses.append(
                Status(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Repartition topic {r.name} has {partitions_of[r.name]} partitions, "
                    f"expected {repartition[r.name]}.",
                )
            )
    for sources, _ in s.copartition_groups:
        names = [s.source_topics[i] for i in sources if 0 <= i < len(s.source_topics)]
        seen = {partitions_of[n] for n in names}
        if len(seen) > 1:
            statuses.append(
                Status(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Following topics do not have the same number of partitions: "
                    f"[{', '.join(sorted(names))}]",
                )
            )
    n = max(counts, default=0)
    for c in s.state_changelog_topics:
        if c.name not in partitions_of:
            missing.append(replace(c, partitions=n))
        elif partitions_of[c.name] != n:
            statuses.append(
                Status(
                    INCORRECTLY_PARTITIONED_TOPICS,
                    f"Changelog topic {c.name} has {partitions_of[c.name]} partitions, "
                    f"expected {n}.",
                )
            )
    return n


def resolve(topology: Topology, names: Iterable[str]) -> Topology:
    """The topology with the topics its source patterns match (of ``names``) added to each
    subtopology's source topics, after those named (so copartition indexes still hold)."""
    if not any(s.source_topic_regex for s in topology.subtopologies):
        return topology
    existing = sorted(names)
    subtopologies = []
    for s in topology.subtopologies:
        patterns = [re.compile(p) for p in s.source_topic_regex]
        matched = [
            n
            for n in existing
            if n not in s.source_topics and any(p.fullmatch(n) for p in patterns)
        ]
        subtopologies.append(replace(s, source_topics=(*s.source_topics, *matched)))
    return replace(topology, subtopologies=tuple(subtopologies))


def topology_topics(topology: Topology) -> set[str]:
    """Every topic the topology names."""
    names: set[str] = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(s.repartition_sink_topics)
        names.update(r.name for r in s.repartition_source_topics)
        names.update(c.name for c in s.state_changelog_topics)
    return names


def stateful_subtopologies(topology: Topology) -> list[str]:
    """The subtopologies with state stores (changelog topics): the only ones with standbys."""
    return [s.subtopology_id for s in topology.subtopologies if s.state_changelog_topics]


def input_topics(topology: Topology | None) -> set[str]:
    """The topics whose offsets the group commits (source and repartition source topics)."""
    if topology is None:
        return set()
    names: set[str] = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(r.name for r in s.repartition_source_topics)
    return names


# -- members and assignment --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskAssignment:
    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not any(_pairs(self.active) or _pairs(self.standby) or _pairs(self.warmup))


EMPTY = TaskAssignment()


def _pairs(tasks: Tasks) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in tasks.items() for p in ps}


def _tasks(pairs: Iterable[tuple[str, int]]) -> dict[str, frozenset[int]]:
    grouped: dict[str, set[int]] = {}
    for s, p in pairs:
        grouped.setdefault(s, set()).add(p)
    return {s: frozenset(ps) for s, ps in grouped.items()}


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    client_id: str
    client_host: str
    process_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    topology_epoch: int = 0
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    task_offsets: tuple[tuple[str, int, int], ...] = ()
    task_end_offsets: tuple[tuple[str, int, int], ...] = ()
    assigned: TaskAssignment = EMPTY
    # Tasks the member must confirm it gave up before it moves on (UNREVOKED_TASKS).
    revoking: TaskAssignment = EMPTY


@dataclass(slots=True)
class StreamsGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    topology: Topology | None = None
    # The topology with its source patterns resolved against the topics last seen.
    resolved: Topology | None = None
    configured: ConfiguredTopology | None = None
    # The partition counts of the topology's topics the group epoch was computed with.
    topics_seen: dict[str, int] = field(default_factory=dict)
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, TaskAssignment] = field(default_factory=dict)
    endpoint_epoch: int = 0
    # The standby replicas per stateful task the target assignment was made with.
    num_standby_replicas: int = 0
    # The member that asked the application to shut down (KIP-1071's SHUTDOWN_APPLICATION).
    shutdown_requested_by: str | None = None

    @property
    def state(self) -> StreamsGroupState:
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.configured is None or not self.configured.ready:
            return StreamsGroupState.NOT_READY
        if self.assignment_epoch != self.epoch:
            return StreamsGroupState.ASSIGNING
        if any(
            m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
        ):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE


def assign(
    members: Mapping[str, tuple[str, TaskAssignment]],
    tasks: Mapping[str, int],
    num_standby: int,
    stateful: Iterable[str] | None = None,
    offsets: Mapping[str, Mapping[tuple[str, int], int]] | None = None,
) -> dict[str, TaskAssignment]:
    """The target assignment of Kafka 4.4's sticky task assignor, as far as it goes here:
    ``members`` is member id -> (process id, what it holds now); ``offsets`` the changelog
    offsets each member last reported for the tasks whose state it has on disk. Every task is
    active on exactly one member; active counts differ by at most one; a member keeps what it
    had as far as the balance allows; a task whose owner cannot keep it goes first to a member
    that has its state (:func:`_state_holders`); each task gets up to ``num_standby`` standby
    copies on processes other than its active one's (and each other's), preferring those that
    have its state — only tasks of the ``stateful`` subtopologies (those with state stores;
    None: all) get standbys, as Kafka's."""
    if not members:
        return {}
    ids = sorted(members)
    every = sorted(((s, p) for s, n in tasks.items() for p in range(n)), key=_spread)
    holders = _state_holders(members, offsets or {})
    active = _place_active(ids, members, every, holders)
    standby: dict[str, set[tuple[str, int]]] = {m: set() for m in ids}
    if num_standby > 0:
        with_state = set(tasks if stateful is None else stateful)
        owner = {t: m for m, ts in active.items() for t in ts}
        process = {m: members[m][0] for m in ids}
        for t in every:
            if t[0] in with_state:
                _place_standbys(t, num_standby, ids, process, owner, holders, active, standby)
    return {m: TaskAssignment(_tasks(active[m]), _tasks(standby[m])) for m in ids}


def _spread(task: tuple[str, int]) -> tuple[int, str]:
    # Partition-major order: what a member keeps or gets spreads over the subtopologies
    # (stateless and stateful alike) rather than taking one subtopology whole.
    return task[1], task[0]


def _state_holders(
    members: Mapping[str, tuple[str, TaskAssignment]],
    offsets: Mapping[str, Mapping[tuple[str, int], int]],
) -> dict[tuple[str, int], list[str]]:
    """Kafka 4.4's standby candidates of each task, best first: the members holding it as a
    standby or warm-up task, then those that only report offsets for it (a restarted instance
    is a new member with nothing assigned, but its state is still on disk); the most caught-up
    first within each."""
    ranked: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for m, (_, held) in members.items():
        copies = _pairs(held.standby) | _pairs(held.warmup)
        reported = offsets.get(m, {})
        for t in copies:
            ranked.setdefault(t, []).append((0, -reported.get(t, 0), m))
        for t, offset in reported.items():
            if t not in copies:
                ranked.setdefault(t, []).append((1, -offset, m))
    return {t: [m for *_, m in sorted(found)] for t, found in ranked.items()}


def _place_active(
    ids: Sequence[str],
    members: Mapping[str, tuple[str, TaskAssignment]],
    every: Sequence[tuple[str, int]],
    holders: Mapping[tuple[str, int], Sequence[str]],
) -> dict[str, list[tuple[str, int]]]:
    """Kafka's three passes: each task to its previous owner, else to the least loaded member
    with its state, while they have room (the floor of the quota, then one more while members
    may still take an extra task); what is left to the least loaded member."""
    base, extra = divmod(len(every), len(ids))
    active: dict[str, list[tuple[str, int]]] = {m: [] for m in ids}
    owner: dict[tuple[str, int], str] = {}
    extras_left = extra

    def take(m: str, t: tuple[str, int]) -> None:
        nonlocal extras_left
        if len(active[m]) == base and extras_left > 0:
            extras_left -= 1
        elif len(active[m]) >= base:
            return
        active[m].append(t)
        owner[t] = m

    valid = set(every)
    for m in ids:
        for t in sorted(_pairs(members[m][1].active) & valid, key=_spread):
            if t not in owner:
                take(m, t)
    for t in every:
        candidates = holders.get(t, ())
        if t not in owner and candidates:
            # The first of the least loaded (min keeps the first of equals).
            take(min(candidates, key=lambda x: len(active[x])), t)
    for t in every:
        if t not in owner:
            m = min(ids, key=lambda x: (len(active[x]), x))
            active[m].append(t)
            owner[t] = m
    return active


def _place_standbys(
    t: tuple[str, int],
    num_standby: int,
    ids: Sequence[str],
    process: Mapping[str, str],
    owner: Mapping[tuple[str, int], str],
    holders: Mapping[tuple[str, int], Sequence[str]],
    active: Mapping[str, list[tuple[str, int]]],
    standby: dict[str, set[tuple[str, int]]],
) -> None:
    """Up to ``num_standby`` standby copies of ``t`` on processes that run no copy of it yet:
    the least loaded member with its state first, else the least loaded member."""
    ranked = holders.get(t, ())
    used = {process[owner[t]]}
    for _ in range(num_standby):
        candidates = [m for m in ids if process[m] not in used]
        if not candidates:
            return
        m = min(
            candidates,
            key=lambda x: (
                x not in ranked,
                len(standby[x]) + len(active[x]),
                ranked.index(x) if x in ranked else 0,
                x,
            ),
        )
        standby[m].add(t)
        used.add(process[m])


def _minus(a: Tasks, b: Tasks) -> dict[str, frozenset[int]]:
    return _tasks(_pairs(a) - _pairs(b))


def _and(a: Tasks, b: Tasks) -> dict[str, frozenset[int]]:
    return _tasks(_pairs(a) & _pairs(b))


def reconcile(
    member: StreamsMember,
    target_epoch: int,
    target: TaskAssignment,
    owned: TaskAssignment | None,
    active_elsewhere: set[tuple[str, int]],
) -> StreamsMember:
    """One step of Kafka's streams ``CurrentAssignmentBuilder``: the member as it is after
    this heartbeat, given the target of ``target_epoch``, the tasks it reports owning (None: not
    reported) and the active tasks other members still hold."""
    if member.state is MemberState.UNREVOKED_TASKS:
        gone = owned is not None and not (
            _pairs(owned.active) & _pairs(member.revoking.active)
            or _pairs(owned.standby) & _pairs(member.revoking.standby)
            or _pairs(owned.warmup) & _pairs(member.revoking.warmup)
        )
        if not gone:
            return member
    elif member.state is MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    kept = TaskAssignment(
        _and(member.assigned.active, target.active),
        _and(member.assigned.standby, target.standby),
        _and(member.assigned.warmup, target.warmup),
    )
    revoke = TaskAssignment(
        _minus(member.assigned.active, target.active),
        _minus(member.assigned.standby, target.standby),
        _minus(member.assigned.warmup, target.warmup),
    )
    if not revoke.is_empty():
        return replace(member, state=MemberState.UNREVOKED_TASKS, assigned=kept, revoking=revoke)
    wanted = _pairs(target.active)
    given = {t for t in wanted if t not in active_elsewhere or t in _pairs(member.assigned.active)}
    state = MemberState.STABLE if given == wanted else MemberState.UNRELEASED_TASKS
    previous = (
        member.member_epoch
        if member.member_epoch != target_epoch
        else (member.previous_member_epoch)
    )
    return replace(
        member,
        state=state,
        member_epoch=target_epoch,
        previous_member_epoch=previous,
        assigned=TaskAssignment(_tasks(given), dict(target.standby), dict(target.warmup)),
        revoking=EMPTY,
    )


# -- requests and answers ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    # What the member owns (None: unchanged since its last heartbeat).
    owned: TaskAssignment | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: tuple[tuple[str, int, int], ...] | None = None
    task_end_offsets: tuple[tuple[str, int, int], ...] | None = None
    shutdown_application: bool = False


@dataclass(frozen=True, slots=True)
class EndpointTasks:
    """The partitions (of the source topics) a member's endpoint serves, for interactive
    queries."""

    endpoint: tuple[str, int]
    active: tuple[tuple[str, tuple[int, ...]], ...]
    standby: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class StreamsHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    acceptable_recovery_lag: int = 0
    task_offset_interval_ms: int = 0
    statuses: tuple[Status, ...] = ()
    # The member's tasks when they changed (None: unchanged).
    assignment: TaskAssignment | None = None
    endpoint_information_epoch: int = 0
    endpoints: tuple[EndpointTasks, ...] | None = None
    # Internal topics the broker should create (the handler does, if the principal may).
    creatable_topics: tuple[TopicSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedStreamsMember:
    member: StreamsMember
    target: TaskAssignment


@dataclass(frozen=True, slots=True)
class StreamsGroupDescription:
    error: ErrorCode
    group_id: str
    message: str | None = None
    state: str = StreamsGroupState.DEAD.value
    group_epoch: int = -1
    assignment_epoch: int = -1
    topology: Topology | None = None
    members: tuple[DescribedStreamsMember, ...] = ()


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- records -----------------------------------------------------------------------------------


def _listed(tasks: Tasks) -> srec.TaskList:
    return tuple((s, tuple(sorted(ps))) for s, ps in sorted(tasks.items()) if ps)


def _unlisted(listed: srec.TaskList) -> dict[str, frozenset[int]]:
    return {s: frozenset(ps) for s, ps in listed if ps}


def _topic_info(w: srec.Writer, t: TopicSpec) -> None:
    w.compact_string(t.name)
    w.int32(t.partitions)
    w.int16(t.replication_factor)
    w.pairs(t.configs)
    w.no_tags()


def _read_topic_info(r: srec.Reader) -> TopicSpec:
    spec = TopicSpec(r.required_text(), r.int32(), r.int16(), r.pairs())
    r.skip_tags()
    return spec


def encode_metadata(epoch: int) -> bytes:
    # Kafka's tagged fields (the validated topology epoch, the last assignment configs) are
    # left out: a reader takes their defaults (not validated, none).
    w = srec.Writer()
    w.int32(epoch)
    w.int64(0)
    return w.done()


def encode_topology(topology: Topology) -> bytes:
    w = srec.Writer()
    w.int32(topology.epoch)
    w.uvarint(len(topology.subtopologies) + 1)
    for s in topology.subtopologies:
        w.compact_string(s.subtopology_id)
        w.strings(s.source_topics)
        w.strings(s.source_topic_regex)
        w.uvarint(len(s.state_changelog_topics) + 1)
        for t in s.state_changelog_topics:
            _topic_info(w, t)
        w.strings(s.repartition_sink_topics)
        w.uvarint(len(s.repartition_source_topics) + 1)
        for t in s.repartition_source_topics:
            _topic_info(w, t)
        w.uvarint(len(s.copartition_groups) + 1)
        for sources, repartitions in s.copartition_groups:
            w.int16s(sources)
            w.int16s(())
            w.int16s(repartitions)
            w.no_tags()
        w.no_tags()
    return w.done()


def decode_topology(data: bytes) -> Topology:
    r = srec.Reader(data)
    epoch = r.int32()
    subtopologies = []
    for _ in range(r.count()):
        subtopology_id = r.required_text()
        sources = r.strings()
        regex = r.strings()
        changelogs = tuple(_read_topic_info(r) for _ in range(r.count()))
        sinks = r.strings()
        repartitions = tuple(_read_topic_info(r) for _ in range(r.count()))
        groups = []
        for _ in range(r.count()):
            group_sources = r.int16s()
            r.int16s()
            group_repartitions = r.int16s()
            r.skip_tags()
            groups.append((group_sources, group_repartitions))
        r.skip_tags()
        subtopologies.append(
            Subtopology(
                subtopology_id, sources, sinks, repartitions, changelogs, tuple(groups), regex
            )
        )
    return Topology(epoch, tuple(subtopologies))


def encode_member(m: StreamsMember) -> bytes:
    w = srec.Writer()
    w.compact_string(m.instance_id)
    w.compact_string(m.rack_id)
    w.compact_string(m.client_id)
    w.compact_string(m.client_host)
    w.int32(m.rebalance_timeout_ms)
    w.int32(m.topology_epoch)
    w.compact_string(m.process_id)
    if m.user_endpoint is None:
        w.int8(-1)
    else:
        w.int8(1)
        w.compact_string(m.user_endpoint[0])
        w.int16(m.user_endpoint[1] - 0x10000 if m.user_endpoint[1] > 0x7FFF else m.user_endpoint[1])
        w.no_tags()
    w.pairs(m.client_tags)
    return w.done()


def decode_member(member_id: str, data: bytes, into: StreamsMember | None) -> StreamsMember:
    r = srec.Reader(data)
    instance_id = r.compact_string()
    rack_id = r.compact_string()
    client_id, client_host = r.required_text(), r.required_text()
    rebalance_timeout_ms, topology_epoch = r.int32(), r.int32()
    process_id = r.required_text()
    endpoint = None
    if r.int8() >= 0:
        endpoint = (r.required_text(), r.uint16())
        r.skip_tags()
    tags = r.pairs()
    base = into or StreamsMember(member_id, client_id, client_host, process_id)
    return replace(
        base,
        client_id=client_id,
        client_host=client_host,
        process_id=process_id,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        topology_epoch=topology_epoch,
        user_endpoint=endpoint,
        client_tags=tags,
    )


def encode_target_epoch(epoch: int) -> bytes:
    # The assignment timestamp is a tagged field in Kafka 4.3, left out (it reads as 0).
    w = srec.Writer()
    w.int32(epoch)
    return w.done()


def encode_assignment(a: TaskAssignment) -> bytes:
    w = srec.Writer()
    for tasks in (a.active, a.standby, a.warmup):
        w.tasks(_listed(tasks))
    return w.done()


def decode_assignment(data: bytes) -> TaskAssignment:
    r = srec.Reader(data)
    return TaskAssignment(*(_unlisted(r.tasks()) for _ in range(3)))


_STATE_CODES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_TASKS: 1,
    MemberState.UNRELEASED_TASKS: 2,
}


def encode_current(m: StreamsMember) -> bytes:
    w = srec.Writer()
    w.int32(m.member_epoch)
    w.int32(m.previous_member_epoch)
    w.int8(_STATE_CODES[m.state])
    for a in (m.assigned, m.revoking):
        for tasks in (a.active, a.standby, a.warmup):
            w.tasks(_listed(tasks))
    return w.done()


def decode_current(member_id: str, data: bytes, into: StreamsMember | None) -> StreamsMember:
    r = srec.Reader(data)
    epoch, previous = r.int32(), r.int32()
    code = r.int8()
    state = next((s for s, c in _STATE_CODES.items() if c == code), MemberState.STABLE)
    assigned = TaskAssignment(*(_unlisted(r.tasks()) for _ in range(3)))
    revoking = TaskAssignment(*(_unlisted(r.tasks()) for _ in range(3)))
    base = into or StreamsMember(member_id, "", "", "")
    return replace(
        base,
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned=assigned,
        revoking=revoking,
    )


@dataclass(frozen=True, slots=True)
class _Before:
    """What a group was before an operation, to write only what the operation changed."""

    epoch: int
    assignment_epoch: int
    topology: Topology | None
    members: dict[str, StreamsMember]
    target: dict[str, TaskAssignment]


def _member_fields(m: StreamsMember) -> tuple[object, ...]:
    return (
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.rebalance_timeout_ms,
        m.topology_epoch,
        m.process_id,
        m.user_endpoint,
        m.client_tags,
    )


def _current_fields(m: StreamsMember) -> tuple[object, ...]:
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned, m.revoking)


# -- the operations ----------------------------------------------------------------------------


class StreamsGroups:
    """The streams-group operations of one :class:`GroupCoordinator` (see the module doc)."""

    def __init__(self, coordinator: GroupCoordinator, settings: StreamsGroupSettings) -> None:
        self.coordinator = coordinator
        self.settings = settings
        # A group's own configs (streams.*: group configs, read by the broker before a
        # heartbeat), overriding ``settings``; none without a broker.
        self.group_configs: Callable[[str], Mapping[str, str]] = lambda _: {}

    def settings_of(self, group_id: str) -> StreamsGroupSettings:
        own = self.group_configs(group_id)

        def value(name: str, default: int) -> int:
            try:
                return int(own[name])
            except (KeyError, ValueError):
                return default

        s = self.settings
        return replace(
            s,
            heartbeat_interval_ms=value("streams.heartbeat.interval.ms", s.heartbeat_interval_ms),
            session_timeout_ms=value("streams.session.timeout.ms", s.session_timeout_ms),
            num_standby_replicas=value("streams.num.standby.replicas", s.num_standby_replicas),
            num_warmup_replicas=value("streams.num.warmup.replicas", s.num_warmup_replicas),
            acceptable_recovery_lag=value(
                "streams.acceptable.recovery.lag", s.acceptable_recovery_lag
            ),
            task_offset_interval_ms=value(
                "streams.task.offset.interval.ms", s.task_offset_interval_ms
            ),
        )

    @property
    def topics(self) -> TopicCatalog:
        return self.coordinator.consumer.topics

    # -- loading -------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        decoded = srec.decode_key(key)
        groups = self.coordinator.groups
        group = groups.get(decoded.group)
        if value is None:
            sg = None if group is None else group.streams
            if sg is None:
                return
            if decoded.kind == srec.METADATA:
                assert group is not None
                group.streams = None
            elif decoded.kind == srec.TOPOLOGY:
                sg.topology = None
            elif decoded.kind == srec.TARGET_ASSIGNMENT_MEMBER:
                sg.target.pop(decoded.member_id or "", None)
            elif decoded.kind in (srec.MEMBER_METADATA, srec.CURRENT_MEMBER_ASSIGNMENT):
                sg.members.pop(decoded.member_id or "", None)
            return
        if group is None:
            group = groups[decoded.group] = Group(decoded.group, self.coordinator.clock.time_ms())
        if group.streams is None:
            group.streams = StreamsGroup(decoded.group)
        sg = group.streams
        member_id = decoded.member_id or ""
        if decoded.kind == srec.METADATA:
            sg.epoch = srec.Reader(value).int32()
        elif decoded.kind == srec.TOPOLOGY:
            sg.topology = decode_topology(value)
        elif decoded.kind == srec.TARGET_ASSIGNMENT_METADATA:
            sg.assignment_epoch = srec.Reader(value).int32()
        elif decoded.kind == srec.TARGET_ASSIGNMENT_MEMBER:
            sg.target[member_id] = decode_assignment(value)
        elif decoded.kind == srec.MEMBER_METADATA:
            sg.members[member_id] = decode_member(member_id, value, sg.members.get(member_id))
        else:
            sg.members[member_id] = decode_current(member_id, value, sg.members.get(member_id))

    def start_sessions(self, group: Group) -> None:
        """After loading: the members get their sessions again, and the topology is checked
        against the topics as they are now."""
        sg = group.streams
        if sg is None:
            return
        if sg.topology is not None:
            sg.resolved = resolve(sg.topology, self.topics.topic_names())
            sg.topics_seen = self._partitions_of(sg.resolved)
            sg.configured = configure(sg.resolved, sg.topics_seen)
        sg.num_standby_replicas = self.settings_of(sg.group_id).num_standby_replicas
        for member_id in sg.members:
            self._schedule_session(sg.group_id, member_id)

    def _before(self, sg: StreamsGroup) -> _Before:
        return _Before(
            sg.epoch, sg.assignment_epoch, sg.topology, dict(sg.members), dict(sg.target)
        )

    def _persist(self, sg: StreamsGroup, before: _Before) -> None:
        """Write what changed since ``before``, in Kafka's order: the group, its topology, the
        members, the target assignment, the current assignments."""
        group_id = sg.group_id
        records: list[tuple[bytes, bytes | None]] = []

        def key(kind: int, member_id: str | None = None) -> bytes:
            return srec.encode_key(srec.StreamsKey(kind, group_id, member_id))

        if sg.epoch != before.epoch:
            records.append((key(srec.METADATA), encode_metadata(sg.epoch)))
        if sg.topology != before.topology and sg.topology is not None:
            records.append((key(srec.TOPOLOGY), encode_topology(sg.topology)))
        for member_id in before.members:
            if member_id not in sg.members:
                records.append((key(srec.CURRENT_MEMBER_ASSIGNMENT, member_id), None))
                records.append((key(srec.TARGET_ASSIGNMENT_MEMBER, member_id), None))
                records.append((key(srec.MEMBER_METADATA, member_id), None))
        for member_id, m in sg.members.items():
            old_member = before.members.get(member_id)
            if old_member is None or _member_fields(old_member) != _member_fields(m):
                records.append((key(srec.MEMBER_METADATA, member_id), encode_member(m)))
        # A target changes with a new assignment epoch, or moves to the member id of a static
        # member that took another's place.
        for member_id, a in sg.target.items():
            if before.target.get(member_id) != a:
                records.append(
                    (key(srec.TARGET_ASSIGNMENT_MEMBER, member_id), encode_assignment(a))
                )
        if sg.assignment_epoch != before.assignment_epoch:
            records.append(
                (
                    key(srec.TARGET_ASSIGNMENT_METADATA),
                    encode_target_epoch(sg.assignment_epoch),
                )
            )
        for member_id, m in sg.members.items():
            old_member = before.members.get(member_id)
            if old_member is None or _current_fields(old_member) != _current_fields(m):
                records.append((key(srec.CURRENT_MEMBER_ASSIGNMENT, member_id), encode_current(m)))
        self.coordinator.write(group_id, records)

    # -- StreamsGroupHeartbeat -----------------------------------------------------------------

    def heartbeat(self, request: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        status = self.coordinator.status(request.group_id)
        if status is not ErrorCode.none:
            return StreamsHeartbeatResult(status)
        try:
            _validate(request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except _Refused as e:
            return StreamsHeartbeatResult(e.code, e.message, member_id=request.member_id)

    def _group_for(self, request: StreamsHeartbeatRequest) -> Group:
        coordinator = self.coordinator
        if request.group_id in coordinator.share.groups:
            raise _Refused(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a streams group."
            )
        group = coordinator.groups.get(request.group_id)
        if group is not None and group.streams is not None:
            return group
        if request.member_epoch != JOIN_EPOCH:
            raise _Refused(
                ErrorCode.group_id_not_found, f"Streams group {request.group_id} not found."
            )
        if group is None:
            group = Group(request.group_id, coordinator.clock.time_ms())
        elif not (
            group.consumer is None
            and group.is_in(GroupState.EMPTY)
            and not group.members
            and not group.pending_members
        ):
            raise _Refused(
                ErrorCode.group_id_not_found, f"Group {request.group_id} is not a streams group."
            )
        # A new group, or an empty classic one (its committed offsets only): it becomes a
        # streams group once the heartbeat's records are written.
        group.streams = StreamsGroup(request.group_id)
        coordinator.groups[request.group_id] = group
        return group

    def _heartbeat(self, request: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        group = self._group_for(request)
        sg = group.streams
        assert sg is not None
        snapshot = self._before(sg)
        member = self._admitted(sg, request)
        bump = False
        joining = request.member_epoch == JOIN_EPOCH
        if member is None:
            member = StreamsMember(
                request.member_id,
                request.client_id,
                request.client_host,
                request.process_id or "",
            )
            bump = True
        updated = _updated(member, request)
        if (
            updated.process_id != member.process_id
            or updated.rack_id != member.rack_id
            or updated.client_tags != member.client_tags
            or updated.topology_epoch != member.topology_epoch
        ):
            bump = True
        if updated.user_endpoint != member.user_endpoint:
            sg.endpoint_epoch += 1
        member = updated
        statuses: list[Status] = []
        bump = self._take_topology(sg, member, request, statuses) or bump
        resolved = None if sg.topology is None else resolve(sg.topology, self.topics.topic_names())
        seen = self._partitions_of(resolved)
        if seen != sg.topics_seen or resolved != sg.resolved:
            bump = True
        settings = self.settings_of(sg.group_id)
        if settings.num_standby_replicas != sg.num_standby_replicas:
            # A changed streams.num.standby.replicas makes a new assignment (as Kafka).
            sg.num_standby_replicas = settings.num_standby_replicas
            bump = True
        sg.members[member.member_id] = member
        if bump:
            sg.epoch += 1
            sg.topics_seen = seen
            sg.resolved = resolved
            sg.configured = None if resolved is None else configure(resolved, seen)
        if sg.assignment_epoch < sg.epoch:
            self._new_target(sg)
        before = member
        member = self._reconciled(sg, member, request.owned)
        sg.members[member.member_id] = member
        configured = sg.configured
        creatable: tuple[TopicSpec, ...] = ()
        if configured is not None:
            statuses.extend(configured.statuses)
            creatable = configured.missing_internal
        self._schedule_session(sg.group_id, member.member_id)
        self._schedule_revocation(sg, member, before)
        self._persist(sg, snapshot)
        send = (
            joining
            or request.owned is not None
            or before.assigned != member.assigned
            or before.member_epoch != member.member_epoch
        )
        endpoints = None
        if request.endpoint_information_epoch != sg.endpoint_epoch:
            endpoints = self._endpoints(sg)
        return StreamsHeartbeatResult(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            acceptable_recovery_lag=settings.acceptable_recovery_lag,
            task_offset_interval_ms=settings.task_offset_interval_ms,
            statuses=tuple(statuses),
            assignment=member.assigned if send else None,
            endpoint_information_epoch=sg.endpoint_epoch,
            endpoints=endpoints,
            creatable_topics=creatable,
        )

    def _admitted(self, sg: StreamsGroup, request: StreamsHeartbeatRequest) -> StreamsMember | None:
        """The member the heartbeat is from (None: one joining); refused when unknown, past the
        group's size, or at a wrong epoch."""
        if request.instance_id is not None:
            return self._admitted_static(sg, request, request.instance_id)
        member = sg.members.get(request.member_id)
        if request.member_epoch == JOIN_EPOCH and member is not None:
            # Rejoining (it lost its tasks): as a new member under the same id.
            del sg.members[member.member_id]
            member = None
        if request.member_epoch == JOIN_EPOCH and member is None:
            self._check_size(sg, request)
        elif member is None:
            raise _Refused(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        else:
            _check_epoch(member, request)
        return member

    def _admitted_static(
        self, sg: StreamsGroup, request: StreamsHeartbeatRequest, instance_id: str
    ) -> StreamsMember | None:
        """Kafka's ``getOrMaybeCreateStaticStreamsGroupMember``: the member is found by its
        instance id. One joining while the instance id's member has left temporarily (epoch
        -2) takes that member's place under its own member id, with its tasks and target, and
        no new group epoch; while that member is still in the group it is refused
        (UNRELEASED_INSTANCE_ID). A heartbeat under another member id than the instance id's
        is fenced (FENCED_INSTANCE_ID)."""
        existing = static_member(sg, instance_id)
        if request.member_epoch != JOIN_EPOCH:
            if existing is None:
                raise _Refused(
                    ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown."
                )
            _check_instance(existing, request.member_id, instance_id)
            _check_epoch(existing, request)
            return existing
        if existing is None:
            self._check_size(sg, request)
            return None
        if existing.member_epoch != STATIC_LEAVE_EPOCH:
            raise _Refused(
                ErrorCode.unreleased_instance_id,
                f"Static member {request.member_id} with instance id {instance_id} cannot join "
                f"the group because the instance id is owned by member {existing.member_id}.",
            )
        del sg.members[existing.member_id]
        self._cancel_timers(sg.group_id, existing.member_id)
        sg.target[request.member_id] = sg.target.pop(existing.member_id, EMPTY)
        log.info(
            "streams group %s: static member %s rejoins as %s in place of %s",
            sg.group_id,
            instance_id,
            request.member_id,
            existing.member_id,
        )
        return replace(
            existing, member_id=request.member_id, member_epoch=0, previous_member_epoch=0
        )

    def _check_size(self, sg: StreamsGroup, request: StreamsHeartbeatRequest) -> None:
        if len(sg.members) >= self.settings.max_size and request.member_id not in sg.members:
            raise _Refused(
                ErrorCode.group_max_size_reached,
                f"The streams group has reached its maximum capacity of "
                f"{self.settings.max_size} members.",
            )

    @staticmethod
    def _take_topology(
        sg: StreamsGroup,
        member: StreamsMember,
        request: StreamsHeartbeatRequest,
        statuses: list[Status],
    ) -> bool:
        """The topology the member brings (the first member's, or the only one's, is the
        group's), and the statuses of a stale topology and of a shutdown asked for; whether
        the group's topology changed."""
        changed = False
        if request.topology is not None:
            others = [m for m in sg.members if m != member.member_id]
            # The first member (or the only one) sets the topology; the others' must match.
            if sg.topology != request.topology and (sg.topology is None or not others):
                sg.topology = request.topology
                changed = True
        if sg.topology is not None and member.topology_epoch != sg.topology.epoch:
            statuses.append(
                Status(
                    STALE_TOPOLOGY,
                    f"The member's topology epoch {member.topology_epoch} is behind the "
                    f"group's topology epoch {sg.topology.epoch}.",
                )
            )
        if request.shutdown_application and sg.shutdown_requested_by is None:
            sg.shutdown_requested_by = member.member_id
        if sg.shutdown_requested_by is not None:
            # Every member hears it, until the group is empty (as Kafka).
            statuses.append(
                Status(
                    SHUTDOWN_APPLICATION,
                    f"The application is requested to shut down by member "
                    f"{sg.shutdown_requested_by}.",
                )
            )
        return changed

    def _partitions_of(self, topology: Topology | None) -> dict[str, int]:
        if topology is None:
            return {}
        seen: dict[str, int] = {}
        for name in sorted(topology_topics(topology)):
            info = self.topics.topic_info(name)
            if info is not None:
                seen[name] = info.partitions
        return seen

    def _new_target(self, sg: StreamsGroup) -> None:
        configured = sg.configured
        tasks = configured.tasks if configured is not None and configured.ready else {}
        sg.target = assign(
            {m.member_id: (m.process_id, m.assigned) for m in sg.members.values()},
            tasks,
            sg.num_standby_replicas,
            [] if sg.resolved is None else stateful_subtopologies(sg.resolved),
            {
                m.member_id: {(s, p): offset for s, p, offset in m.task_offsets}
                for m in sg.members.values()
            },
        )
        sg.assignment_epoch = sg.epoch

    def _reconciled(
        self, sg: StreamsGroup, member: StreamsMember, owned: TaskAssignment | None
    ) -> StreamsMember:
        elsewhere = {
            t
            for m in sg.members.values()
            if m.member_id != member.member_id
            for t in _pairs(m.assigned.active) | _pairs(m.revoking.active)
        }
        return reconcile(
            member, sg.assignment_epoch, sg.target.get(member.member_id, EMPTY), owned, elsewhere
        )

    def _endpoints(self, sg: StreamsGroup) -> tuple[EndpointTasks, ...]:
        if sg.resolved is None:
            return ()
        sources = {
            s.subtopology_id: sorted(
                set(s.source_topics) | {r.name for r in s.repartition_source_topics}
            )
            for s in sg.resolved.subtopologies
        }

        def partitions(tasks: Tasks) -> tuple[tuple[str, tuple[int, ...]], ...]:
            by_topic: dict[str, set[int]] = {}
            for sub, ps in tasks.items():
                for topic in sources.get(sub, ()):
                    by_topic.setdefault(topic, set()).update(ps)
            return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))

        return tuple(
            EndpointTasks(
                m.user_endpoint, partitions(m.assigned.active), partitions(m.assigned.standby)
            )
            for m in sg.members.values()
            if m.user_endpoint is not None
        )

    # -- leaving and fencing -------------------------------------------------------------------

    def _leave(self, request: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        """Kafka's ``streamsGroupLeave``: a member leaving with epoch -1 is removed (a new
        group epoch gives its tasks to the others); a static member leaving with -2 only
        leaves for now (:meth:`_leave_for_now`). A static member is found by its instance id."""
        group = self.coordinator.groups.get(request.group_id)
        sg = None if group is None else group.streams
        instance_id = request.instance_id
        if instance_id is None:
            member = None if sg is None else sg.members.get(request.member_id)
        else:
            member = None if sg is None else static_member(sg, instance_id)
        if sg is None or member is None:
            unknown = (
                request.member_id if instance_id is None else f"with instance id {instance_id}"
            )
            raise _Refused(
                ErrorCode.unknown_member_id,
                f"Member {unknown} is not a member of group {request.group_id}.",
            )
        if instance_id is not None:
            _check_instance(member, request.member_id, instance_id)
        if request.shutdown_application and sg.shutdown_requested_by is None:
            # A member leaving because its application shuts down: the others hear it too.
            sg.shutdown_requested_by = member.member_id
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            self._leave_for_now(sg, member)
        else:
            self._remove(sg, member.member_id)
        return StreamsHeartbeatResult(
            ErrorCode.none, member_id=request.member_id, member_epoch=request.member_epoch
        )

    def _leave_for_now(self, sg: StreamsGroup, member: StreamsMember) -> None:
        """Kafka's ``streamsGroupStaticMemberGroupLeave``: the member stays, at epoch -2, with
        the tasks it has (those it was giving up are free now), so that an instance with its
        instance id takes them over without a rebalance; its session timer runs on, and when
        it ends with no such instance the member is removed as any other."""
        snapshot = self._before(sg)
        sg.members[member.member_id] = replace(
            member, member_epoch=STATIC_LEAVE_EPOCH, revoking=EMPTY
        )
        self.coordinator.timers.cancel(("streams-revocation", sg.group_id, member.member_id))
        log.info(
            "streams group %s: static member %s (instance id %s) left for now",
            sg.group_id,
            member.member_id,
            member.instance_id,
        )
        self._persist(sg, snapshot)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        timers = self.coordinator.timers
        timers.cancel(("streams-session", group_id, member_id))
        timers.cancel(("streams-revocation", group_id, member_id))

    def _remove(self, sg: StreamsGroup, member_id: str) -> None:
        snapshot = self._before(sg)
        member = sg.members.pop(member_id)
        if not sg.members:
            sg.shutdown_requested_by = None
        if member.user_endpoint is not None:
            sg.endpoint_epoch += 1
        self._cancel_timers(sg.group_id, member_id)
        sg.epoch += 1
        sg.target.pop(member_id, None)
        self._new_target(sg)
        self._persist(sg, snapshot)

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        coordinator = self.coordinator
        coordinator.timers.schedule(
            ("streams-session", group_id, member_id),
            coordinator.clock.monotonic_ms() + self.settings_of(group_id).session_timeout_ms,
            lambda: self._expire(group_id, member_id, "its session expired"),
        )

    def _schedule_revocation(
        self, sg: StreamsGroup, member: StreamsMember, before: StreamsMember
    ) -> None:
        key = ("streams-revocation", sg.group_id, member.member_id)
        timers = self.coordinator.timers
        if member.state is not MemberState.UNREVOKED_TASKS:
            timers.cancel(key)
        elif before.state is not MemberState.UNREVOKED_TASKS or key not in timers:
            group_id, member_id = sg.group_id, member.member_id
            timers.schedule(
                key,
                self.coordinator.clock.monotonic_ms() + member.rebalance_timeout_ms,
                lambda: self._expire(group_id, member_id, "it did not revoke its tasks in time"),
            )

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        group = self.coordinator.groups.get(group_id)
        sg = None if group is None else group.streams
        if sg is None or member_id not in sg.members:
            return
        log.info("streams group %s: member %s fenced: %s", group_id, member_id, why)
        self._remove(sg, member_id)

    # -- StreamsGroupDescribe, ListGroups, DeleteGroups, offsets -------------------------------

    def describe(self, group_id: str) -> StreamsGroupDescription:
        status = self.coordinator.status(group_id)
        if status is not ErrorCode.none:
            return StreamsGroupDescription(status, group_id)
        group = self.coordinator.groups.get(group_id)
        sg = None if group is None else group.streams
        if sg is None:
            return StreamsGroupDescription(
                ErrorCode.group_id_not_found, group_id, f"Group {group_id} not found."
            )
        return StreamsGroupDescription(
            ErrorCode.none,
            group_id,
            None,
            sg.state.value,
            sg.epoch,
            sg.assignment_epoch,
            sg.topology,
            tuple(
                DescribedStreamsMember(m, sg.target.get(m.member_id, EMPTY))
                for m in sg.members.values()
            ),
        )

    def delete_records(self, group: Group) -> list[tuple[bytes, bytes | None]]:
        sg = group.streams
        records: list[tuple[bytes, bytes | None]] = []
        if sg is not None:
            for member_id in sg.members:
                for kind in (
                    srec.CURRENT_MEMBER_ASSIGNMENT,
                    srec.TARGET_ASSIGNMENT_MEMBER,
                    srec.MEMBER_METADATA,
                ):
                    records.append(
                        (srec.encode_key(srec.StreamsKey(kind, group.group_id, member_id)), None)
                    )
        for kind in (srec.TARGET_ASSIGNMENT_METADATA, srec.TOPOLOGY, srec.METADATA):
            records.append((srec.encode_key(srec.StreamsKey(kind, group.group_id)), None))
        return records

    def check_commit(self, sg: StreamsGroup, member_id: str, member_epoch: int) -> ErrorCode:
        """An OffsetCommit to a streams group (Kafka's ``StreamsGroup.validateOffsetCommit``):
        from outside the group only while it is empty; a member's with its current epoch."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.none if not sg.members else ErrorCode.unknown_member_id
        member = sg.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none


def _validate(request: StreamsHeartbeatRequest) -> None:
    """Kafka's ``throwIfStreamsGroupHeartbeatRequestIsInvalid``."""

    def invalid(message: str) -> _Refused:
        return _Refused(ErrorCode.invalid_request, message)

    if not request.member_id:
        raise invalid("MemberId can't be empty.")
    if request.member_epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.topology is None:
            raise invalid("Topology must be non-null when joining the group.")
        if request.process_id is None:
            raise invalid("ProcessId can't be null when joining the group.")
        owned = request.owned
        if owned is None or not owned.is_empty():
            raise invalid("Active, standby and warmup tasks must be empty when joining.")
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if request.topology is not None:
        for s in request.topology.subtopologies:
            for pattern in s.source_topic_regex:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise invalid(f"SourceTopicRegex {pattern} is not a valid pattern: {e}") from e
    if request.member_epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        raise invalid("InstanceId can't be null when leaving with epoch -2.")


def static_member(sg: StreamsGroup, instance_id: str) -> StreamsMember | None:
    """The group's member with ``instance_id`` (at most one: a second is refused)."""
    return next((m for m in sg.members.values() if m.instance_id == instance_id), None)


def _check_instance(member: StreamsMember, member_id: str, instance_id: str) -> None:
    """FENCED_INSTANCE_ID when ``instance_id`` belongs to another member than ``member_id``."""
    if member.member_id != member_id:
        raise _Refused(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} is fenced by existing "
            f"member {member.member_id}.",
        )


def _check_epoch(member: StreamsMember, request: StreamsHeartbeatRequest) -> None:
    """As for consumer groups: a member may come with its previous epoch (the answer that moved
    it on may have been lost) if what it owns is part of its assignment; any other epoch than its
    own fences it."""
    epoch = request.member_epoch
    if epoch == member.member_epoch:
        return
    owned = request.owned
    if epoch < member.member_epoch and epoch == member.previous_member_epoch and owned is not None:
        assigned = member.assigned
        if (
            _pairs(owned.active) <= _pairs(assigned.active)
            and _pairs(owned.standby) <= _pairs(assigned.standby)
            and _pairs(owned.warmup) <= _pairs(assigned.warmup)
        ):
            return
    raise _Refused(
        ErrorCode.fenced_member_epoch,
        f"The streams group member has a {'greater' if epoch > member.member_epoch else 'smaller'}"
        f" member epoch ({epoch}) than the one known by the group coordinator "
        f"({member.member_epoch}). The member must abandon all its tasks and rejoin.",
    )


_T = TypeVar("_T")


def _keep(new: _T | None, old: _T) -> _T:
    return old if new is None else new


def _updated(member: StreamsMember, request: StreamsHeartbeatRequest) -> StreamsMember:
    return replace(
        member,
        client_id=request.client_id,
        client_host=request.client_host,
        process_id=_keep(request.process_id, member.process_id),
        instance_id=_keep(request.instance_id, member.instance_id),
        rack_id=_keep(request.rack_id, member.rack_id),
        rebalance_timeout_ms=(
            member.rebalance_timeout_ms
            if request.rebalance_timeout_ms < 0
            else request.rebalance_timeout_ms
        ),
        topology_epoch=(
            member.topology_epoch if request.topology is None else request.topology.epoch
        ),
        user_endpoint=_keep(request.user_endpoint, member.user_endpoint),
        client_tags=_keep(request.client_tags, member.client_tags),
        task_offsets=_keep(request.task_offsets, member.task_offsets),
        task_end_offsets=_keep(request.task_end_offsets, member.task_end_offsets),
    )
