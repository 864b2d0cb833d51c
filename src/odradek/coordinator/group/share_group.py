"""Share groups (KIP-932) in the group coordinator: ShareGroupHeartbeat, ShareGroupDescribe and
what ListGroups and DeleteGroups know of them.

A share group's members all read the same partitions: the partition leaders hand each record to
one member at a time (``odradek.cluster.share``), so the coordinator's assignment only spreads the
partitions of the subscribed topics over the members, every partition to at least one member and
every member at least one partition (Kafka's ``SimpleAssignor``): with fewer members than
partitions each partition goes to one member, round robin; with more, each member gets one
partition and partitions are shared. There is no revocation step: a member's epoch is the group
epoch of its last assignment, and a heartbeat answers the new assignment at once.

What is kept in ``__consumer_offsets``, in Kafka's layout (key type 11, ``ShareGroupMetadata``):
the group and its epoch, so a group outlives a restart (it comes back empty: members are not
stored, they join again with epoch 0, as Kafka's share group members do after a coordinator
move)::

    11 ShareGroupMetadata    key: int16 11, string group
       value: int16 version 0, int32 epoch, int64 metadata hash, tagged fields (flexible)

A tombstone deletes the group (DeleteGroups of an empty share group).

Timers (the coordinator's): a member missing ``group.share.session.timeout.ms`` is removed, the
group epoch bumped and the partitions reassigned. Runs on the broker's event loop thread, called
through :class:`~odradek.coordinator.group.coordinator.GroupCoordinator`.
"""

from __future__ import annotations

import enum
import logging
import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.assignors import TopicInfo
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.coordinator.group.consumer_protocol import TopicCatalog
    from odradek.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

SHARE_GROUP_TYPE = "share"
SHARE_PROTOCOL_TYPE = "share"
SHARE_GROUP_METADATA_KEY = 11
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
ASSIGNOR_NAME = "simple"
_VALUE_VERSION = 0

Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareGroupSettings:
    """The broker's ``group.share.*`` settings."""

    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    max_size: int = 200  # group.share.max.size
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2_000  # group.share.partition.max.record.locks


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...]
    assignment: dict[uuid.UUID, frozenset[int]] = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # The partition counts the assignment was made for (a new partition bumps the epoch).
    topics_seen: dict[str, TopicInfo] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str
    client_host: str


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    error: ErrorCode
    group_id: str
    message: str | None = None
    state: str = ShareGroupState.DEAD.value
    group_epoch: int = -1
    assignment_epoch: int = -1
    members: tuple[DescribedShareMember, ...] = ()


# -- records -----------------------------------------------------------------------------------


def is_share_group_key(key: bytes) -> bool:
    return len(key) >= 2 and struct.unpack_from(">h", key)[0] == SHARE_GROUP_METADATA_KEY


def encode_key(group_id: str) -> bytes:
    raw = group_id.encode()
    return struct.pack(">hh", SHARE_GROUP_METADATA_KEY, len(raw)) + raw


def encode_value(epoch: int) -> bytes:
    # Flexible body: int32 epoch, int64 metadata hash (odradek keeps none: 0), no tagged fields.
    return struct.pack(">hiqb", _VALUE_VERSION, epoch, 0, 0)


def decode_key(key: bytes) -> str:
    reader = rec.RecordReader(key)
    if reader.int16() != SHARE_GROUP_METADATA_KEY:
        raise rec.RecordFormatError("not a share group key")
    return reader.string()


def decode_value(value: bytes) -> int:
    reader = rec.RecordReader(value)
    reader.int16()
    return reader.int32()


# -- assignment --------------------------------------------------------------------------------


