"""The records of ``__transaction_state``: one per transactional id, in Kafka's format.

Key (Kafka's ``TransactionLogKey``, version 0)::

    int16   0               key version
    string  transactional id

Value (``TransactionLogValue``; versions 0 and 1 read and written — version 1 is the flexible
layout, written only when a tagged field is needed: NextProducerId, tag 1, the producer id a
transaction version 2 producer moves to when its epochs run out; other tags are skipped)::

    int16   version
    int64   producer id
    int16   producer epoch
    int32   transaction timeout ms
    int8    state           TransactionState's id (Empty 0 … PrepareEpochFence 7)
    int32   partition count (-1: null), then per topic:
        string  topic
        int32   count, then int32 partition ids
    int64   last update timestamp ms
    int64   transaction start timestamp ms

A null value (tombstone) forgets the transactional id. ``string`` is an int16 length and UTF-8
bytes (in version 1: compact strings and arrays, a varint of the length + 1, and a tagged-field
section after each partition entry and at the end: a varint count, then per field its tag, its
size and its bytes). Kafka's own broker reads these records, and odradek
reads Kafka's.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from odradek.coordinator.group.records import (
    RecordFormatError,
    RecordReader,
    encode_uvarint,
    java_string_hash,
    kafka_abs,
)

TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 0
_NEXT_PRODUCER_ID_TAG = 1


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids, as written in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's DescribeTransactions and ListTransactions use."""
        return _NAMES[self]


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}


@dataclass(frozen=True, slots=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    # Transaction version 2: the producer id this one becomes once the transaction completes
    # (its epochs exhausted), -1 if none.
    next_producer_id: int = -1


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _string(value: str) -> bytes:
    data = value.encode()
    if len(data) > 0x7FFF:
        raise RecordFormatError(f"string of {len(data)} bytes is too long for an int16 length")
    return _I16.pack(len(data)) + data


def encode_txn_key(transactional_id: str) -> bytes:
    return _I16.pack(TXN_KEY_VERSION) + _string(transactional_id)


def encode_txn_value(value: TxnValue) -> bytes:
    flexible = value.next_producer_id != -1
    out = bytearray()
    out += _I16.pack(1 if flexible else TXN_VALUE_VERSION)
    out += _I64.pack(value.producer_id)
    out += _I16.pack(value.producer_epoch)
    out += _I32.pack(value.timeout_ms)
    out += _I8.pack(int(value.state))
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(index)
    out += encode_uvarint(len(by_topic) + 1) if flexible else _I32.pack(len(by_topic))
    for topic, indexes in by_topic.items():
        if flexible:
            data = topic.encode()
            out += encode_uvarint(len(data) + 1) + data + encode_uvarint(len(indexes) + 1)
        else:
            out += _string(topic) + _I32.pack(len(indexes))
        for index in indexes:
            out += _I32.pack(index)
        if flexible:
            out += encode_uvarint(0)
    out += _I64.pack(value.last_update_ms)
    out += _I64.pack(value.start_ms)
    if flexible:
        out += encode_uvarint(1) + encode_uvarint(_NEXT_PRODUCER_ID_TAG) + encode_uvarint(8)
        out += _I64.pack(value.next_producer_id)
    return bytes(out)


class _Reader(RecordReader):
    """Both layouts of the value: classic, and (``flexible``) compact with tagged fields."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        super().__init__(data)
        self.flexible = flexible

    def length(self) -> int:
        """An array's length (-1 for null)."""
        length = self.uvarint() - 1 if self.flexible else self.int32()
        return self.bounded(length) if length > 0 else length

    def string(self) -> str:
        return self.required_compact_string() if self.flexible else super().string()

    def skip_tags(self) -> None:
        if self.flexible:
            super().skip_tags()

    def next_producer_id(self) -> int:
        """The last tagged-field section's NextProducerId (-1 when absent)."""
        found = -1
        if not self.flexible:
            return found
        for _ in range(self.bounded(self.uvarint(), 2)):
            tag = self.uvarint()
            size = self.uvarint()
            if tag == _NEXT_PRODUCER_ID_TAG and size == 8:
                found = self.int64()
            else:
                self.take(size)
        return found


def decode_txn_key(data: bytes) -> str:
    r = _Reader(data)
    version = r.int16()
    if version != TXN_KEY_VERSION:
        raise RecordFormatError(f"unknown transaction log key version {version}")
    return r.string()


def decode_txn_value(data: bytes) -> TxnValue:
    version = _Reader(data).int16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown transaction log value version {version}")
    r = _Reader(data, flexible=version >= 1)
    r.position = 2
    producer_id = r.int64()
    epoch = r.int16()
    timeout_ms = r.int32()
    try:
        state = TxnState(r.int8())
    except ValueError as e:
        raise RecordFormatError(str(e)) from None
    partitions: set[tuple[str, int]] = set()
    for _ in range(max(r.length(), 0)):
        topic = r.string()
        for _ in range(max(r.length(), 0)):
            partitions.add((topic, r.int32()))
        r.skip_tags()
    last_update_ms = r.int64()
    start_ms = r.int64()
    return TxnValue(
        producer_id,
        epoch,
        timeout_ms,
        state,
        frozenset(partitions),
        last_update_ms,
        start_ms,
        r.next_producer_id(),
    )


def txn_partition_for(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of ``transactional_id``, as Kafka picks it."""
    return kafka_abs(java_string_hash(transactional_id)) % partitions
