"""A classic consumer group as the coordinator holds it: members, generation, state, offsets.

These are plain data with the bookkeeping that keeps them consistent (the leader is a member,
static instance ids map to member ids, the protocol is one every member supports). Decisions —
when to rebalance, what to answer — are the coordinator's.

States, as Kafka names them::

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                    ▲   │                                      │ leader's SyncGroup
      │                    │   └─ no members left ──▶ Empty           ▼
      └── last member gone ┴──────── join, leave, death ─────────── Stable

``Dead`` is a group being deleted (DeleteGroups, or expired with nothing left).
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.coordinator.group.consumer_group import ConsumerGroup
from odradek.coordinator.group.messages import (
    CommittedOffset,
    JoinReply,
    Protocol,
    SyncReply,
    TopicPartition,
)

if TYPE_CHECKING:
    from odradek.coordinator.group.streams_group import StreamsGroup

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_reply: JoinReply | None = None
    sync_reply: SyncReply | None = None
    # Joined but not yet through a rebalance: it has no session yet, only the join timeout.
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    @property
    def protocol_names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None


@dataclass(slots=True, eq=False)
class Group:
    group_id: str
    state_timestamp: int  # wall-clock ms of the last state change
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # told MEMBER_ID_REQUIRED
    pending_sync: set[str] = field(default_factory=set)  # joined, not yet synced
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    # Transactional commits not yet committed or aborted, by producer id: invisible to
    # OffsetFetch until the transaction's COMMIT marker moves them into ``offsets``.
    pending_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    # group.initial.rebalance.delay.ms: a new group waits for more members before its first
    # generation, extending the wait while members keep arriving.
    in_initial_delay: bool = False
    new_member_added: bool = False
    initial_delay_remaining_ms: int = 0
    # A KIP-848 consumer group's state; None for a classic group (whose state is the above).
    consumer: ConsumerGroup | None = None
    # A KIP-1071 streams group's state; None for other kinds.
    streams: StreamsGroup | None = None

    # -- state ---------------------------------------------------------------------------------

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def size(self) -> int:
        return len(self.members) + len(self.pending_members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_pending_offset(self, tp: TopicPartition) -> bool:
        return any(tp in pending for pending in self.pending_offsets.values())

    def pending_partitions(self) -> set[TopicPartition]:
        return {tp for pending in self.pending_offsets.values() for tp in pending}

    def drop_pending_offset(self, tp: TopicPartition) -> None:
        """A tombstone for ``tp`` removes the open transactions' commits to it too."""
        for pending in self.pending_offsets.values():
            pending.pop(tp, None)

    # -- members -------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member ``instance_id`` a new member id, keeping its place and
        assignment (KIP-345: a restarted static member is the same member)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -----------------------------------------------------------------------------

    def supports_protocols(
        self, protocol_type: str, names: list[str], excluding: str | None = None
    ) -> bool:
        """Whether a member with these protocols can be in the group: the same protocol type,
        and at least one protocol every other member supports too."""
        others = [m for m in self.members.values() if m.member_id != excluding]
        if not others:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = set(others[0].protocol_names)
        for m in others[1:]:
            common.intersection_update(m.protocol_names)
        return any(name in common for name in names)

    def select_protocol(self) -> str:
        """The protocol of the next generation: among those every member supports, the one
        most members list first (among the candidates), ties going to the leader's order."""
        members = list(self.members.values())
        candidates = set(members[0].protocol_names)
        for m in members[1:]:
            candidates.intersection_update(m.protocol_names)
        if not candidates:
            raise ValueError(f"members of group {self.group_id} share no protocol")
        votes: Counter[str] = Counter()
        for m in members:
            votes[next(n for n in m.protocol_names if n in candidates)] += 1
        leader = self.members.get(self.leader_id or "", members[0])
        order = {name: i for i, name in enumerate(leader.protocol_names)}
        return min(candidates, key=lambda name: (-votes[name], order.get(name, len(order)), name))

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, when the group uses the consumer protocol and its
        metadata can be read; None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            found = subscription_topics(m.metadata(self.protocol_name))
            if found is None:
                return None
            topics.update(found)
        return topics


def subscription_topics(metadata: bytes) -> list[str] | None:
    """The topic list at the start of a ``ConsumerProtocolSubscription`` (every version starts
    with an int16 version, then an int32 count of int16-length strings); None if unreadable."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        position = 6
        if count * 2 > len(metadata) - position:  # each name takes its length at the least
            return None
        topics = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, position)
            position += 2
            if length < 0 or position + length > len(metadata):
                return None
            topics.append(metadata[position : position + length].decode())
            position += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
