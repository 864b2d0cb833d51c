"""The records of a streams group (KIP-1071) in ``__consumer_offsets``, in Kafka 4.4's format.

Six kinds, keyed by the group (and the member where it is per member), the types of Kafka's
``CoordinatorRecordType``; keys and values are encoded as the consumer group's
(:mod:`odradek.coordinator.group.consumer_records`: non-flexible keys, an int16 version 0 and a
flexible body)::

    17 StreamsGroupMetadata               key: group
       value: int32 epoch, int64 metadata hash (0: none kept); tagged: 0 validated
              topology epoch, 1 last assignment configs, 2 stored and 3 failed topology
              description epochs (KIP-1331; odradek writes none of them)
    19 StreamsGroupMemberMetadata         key: group, member
       value: string? instance id, string? rack id, string client id, string client host,
              int32 rebalance timeout ms, int32 topology epoch, string process id,
              {string host, uint16 port}? user endpoint, []{string, string} client tags
    20 StreamsGroupTargetAssignmentMetadata  key: group
       value: int32 assignment epoch; tagged: the assignment timestamp (not written)
    21 StreamsGroupTargetAssignmentMember    key: group, member
       value: active, standby, warmup tasks: each []{string subtopology, []int32 partitions}
    22 StreamsGroupCurrentMemberAssignment   key: group, member
       value: int32 member epoch, int32 previous member epoch, int8 state (0 stable,
              1 unrevoked tasks, 2 unreleased tasks), active, standby, warmup tasks, and the
              active, standby, warmup tasks pending revocation
    23 StreamsGroupTopology               key: group
       value: int32 topology epoch, []{string subtopology id, []string source topics,
              []string source topic regex, []TopicInfo state changelog topics,
              []string repartition sink topics, []TopicInfo repartition source topics,
              []{[]int16 source topics, []int16 source regex, []int16 repartition source
              topics} copartition groups}
              TopicInfo: string name, int32 partitions, int16 replication factor,
              []{string key, string value} configs

A null value (tombstone) deletes what the key names. Checked against Kafka 4.4.0's own
generated readers (``org.apache.kafka.coordinator.group.generated``), which read every value
odradek writes whole. Pure functions on bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.coordinator.group.consumer_records import _Reader, _Writer, encode_group_key
from odradek.coordinator.group.records import RecordFormatError

METADATA = 17
MEMBER_METADATA = 19
TARGET_ASSIGNMENT_METADATA = 20
TARGET_ASSIGNMENT_MEMBER = 21
CURRENT_MEMBER_ASSIGNMENT = 22
TOPOLOGY = 23
KEY_TYPES = frozenset(
    {
        METADATA,
        MEMBER_METADATA,
        TARGET_ASSIGNMENT_METADATA,
        TARGET_ASSIGNMENT_MEMBER,
        CURRENT_MEMBER_ASSIGNMENT,
        TOPOLOGY,
    }
)
_PER_MEMBER = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
_VERSION = 0

# (subtopology id, partitions) per subtopology, as the records list tasks.
TaskList = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class StreamsKey:
    kind: int
    group: str
    member_id: str | None = None


def is_streams_group_key(key: bytes) -> bool:
    return len(key) >= 2 and struct.unpack_from(">h", key)[0] in KEY_TYPES


def encode_key(key: StreamsKey) -> bytes:
    return encode_group_key(key.kind, key.group, key.member_id, key.kind in _PER_MEMBER)


def decode_key(data: bytes) -> StreamsKey:
    r = _Reader(data)
    kind = r.int16()
    if kind not in KEY_TYPES:
        raise RecordFormatError(f"key type {kind} is not a streams group's")
    group = r.string()
    return StreamsKey(kind, group, r.string() if kind in _PER_MEMBER else None)


class Writer(_Writer):
    """The flexible encodings the streams records use."""

    def __init__(self) -> None:
        super().__init__()
        self.int16(_VERSION)

    def strings(self, values: Iterable[str]) -> None:
        items = list(values)
        self.uvarint(len(items) + 1)
        for v in items:
            self.compact_string(v)

    def pairs(self, values: Iterable[tuple[str, str]]) -> None:
        items = list(values)
        self.uvarint(len(items) + 1)
        for k, v in items:
            self.compact_string(k)
            self.compact_string(v)
            self.no_tags()

    def tasks(self, tasks: TaskList) -> None:
        self.uvarint(len(tasks) + 1)
        for subtopology, partitions in tasks:
            self.compact_string(subtopology)
            self.uvarint(len(partitions) + 1)
            for p in partitions:
                self.int32(p)
            self.no_tags()

    def int16s(self, values: Iterable[int]) -> None:
        items = list(values)
        self.uvarint(len(items) + 1)
        for v in items:
            self.int16(v)

    def done(self) -> bytes:
        self.no_tags()
        return bytes(self.out)


class Reader(_Reader):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        version = self.int16()
        if version < 0:
            raise RecordFormatError(f"value version {version}")

    def required_text(self) -> str:
        return self.required_compact_string()

    def strings(self) -> tuple[str, ...]:
        return tuple(self.required_text() for _ in range(self.count()))

    def pairs(self) -> tuple[tuple[str, str], ...]:
        result = []
        for _ in range(self.count()):
            result.append((self.required_text(), self.required_text()))
            self.skip_tags()
        return tuple(result)

    def tasks(self) -> TaskList:
        result = []
        for _ in range(self.count()):
            subtopology = self.required_text()
            partitions = tuple(self.int32() for _ in range(self.count()))
            self.skip_tags()
            result.append((subtopology, partitions))
        return tuple(result)

    def int16s(self) -> tuple[int, ...]:
        return tuple(self.int16() for _ in range(self.count()))

    def uint16(self) -> int:
        return self.int16() & 0xFFFF
