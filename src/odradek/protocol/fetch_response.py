"""Fetch responses (v0-v12) written by hand around record slices, so records can go by sendfile.

kio would copy every partition's records into one buffer; here the frame is a list of parts —
``bytes`` for everything Kafka's schema puts around the records, and the caller's opaque record
slices in between — plus its total length. Field order follows FetchResponse.json; v12 is the
first flexible version (compact strings and arrays, tagged-field sections). Before v4 a partition
has no last stable offset, log start offset nor aborted transactions, and v0 no throttle time.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from odradek.protocol.framing import size_prefix

S = TypeVar("S")

MAX_VERSION = 12
_PARTITION_HEAD = struct.Struct(">ihqqq")
_NO_REPLICA = b"\xff\xff\xff\xff"  # index, error, high watermark, last stable, log start
_ABORTED = struct.Struct(">qq")  # producer id, first offset


@dataclass(frozen=True, slots=True)
class PartitionData(Generic[S]):
    index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: S | None  # an opaque slice the writer sends, or None for no records
    records_size: int
    preferred_read_replica: int = -1  # KIP-392 (v11+): fetch from this replica instead
    # read_committed: (producer id, first offset) of aborted transactions in the records
    aborted_transactions: Sequence[tuple[int, int]] = ()


@dataclass(frozen=True, slots=True)
class TopicData(Generic[S]):
    name: str
    partitions: Sequence[PartitionData[S]]


def uvarint(value: int) -> bytes:
    """An unsigned varint, as flexible versions write lengths."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode(
    version: int,
    correlation_id: int,
    topics: Sequence[TopicData[S]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_time_ms: int = 0,
) -> tuple[list[bytes | S], int]:
    """Parts of the whole frame (length prefix included) and its total size in bytes."""
    if not 0 <= version <= MAX_VERSION:
        raise ValueError(f"fetch response version {version} is not written here")
    flexible = version >= 12
    parts: list[bytes | S] = []
    head = bytearray(struct.pack(">i", correlation_id))
    if flexible:
        head += b"\0"  # response header tagged fields
    if version >= 1:
        head += struct.pack(">i", throttle_time_ms)
    if version >= 7:
        head += struct.pack(">hi", error_code, session_id)
    head += uvarint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
    size = 0
    for topic in topics:
        name = topic.name.encode()
        head += (uvarint(len(name) + 1) if flexible else struct.pack(">h", len(name))) + name
        count = len(topic.partitions)
        head += uvarint(count + 1) if flexible else struct.pack(">i", count)
        for p in topic.partitions:
            head += _PARTITION_HEAD.pack(
                p.index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset
            )
            if version < 4:
                del head[-16:]  # lastStableOffset arrived in v4
            elif version < 5:
                del head[-8:]  # logStartOffset arrived in v5
            aborted = p.aborted_transactions
            if flexible:
                head += uvarint(len(aborted) + 1)
                for entry in aborted:
                    head += _ABORTED.pack(*entry) + b"\0"  # entry tagged fields
            elif version >= 4:
                head += struct.pack(">i", len(aborted))
                for entry in aborted:
                    head += _ABORTED.pack(*entry)
            if version >= 11:
                replica = p.preferred_read_replica
                head += _NO_REPLICA if replica < 0 else struct.pack(">i", replica)
            if flexible:
                head += uvarint(p.records_size + 1)
            else:
                head += struct.pack(">i", p.records_size)
            if p.records is not None and p.records_size:
                parts.append(bytes(head))
                size += len(head)
                head = bytearray()
                parts.append(p.records)
                size += p.records_size
            if flexible:
                head += b"\0"  # partition tagged fields
        if flexible:
            head += b"\0"  # topic tagged fields
    if flexible:
        head += b"\0"  # body tagged fields
    parts.append(bytes(head))
    size += len(head)
    parts.insert(0, size_prefix(size))
    return parts, size + 4
