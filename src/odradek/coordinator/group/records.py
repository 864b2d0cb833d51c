"""The records of ``__consumer_offsets``: committed offsets and group metadata, in Kafka's format.

Every record has a key and a value, each starting with a big-endian int16. In the key it says
what the record is; in the value, which version of the value schema follows. A record with a null
value (a tombstone) deletes what its key names, so compaction can drop everything before it.

Key of a committed offset (key type 1, Kafka's ``OffsetCommitKey``; type 0 is the same layout)::

    int16   1
    string  group
    string  topic
    int32   partition

Value of a committed offset (``OffsetCommitValue``; written as version 3, versions 0-3 read)::

    int16   version
    int64   offset
    int32   leader epoch            versions 3+, -1 for none
    string  metadata
    int64   commit timestamp        ms since the epoch
    int64   expire timestamp        version 1 only (ignored: retention is the broker's setting)

Key of a group (key type 2, ``GroupMetadataKey``)::

    int16   2
    string  group

Value of a group (``GroupMetadataValue``; written as version 3, versions 0-3 read)::

    int16   version
    string  protocol type
    int32   generation
    string? protocol                nullable: no protocol while the group is empty
    string? leader                  nullable
    int64   current state timestamp versions 2+, -1 for unknown
    int32   member count, then per member:
        string  member id
        string? group instance id   versions 3+ (static membership)
        string  client id
        string  client host
        int32   rebalance timeout   versions 1+
        int32   session timeout
        bytes   subscription        the member's metadata for the group's protocol
        bytes   assignment          what the leader assigned to it

``string`` is an int16 length and UTF-8 bytes (length -1 for null where nullable); ``bytes`` is an
int32 length and the bytes. This is the non-flexible layout of Kafka's generated serde, so a
Kafka broker (or ``kafka-console-consumer`` with Kafka's offsets formatter) can read these
records and odradek can read Kafka's. Flexible versions (4+) are not read: Kafka writes them only
for tagged fields odradek does not use.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.bounds import BoundedReader

OFFSET_COMMIT_KEY_V0 = 0
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a record of ``__consumer_offsets`` this broker understands."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


Key = OffsetKey | GroupKey
Value = OffsetValue | GroupValue


# -- writing -----------------------------------------------------------------------------------


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def int16(self, value: int) -> None:
        self.out += _INT16.pack(value)

    def int32(self, value: int) -> None:
        self.out += _INT32.pack(value)

    def int64(self, value: int) -> None:
        self.out += _INT64.pack(value)

    def string(self, value: str | None) -> None:
        if value is None:
            self.int16(-1)
            return
        data = value.encode()
        if len(data) > 0x7FFF:
            raise RecordFormatError(f"string of {len(data)} bytes is too long for an int16 length")
        self.int16(len(data))
        self.out += data

    def bytes_(self, value: bytes) -> None:
        self.int32(len(value))
        self.out += value


def encode_key(key: Key) -> bytes:
    w = _Writer()
    if isinstance(key, OffsetKey):
        w.int16(OFFSET_COMMIT_KEY)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    else:
        w.int16(GROUP_METADATA_KEY)
        w.string(key.group)
    return bytes(w.out)


def encode_offset_value(value: OffsetValue) -> bytes:
    w = _Writer()
    w.int16(OFFSET_COMMIT_VALUE_VERSION)
    w.int64(value.offset)
    w.int32(value.leader_epoch)
    w.string(value.metadata)
    w.int64(value.commit_timestamp)
    return bytes(w.out)


def encode_group_value(value: GroupValue) -> bytes:
    w = _Writer()
    w.int16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.int64(value.current_state_timestamp)
    w.int32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return bytes(w.out)


def encode_value(value: Value) -> bytes:
    if isinstance(value, OffsetValue):
        return encode_offset_value(value)
    return encode_group_value(value)


# -- reading -----------------------------------------------------------------------------------


class RecordReader(BoundedReader):
    """Reads the big-endian fields of a record's key or value, raising RecordFormatError at a
    short or malformed field."""

    __slots__ = ()
    error = RecordFormatError

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        length = self.int32()
        return b"" if length < 0 else bytes(self.slice(length))

    # -- the flexible (compact) encodings of newer record versions --

    def compact_string(self) -> str | None:
        return self.compact_nullable_string()

    def required_compact_string(self) -> str:
        value = self.compact_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def count(self) -> int:
        """A compact array's length (a null array reads as empty)."""
        return self.bounded(max(self.uvarint() - 1, 0))

    def skip_tags(self) -> None:
        self.skip_tagged_fields()


def decode_key(data: bytes) -> Key:
    r = RecordReader(data)
    kind = r.int16()
    if kind in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY):
        return OffsetKey(r.string(), r.string(), r.int32())
    if kind == GROUP_METADATA_KEY:
        return GroupKey(r.string())
    raise RecordFormatError(f"unknown key type {kind}")


def decode_offset_value(data: bytes) -> OffsetValue:
    r = RecordReader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"offset commit value version {version} is not 0-3")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp = r.int64()
    if version == 1:
        r.int64()  # expire timestamp
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp)


def decode_group_value(data: bytes) -> GroupValue:
    r = RecordReader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"group metadata value version {version} is not 0-3")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.bounded(max(r.int32(), 0))):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, state_timestamp, tuple(members))


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value for ``key``; None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, OffsetKey):
        return decode_offset_value(data)
    return decode_group_value(data)


# -- which partition holds a group ---------------------------------------------------------------


def encode_uvarint(value: int) -> bytes:
    """An unsigned varint, as the flexible versions of the coordinators' records write
    lengths and tags."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs``, with Integer.MIN_VALUE mapped to 0 (not a mask of
    the sign bit, which would place a negative hash elsewhere)."""
    return 0 if value == -(2**31) else abs(value)


def partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group``, as Kafka picks it (so a data directory
    moved between odradek and Kafka keeps each group where the other looks for it)."""
    return kafka_abs(java_string_hash(group)) % partitions
