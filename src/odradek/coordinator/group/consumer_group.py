"""A KIP-848 consumer group (``group.protocol=consumer``) as the coordinator holds it.

What it is: the group epoch (bumped when membership or subscriptions change), the target
assignment of that epoch (what the server-side assignor decided, per member) and each member's
current assignment, which moves towards its target one step per heartbeat: a partition is given
to its new owner only once its old owner has revoked it (incremental revocation: the old owner's
heartbeat no longer lists it). ``partition_epochs`` says which member epoch holds each partition
(assigned or pending revocation), which is what keeps a partition from two owners at once.

File format: none of its own — the group is the replay of its records in ``__consumer_offsets``
(:mod:`odradek.coordinator.group.consumer_records`). :meth:`ConsumerGroup.apply` is the only way its
state changes, for records read back at load and for records just written alike (the
coordinator writes first, then applies what it wrote), so a restart or a coordinator move
rebuilds exactly the state that was served. Crash: a write either reached the log (and is
replayed) or did not (and changed nothing).

:func:`reconcile` is Kafka's ``CurrentAssignmentBuilder``: the next current assignment of one
member. Called from the broker's event loop thread only (through the coordinator).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group.consumer_records import Assignment

NO_EPOCH = -1
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
TopicIdPartition = tuple[uuid.UUID, int]


class MemberState(enum.IntEnum):
    """Where a member is in its reconciliation (the int8 of the current assignment record)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before it moves to the next epoch
    UNRELEASED_PARTITIONS = 2  # waits for partitions other members still hold
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``, as ListGroups and describes name them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = NO_EPOCH
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def metadata_value(self) -> crec.MemberMetadataValue:
        return crec.MemberMetadataValue(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
        )

    def assignment_value(self) -> crec.CurrentAssignmentValue:
        return crec.CurrentAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            self.assigned,
            self.pending_revocation,
        )

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch


