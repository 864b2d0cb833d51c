"""What goes into the group coordinator and what comes out: version-independent value objects.

Handlers translate Kafka's requests of any version into these, and these back into responses of
the negotiated version. Timeouts are milliseconds; an ``ErrorCode`` of ``none`` means success.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode

NO_GENERATION = -1
NO_LEADER_EPOCH = -1
NO_OFFSET = -1
NO_PRODUCER_ID = -1
# The member id of a member that has none yet.
UNKNOWN_MEMBER_ID = ""

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Protocol:
    """One assignment protocol a member supports (e.g. ``range``), with its opaque metadata."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True  # JoinGroup v4+ (KIP-394)
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    assignments: tuple[tuple[str, bytes], ...]
    protocol_type: str | None = None  # SyncGroup v5+
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinReply = Callable[[JoinResult], None]
SyncReply = Callable[[SyncResult], None]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """A member leaving: by member id, or by group instance id (static members, KIP-345)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode
    members: tuple[tuple[MemberIdentity, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """One partition's offset to commit."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[OffsetCommit, ...]


@dataclass(frozen=True, slots=True)
class TxnCommitRequest:
    """TxnOffsetCommit: offsets committed inside the transaction of ``producer_id``; the
    generation, member and instance ids come with v3+ (defaults: a client outside group
    management, or an older version)."""

    group_id: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[OffsetCommit, ...]
    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    # Where the commit's record is in __consumer_offsets: of a transactional commit and a plain
    # one to the same partition, the later record wins when the transaction commits (as Kafka,
    # so that replaying a compacted log materialises the same offset).
    record_offset: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class FetchedOffsets:
    error: ErrorCode
    offsets: tuple[tuple[TopicPartition, CommittedOffset | None], ...] = ()
    # Partitions asked for with require_stable that have a transactional commit pending: they
    # answer UNSTABLE_OFFSET_COMMIT.
    unstable: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str = ""
    protocol_name: str = ""
    members: tuple[DescribedMember, ...] = ()


# -- the KIP-848 consumer group protocol -------------------------------------------------------

ConsumerAssignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    """ConsumerGroupHeartbeat: ``None`` fields did not change since the member's last heartbeat
    (``rebalance_timeout_ms`` -1 likewise); ``owned`` is None when not sent."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[uuid.UUID, int], ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # The member's whole assignment when it changed or the request was a full one; else None.
    assignment: ConsumerAssignment | None = None


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]
    target_assignment: tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    error: ErrorCode
    group_id: str
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
