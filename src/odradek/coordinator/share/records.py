"""The records of ``__share_group_state``: each share-partition's persisted state, in Kafka's
format (KIP-932's share coordinator).

A key starts with a big-endian int16 saying what the record is: 0 a snapshot (Kafka's
``ShareSnapshotKey``), 1 an update (``ShareUpdateKey``); both then carry, non-flexible::

    string  group id        int16 length, UTF-8
    uuid    topic id        16 bytes
    int32   partition

A value starts with its int16 version (0) and is flexible (compact arrays, tagged fields)::

    ShareSnapshotValue                      ShareUpdateValue
    int32   snapshot epoch                  int32   snapshot epoch
    int32   state epoch                     int32   leader epoch
    int32   leader epoch                    int64   start offset (-1: unchanged)
    int64   start offset                    []      state batches
    int64   create timestamp (ms)           tagged fields
    int64   write timestamp (ms)
    []      state batches
    tagged fields

    state batch: int64 first offset, int64 last offset, int8 delivery state
                 (0 available, 2 acknowledged, 4 archived), int16 delivery count, tagged fields

A snapshot is the whole state; an update names the batches that changed since, merged over the
snapshot when replayed. A null value (tombstone) deletes the share-partition's state. Tagged
fields are skipped when read; an unknown key type or a value too short is
:class:`RecordFormatError`. Pure functions on bytes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from odradek.cluster.metadata.store import kafka_uuid
from odradek.cluster.share.persister import StateBatch
from odradek.coordinator.group.records import (
    RecordFormatError,
    RecordReader,
    encode_uvarint,
    java_string_hash,
    kafka_abs,
)

SNAPSHOT_KEY = 0
UPDATE_KEY = 1
VALUE_VERSION = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_BATCH = struct.Struct(">qqbh")
_SNAPSHOT_HEAD = struct.Struct(">iiiqqq")
_UPDATE_HEAD = struct.Struct(">iiq")


@dataclass(frozen=True, slots=True)
class StateKey:
    """One share-partition: a group on one partition of a topic (named by id)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's ``SharePartitionKey.asCoordinatorKey``: what FindCoordinator (key type 2)
        and the partitioning of ``__share_group_state`` go by."""
        return f"{self.group_id}:{kafka_uuid(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


def partition_for(key: str, partitions: int) -> int:
    """The ``__share_group_state`` partition of a coordinator key, as Kafka picks it."""
    return kafka_abs(java_string_hash(key)) % partitions


# -- encoding ------------------------------------------------------------------------------------


def encode_key(kind: int, key: StateKey) -> bytes:
    group = key.group_id.encode()
    return (
        _INT16.pack(kind)
        + _INT16.pack(len(group))
        + group
        + key.topic_id.bytes
        + _INT32.pack(key.partition)
    )


def _encode_batches(batches: tuple[StateBatch, ...]) -> bytes:
    out = bytearray(encode_uvarint(len(batches) + 1))
    for b in batches:
        out += _BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        out.append(0)  # no tagged fields
    return bytes(out)


def encode_snapshot(value: ShareSnapshot) -> bytes:
    return (
        _INT16.pack(VALUE_VERSION)
        + _SNAPSHOT_HEAD.pack(
            value.snapshot_epoch,
            value.state_epoch,
            value.leader_epoch,
            value.start_offset,
            value.create_timestamp,
            value.write_timestamp,
        )
        + _encode_batches(value.batches)
        + b"\x00"
    )


def encode_update(value: ShareUpdate) -> bytes:
    return (
        _INT16.pack(VALUE_VERSION)
        + _UPDATE_HEAD.pack(value.snapshot_epoch, value.leader_epoch, value.start_offset)
        + _encode_batches(value.batches)
        + b"\x00"
    )


# -- decoding ------------------------------------------------------------------------------------


def decode_key(data: bytes) -> tuple[int, StateKey]:
    reader = RecordReader(data)
    (kind,) = reader.unpack(_INT16)
    if kind not in (SNAPSHOT_KEY, UPDATE_KEY):
        raise RecordFormatError(f"unknown share state key type {kind}")
    (length,) = reader.unpack(_INT16)
    group = reader.text(length)
    topic_id = uuid.UUID(bytes=bytes(reader.slice(16)))
    (partition,) = reader.unpack(_INT32)
    return kind, StateKey(group, topic_id, partition)


def _decode_batches(reader: RecordReader) -> tuple[StateBatch, ...]:
    count = reader.uvarint() - 1
    if count < 0:
        return ()
    batches = []
    for _ in range(reader.bounded(count, _BATCH.size + 1)):
        first, last, state, delivered = reader.unpack(_BATCH)
        reader.skip_tags()
        batches.append(StateBatch(first, last, state, delivered))
    return tuple(batches)


def _version(reader: RecordReader) -> None:
    (version,) = reader.unpack(_INT16)
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown share state value version {version}")


def decode_snapshot(data: bytes) -> ShareSnapshot:
    reader = RecordReader(data)
    _version(reader)
    snapshot_epoch, state_epoch, leader_epoch, start, created, written = reader.unpack(
        _SNAPSHOT_HEAD
    )
    batches = _decode_batches(reader)
    reader.skip_tags()
    return ShareSnapshot(
        snapshot_epoch, state_epoch, leader_epoch, start, created, written, batches
    )


def decode_update(data: bytes) -> ShareUpdate:
    reader = RecordReader(data)
    _version(reader)
    snapshot_epoch, leader_epoch, start = reader.unpack(_UPDATE_HEAD)
    batches = _decode_batches(reader)
    reader.skip_tags()
    return ShareUpdate(snapshot_epoch, leader_epoch, start, batches)