@dataclass(slots=True, eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # The subscribed topics as last written (ConsumerGroupPartitionMetadata), by name.
    subscribed_topics: dict[str, crec.SubscribedTopic] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    partition_epochs: dict[TopicIdPartition, int] = field(default_factory=dict)

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topic_names(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), NO_EPOCH)

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    # -- records -------------------------------------------------------------------------------

    def snapshot(self) -> ConsumerGroup:
        """A copy to :meth:`restore` from: the dicts copied, their values (immutable, or
        replaced whole by :meth:`apply`) shared."""
        return replace(
            self,
            members=dict(self.members),
            static_members=dict(self.static_members),
            subscribed_topics=dict(self.subscribed_topics),
            target=dict(self.target),
            partition_epochs=dict(self.partition_epochs),
        )

    def restore(self, snapshot: ConsumerGroup) -> None:
        """Go back to ``snapshot`` (records applied since were not written)."""
        self.group_epoch = snapshot.group_epoch
        self.assignment_epoch = snapshot.assignment_epoch
        self.members = dict(snapshot.members)
        self.static_members = dict(snapshot.static_members)
        self.subscribed_topics = dict(snapshot.subscribed_topics)
        self.target = dict(snapshot.target)
        self.partition_epochs = dict(snapshot.partition_epochs)

    def apply(self, key: crec.ConsumerGroupKey, value: crec.ConsumerGroupValue | None) -> None:
        """Apply one record of this group (``value`` None: a tombstone), as Kafka's replay."""
        kind = key.kind
        member_id = key.member_id or ""
        if kind == crec.CONSUMER_GROUP_METADATA_KEY:
            if isinstance(value, crec.GroupEpochValue):
                self.group_epoch = value.epoch
        elif kind == crec.CONSUMER_GROUP_PARTITION_METADATA_KEY:
            self.subscribed_topics = (
                {t.name: t for t in value.topics}
                if isinstance(value, crec.PartitionMetadataValue)
                else {}
            )
        elif kind == crec.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY:
            if isinstance(value, crec.TargetAssignmentEpochValue):
                self.assignment_epoch = value.epoch
        elif kind == crec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
            if isinstance(value, crec.TargetAssignmentMemberValue):
                self.target[member_id] = dict(value.partitions)
            else:
                self.target.pop(member_id, None)
        elif kind == crec.CONSUMER_GROUP_MEMBER_METADATA_KEY:
            if isinstance(value, crec.MemberMetadataValue):
                self._put(
                    replace(
                        self.members.get(member_id, ConsumerMember(member_id)),
                        instance_id=value.instance_id,
                        rack_id=value.rack_id,
                        client_id=value.client_id,
                        client_host=value.client_host,
                        subscribed_topic_names=value.subscribed_topic_names,
                        subscribed_topic_regex=value.subscribed_topic_regex,
                        rebalance_timeout_ms=value.rebalance_timeout_ms,
                        server_assignor=value.server_assignor,
                    )
                )
            else:
                self._remove(member_id)
        elif kind == crec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY:
            member = self.members.get(member_id, ConsumerMember(member_id))
            self._release(member)
            if isinstance(value, crec.CurrentAssignmentValue):
                state = (
                    MemberState(value.state)
                    if value.state in MemberState._value2member_map_
                    else MemberState.UNKNOWN
                )
                member = replace(
                    member,
                    member_epoch=value.member_epoch,
                    previous_member_epoch=value.previous_member_epoch,
                    state=state,
                    assigned=dict(value.assigned),
                    pending_revocation=dict(value.pending_revocation),
                )
                self._put(member)
                self._hold(member)
            elif member_id in self.members:
                self._put(
                    replace(
                        member,
                        member_epoch=0,
                        previous_member_epoch=NO_EPOCH,
                        state=MemberState.STABLE,
                        assigned={},
                        pending_revocation={},
                    )
                )

    def _put(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._release(member)
        if (
            member.instance_id is not None
            and self.static_members.get(member.instance_id) == member_id
        ):
            del self.static_members[member.instance_id]

    def _hold(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    self.partition_epochs[(topic_id, p)] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if self.partition_epochs.get((topic_id, p)) == member.member_epoch:
                        del self.partition_epochs[(topic_id, p)]


# -- reconciliation ----------------------------------------------------------------------------


def owns_any(owned: Iterable[TopicIdPartition] | None, partitions: Assignment) -> bool:
    """Whether the member still reports any of ``partitions`` (not knowing counts as yes)."""
    if owned is None:
        return True
    return any(p in partitions.get(t, ()) for t, p in owned)


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: list[TopicIdPartition] | None,
) -> ConsumerMember:
    """The member's next current assignment towards ``target`` of ``target_epoch``, given the
    partitions its heartbeat says it owns (None: not sent). Raises
    :class:`FencedMember` for a member in a state this coordinator does not know."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise FencedMember("the member is in an unknown state and must rejoin")
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


class FencedMember(Exception):
    """The member must give up its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def _with_epoch(member: ConsumerMember, epoch: int) -> ConsumerMember:
    return replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch)


def _next(
    member: ConsumerMember,
    epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[uuid.UUID, int], int],
    owned: list[TopicIdPartition] | None,
) -> ConsumerMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    adding: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        kept = current & wanted
        if kept:
            assigned[topic_id] = kept
        if current - kept:
            revoking[topic_id] = current - kept
        free = frozenset(p for p in wanted - kept if partition_epoch(topic_id, p) == NO_EPOCH)
        unreleased = unreleased or len(free) < len(wanted - kept)
        if free:
            adding[topic_id] = free
    if revoking and owns_any(owned, revoking):
        # Keep the epoch until the member has let go of what it must revoke.
        return replace(
            _with_epoch(member, epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
        )
    for topic_id, partitions in adding.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(
        _with_epoch(member, target_epoch),
        state=state,
        assigned=assigned,
        pending_revocation={},
    )


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """The broker settings of consumer groups, under Kafka's names in the comments."""

    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    max_size: int = 2**31 - 1  # group.consumer.max.size
    # group.consumer.migration.policy: whether a non-empty classic group is converted
    migration_policy: str = "bidirectional"

    @property
    def upgrades(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")