def assign(
    members: Mapping[str, Iterable[str]], topics: Mapping[str, TopicInfo]
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Kafka's share-group ``SimpleAssignor`` behaviour: per topic, its partitions over the
    members subscribed to it, every partition to someone and everyone something."""
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for name, info in sorted(topics.items()):
        subscribers = sorted(m for m, subs in members.items() if name in subs)
        if not subscribers or info.partitions <= 0:
            continue
        count = max(len(subscribers), info.partitions)
        for i in range(count):
            member = subscribers[i % len(subscribers)]
            result[member].setdefault(info.topic_id, set()).add(i % info.partitions)
    return {m: {t: frozenset(p) for t, p in a.items()} for m, a in result.items()}


def _check_epoch(
    request: ShareHeartbeatRequest, member: ShareMember | None
) -> ShareHeartbeatResult | None:
    """A heartbeat's refusal for its epoch (None: accepted)."""
    if request.member_epoch == JOIN_EPOCH:
        if not request.subscribed_topic_names:
            return ShareHeartbeatResult(
                ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
            )
        return None
    if member is None:
        return ShareHeartbeatResult(
            ErrorCode.unknown_member_id,
            f"Member {request.member_id} is not a member of group {request.group_id}.",
        )
    if request.member_epoch != member.member_epoch:
        return ShareHeartbeatResult(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a stale member epoch {request.member_epoch}.",
        )
    return None


class ShareGroups:
    """The share-group operations of one :class:`GroupCoordinator` (see the module doc)."""

    def __init__(self, coordinator: GroupCoordinator, settings: ShareGroupSettings) -> None:
        self.coordinator = coordinator
        self.settings = settings
        self.groups: dict[str, ShareGroup] = {}

    @property
    def topics(self) -> TopicCatalog:
        return self.coordinator.consumer.topics

    # -- loading -------------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        group_id = decode_key(key)
        if value is None:
            self.groups.pop(group_id, None)
            return
        epoch = decode_value(value)
        group = self.groups.setdefault(group_id, ShareGroup(group_id))
        group.epoch = group.assignment_epoch = epoch

    def unload(self, partition: int) -> None:
        for group_id in [g for g in self.groups if self.coordinator.partition_for(g) == partition]:
            del self.groups[group_id]

    def active(self) -> list[ShareGroup]:
        owned = self.coordinator.owned
        return [
            g for g in self.groups.values() if self.coordinator.partition_for(g.group_id) in owned
        ]

    # -- ShareGroupHeartbeat -------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResult:
        coordinator = self.coordinator
        status = coordinator.status(request.group_id)
        if status is not ErrorCode.none:
            return ShareHeartbeatResult(status)
        if not request.member_id:
            return ShareHeartbeatResult(ErrorCode.invalid_request, "MemberId can't be empty.")
        other = coordinator.groups.get(request.group_id)
        if other is not None and (
            other.consumer is not None
            or other.streams is not None
            or other.protocol_type is not None
        ):
            return ShareHeartbeatResult(
                ErrorCode.group_id_not_found,
                f"Group {request.group_id} is not a share group.",
            )
        group = self.groups.get(request.group_id)
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(group, request)
        member = None if group is None else group.members.get(request.member_id)
        refused = _check_epoch(request, member)
        if refused is not None:
            return refused
        if group is None:
            group = ShareGroup(request.group_id)
        if member is None and len(group.members) >= self.settings.max_size:
            return ShareHeartbeatResult(
                ErrorCode.group_max_size_reached,
                f"The share group has reached its maximum capacity of "
                f"{self.settings.max_size} members.",
            )
        changed = False
        if member is None:
            member = ShareMember(
                request.member_id,
                0,
                request.client_id,
                request.client_host,
                request.rack_id,
                tuple(sorted(set(request.subscribed_topic_names or ()))),
            )
            group.members[member.member_id] = member
            changed = True
        else:
            if request.rack_id is not None:
                member.rack_id = request.rack_id
            names = request.subscribed_topic_names
            if names is not None and tuple(sorted(set(names))) != member.subscribed_topic_names:
                member.subscribed_topic_names = tuple(sorted(set(names)))
                changed = True
        topics = self._topics_of(group)
        if topics != group.topics_seen:
            changed = True
        if changed:
            self._bump(group, topics)
        self._schedule_session(group.group_id, member.member_id)
        # A member learns a new assignment when it next heartbeats, and takes its epoch then.
        send_assignment = (
            request.member_epoch == JOIN_EPOCH or member.member_epoch != group.assignment_epoch
        )
        member.member_epoch = group.assignment_epoch
        return ShareHeartbeatResult(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            assignment=member.assignment if send_assignment else None,
        )

    def _topics_of(self, group: ShareGroup) -> dict[str, TopicInfo]:
        topics: dict[str, TopicInfo] = {}
        for name in group.subscribed():
            info = self.topics.topic_info(name)
            if info is not None:
                topics[name] = info
        return topics

    def _bump(self, group: ShareGroup, topics: dict[str, TopicInfo]) -> None:
        """A new group epoch and assignment, written (the epoch) before it is answered."""
        group.epoch += 1
        group.topics_seen = topics
        assignments = assign(
            {m.member_id: m.subscribed_topic_names for m in group.members.values()}, topics
        )
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, {})
        group.assignment_epoch = group.epoch
        self.groups[group.group_id] = group
        self.coordinator.write(
            group.group_id, [(encode_key(group.group_id), encode_value(group.epoch))]
        )

    def _leave(
        self, group: ShareGroup | None, request: ShareHeartbeatRequest
    ) -> ShareHeartbeatResult:
        if group is None or request.member_id not in group.members:
            return ShareHeartbeatResult(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        self._remove(group, request.member_id)
        return ShareHeartbeatResult(
            ErrorCode.none, member_id=request.member_id, member_epoch=LEAVE_EPOCH
        )

    def _remove(self, group: ShareGroup, member_id: str) -> None:
        del group.members[member_id]
        self.coordinator.timers.cancel(("share-session", group.group_id, member_id))
        self._bump(group, self._topics_of(group))

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        coordinator = self.coordinator
        coordinator.timers.schedule(
            ("share-session", group_id, member_id),
            coordinator.clock.monotonic_ms() + self.settings.session_timeout_ms,
            lambda: self._session_expired(group_id, member_id),
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        log.info("share group %s: member %s fenced: its session expired", group_id, member_id)
        self._remove(group, member_id)

    # -- ShareGroupDescribe, ListGroups, DeleteGroups ------------------------------------------

    def describe(self, group_id: str) -> ShareGroupDescription:
        status = self.coordinator.status(group_id)
        if status is not ErrorCode.none:
            return ShareGroupDescription(status, group_id)
        group = self.groups.get(group_id)
        if group is None:
            return ShareGroupDescription(
                ErrorCode.group_id_not_found,
                group_id,
                f"Group {group_id} not found.",
            )
        names = {info.topic_id: name for name, info in group.topics_seen.items()}
        members = tuple(
            DescribedShareMember(
                m.member_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                tuple(
                    (topic_id, names.get(topic_id, ""), tuple(sorted(partitions)))
                    for topic_id, partitions in sorted(m.assignment.items())
                ),
            )
            for m in group.members.values()
        )
        return ShareGroupDescription(
            ErrorCode.none,
            group_id,
            None,
            group.state.value,
            group.epoch,
            group.assignment_epoch,
            members,
        )

    def delete(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a share group (None: not a share group here): only an empty one."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        self.coordinator.write(group_id, [(encode_key(group_id), None)])
        return ErrorCode.none
