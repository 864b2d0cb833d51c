"""The records of a KIP-848 consumer group in ``__consumer_offsets``, in Kafka's format.

Kafka keeps a consumer group (the ``group.protocol=consumer`` kind) as six kinds of records, each
keyed by the group (and the member where it is per member); key types 3-8 continue the numbering of
:mod:`odradek.coordinator.group.records`. A key is non-flexible: an int16 type, then int16-length
strings. A value is an int16 version (always 0 here) and a *flexible* body, as Kafka's generated
serde writes it: ``compact string`` is an unsigned varint of length + 1 (0 for null) and UTF-8
bytes, ``compact array`` an unsigned varint of count + 1 and the items, ``uuid`` 16 bytes, and every
struct (the top one and each nested one) ends with its tagged fields (an unsigned varint count;
odradek writes none and skips those it reads, e.g. the ``ClassicMemberMetadata`` tag 0 of a member
Kafka converted from a classic group)::

    3 ConsumerGroupMetadata               key: group
      value: int32 epoch                   (the group epoch)
    4 ConsumerGroupPartitionMetadata      key: group
      value: []{uuid topic id, string topic name, int32 partitions,
                []{int32 partition, []string racks}}
                                           (the subscribed topics as last seen)
    5 ConsumerGroupMemberMetadata         key: group, member
      value: string? instance id, string? rack id, string client id, string client host,
             []string subscribed topic names, string? subscribed regex,
             int32 rebalance timeout ms, string? server assignor
    6 ConsumerGroupTargetAssignmentMetadata  key: group
      value: int32 assignment epoch
    7 ConsumerGroupTargetAssignmentMember    key: group, member
      value: []{uuid topic id, []int32 partitions}
    8 ConsumerGroupCurrentMemberAssignment   key: group, member
      value: int32 member epoch, int32 previous member epoch, int8 state,
             assigned []{uuid, []int32}, pending revocation []{uuid, []int32}

A null value (tombstone) deletes what the key names. These are the layouts of Kafka 3.7-4.0's
``ConsumerGroup*Key/Value.json``, so a Kafka broker can load a group odradek wrote and back.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.records import RecordFormatError

CONSUMER_GROUP_METADATA_KEY = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = 8
CONSUMER_GROUP_KEY_TYPES = range(3, 9)

_VALUE_VERSION = 0

# Partitions by topic id: the unit of every assignment in the consumer protocol.
Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """Key of a record about one consumer group (``member_id`` None) or one of its members."""

    kind: int
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class SubscribedTopic:
    topic_id: uuid.UUID
    name: str
    partitions: int
    # The racks of each partition's replicas (by partition; empty: no rack known), for the
    # rack-aware assignors.
    racks: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[SubscribedTopic, ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochValue:
    epoch: int


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    partitions: Assignment


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment
    pending_revocation: Assignment


ConsumerGroupValue = (
    GroupEpochValue
    | PartitionMetadataValue
    | MemberMetadataValue
    | TargetAssignmentEpochValue
    | TargetAssignmentMemberValue
    | CurrentAssignmentValue
)

_KIND_OF_VALUE: dict[type, int] = {
    GroupEpochValue: CONSUMER_GROUP_METADATA_KEY,
    PartitionMetadataValue: CONSUMER_GROUP_PARTITION_METADATA_KEY,
    MemberMetadataValue: CONSUMER_GROUP_MEMBER_METADATA_KEY,
    TargetAssignmentEpochValue: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    TargetAssignmentMemberValue: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CurrentAssignmentValue: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
}
_PER_MEMBER = {
    CONSUMER_GROUP_MEMBER_METADATA_KEY,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
}


# -- writing -----------------------------------------------------------------------------------


class _Writer(rec._Writer):
    """The non-flexible writer of the classic records, plus the flexible encodings."""

    def int8(self, value: int) -> None:
        self.out += struct.pack(">b", value)

    def uvarint(self, value: int) -> None:
        self.out += rec.encode_uvarint(value)

    def compact_string(self, value: str | None) -> None:
        if value is None:
            self.uvarint(0)
            return
        data = value.encode()
        self.uvarint(len(data) + 1)
        self.out += data

    def no_tags(self) -> None:
        self.uvarint(0)

    def assignment(self, partitions: Assignment) -> None:
        topics = sorted((t, p) for t, p in partitions.items() if p)
        self.uvarint(len(topics) + 1)
        for topic_id, indexes in topics:
            self.out += topic_id.bytes
            self.uvarint(len(indexes) + 1)
            for index in sorted(indexes):
                self.int32(index)
            self.no_tags()


def encode_key(key: ConsumerGroupKey) -> bytes:
    return encode_group_key(key.kind, key.group, key.member_id, key.kind in _PER_MEMBER)


def encode_group_key(kind: int, group: str, member_id: str | None, per_member: bool) -> bytes:
    """A KIP-848-era group record key (consumer and streams groups alike): its type, the group,
    and the member where the type is one per member."""
    w = _Writer()
    w.int16(kind)
    w.string(group)
    if per_member:
        if member_id is None:
            raise RecordFormatError(f"key type {kind} needs a member id")
        w.string(member_id)
    return bytes(w.out)


def kind_of(value: ConsumerGroupValue) -> int:
    """The key type of records holding ``value``."""
    return _KIND_OF_VALUE[type(value)]


def encode_value(value: ConsumerGroupValue) -> bytes:
    w = _Writer()
    w.int16(_VALUE_VERSION)
    if isinstance(value, GroupEpochValue | TargetAssignmentEpochValue):
        w.int32(value.epoch)
    elif isinstance(value, PartitionMetadataValue):
        w.uvarint(len(value.topics) + 1)
        for topic in value.topics:
            w.out += topic.topic_id.bytes
            w.compact_string(topic.name)
            w.int32(topic.partitions)
            racked = [(p, racks) for p, racks in enumerate(topic.racks) if racks]
            w.uvarint(len(racked) + 1)
            for partition, racks in racked:
                w.int32(partition)
                w.uvarint(len(racks) + 1)
                for rack in racks:
                    w.compact_string(rack)
                w.no_tags()
            w.no_tags()
    elif isinstance(value, MemberMetadataValue):
        w.compact_string(value.instance_id)
        w.compact_string(value.rack_id)
        w.compact_string(value.client_id)
        w.compact_string(value.client_host)
        w.uvarint(len(value.subscribed_topic_names) + 1)
        for name in value.subscribed_topic_names:
            w.compact_string(name)
        w.compact_string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.compact_string(value.server_assignor)
    elif isinstance(value, TargetAssignmentMemberValue):
        w.assignment(value.partitions)
    else:
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        w.assignment(value.assigned)
        w.assignment(value.pending_revocation)
    w.no_tags()
    return bytes(w.out)


# -- reading -----------------------------------------------------------------------------------


class _Reader(rec.RecordReader):
    """The non-flexible reader of the classic records, plus the flexible encodings."""

    def topic_id(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.slice(16)))

    def assignment(self) -> dict[uuid.UUID, frozenset[int]]:
        result: dict[uuid.UUID, frozenset[int]] = {}
        for _ in range(self.count()):
            topic_id = self.topic_id()
            result[topic_id] = frozenset(self.int32() for _ in range(self.count()))
            self.skip_tags()
        return result


def decode_key(data: bytes) -> ConsumerGroupKey:
    r = _Reader(data)
    kind = r.int16()
    if kind not in CONSUMER_GROUP_KEY_TYPES:
        raise RecordFormatError(f"key type {kind} is not a consumer group's")
    group = r.string()
    return ConsumerGroupKey(kind, group, r.string() if kind in _PER_MEMBER else None)


def decode_value(kind: int, data: bytes) -> ConsumerGroupValue:
    """The value of a record whose key has type ``kind``. Newer versions are read by their
    version-0 fields (Kafka adds fields as tagged ones or at the end)."""
    r = _Reader(data)
    version = r.int16()
    if version < 0:
        raise RecordFormatError(f"value version {version}")
    value: ConsumerGroupValue
    if kind == CONSUMER_GROUP_METADATA_KEY:
        value = GroupEpochValue(r.int32())
    elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY:
        value = TargetAssignmentEpochValue(r.int32())
    elif kind == CONSUMER_GROUP_PARTITION_METADATA_KEY:
        topics = []
        for _ in range(r.count()):
            topic_id = r.topic_id()
            name = r.required_compact_string()
            partitions = r.int32()
            by_partition: dict[int, tuple[str, ...]] = {}
            for _ in range(r.count()):
                partition = r.int32()
                racks = tuple(r.required_compact_string() for _ in range(r.count()))
                if 0 <= partition < partitions and racks:
                    by_partition[partition] = racks
                r.skip_tags()
            r.skip_tags()
            racks_of = (
                tuple(by_partition.get(p, ()) for p in range(partitions)) if by_partition else ()
            )
            topics.append(SubscribedTopic(topic_id, name, partitions, racks_of))
        value = PartitionMetadataValue(tuple(topics))
    elif kind == CONSUMER_GROUP_MEMBER_METADATA_KEY:
        instance_id = r.compact_string()
        rack_id = r.compact_string()
        client_id = r.required_compact_string()
        client_host = r.required_compact_string()
        names = tuple(r.required_compact_string() for _ in range(r.count()))
        value = MemberMetadataValue(
            instance_id,
            rack_id,
            client_id,
            client_host,
            names,
            r.compact_string(),
            r.int32(),
            r.compact_string(),
        )
    elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
        value = TargetAssignmentMemberValue(r.assignment())
    elif kind == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY:
        value = CurrentAssignmentValue(
            r.int32(), r.int32(), r.int8(), r.assignment(), r.assignment()
        )
    else:
        raise RecordFormatError(f"key type {kind} is not a consumer group's")
    return value
