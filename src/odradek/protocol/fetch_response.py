"""Fetch responses (v0-v12) written by hand around record slices, so records can go by sendfile;
a follower's Fetch v12 answer read by hand.

kio would copy every partition's records into one buffer; here the frame is a list of parts —
``bytes`` for everything Kafka's schema puts around the records, and the caller's opaque record
slices in between — plus its total length. Field order follows FetchResponse.json; v12 is the
first flexible version (compact strings and arrays, tagged-field sections). Before v4 a partition
has no last stable offset, log start offset nor aborted transactions, and v0 no throttle time.

Reading, kio would copy each partition's records out of the frame into bytes of their own (a
follower's fetch brings a megabyte a partition, and the copies were a fifth of its round's CPU);
:func:`decode_fetch_v12` hands them out as views of the frame instead (the follower fetcher and
the data client read their answers with it).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from odradek.protocol.bounds import BoundedReader, MalformedRequest
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
    # The size prefix goes with the head after it: one send rather than a 4-byte one first
    # (a segment of its own, and a wake-up of the reader, on a TCP_NODELAY socket).
    first = parts[0]
    assert isinstance(first, bytes)
    parts[0] = size_prefix(size) + first
    return parts, size + 4


# v12 partition: index, error, high watermark, last stable offset, log start offset
_FETCHED_HEAD = struct.Struct(">ihqqq")
_ABORTED_V12_SIZE = _ABORTED.size + 1  # and its tagged fields (at the least)
_FETCHED_MIN_SIZE = _FETCHED_HEAD.size + 1 + 4 + 1 + 1  # aborted, replica, records, tags


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch v12 answer as a reader uses it. ``records`` is a view of the
    response frame (None for none); ``aborted_transactions`` (producer id, first offset)."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[tuple[int, int], ...]
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class FetchedTopic:
    topic: str
    partitions: list[FetchedPartition]


@dataclass(frozen=True, slots=True)
class FetchedResponse:
    """A Fetch v12 answer, with the attribute names of kio's ``FetchResponse``."""

    correlation_id: int
    error_code: int
    session_id: int
    responses: list[FetchedTopic]


def decode_fetch_v12(frame: bytes | bytearray | memoryview) -> FetchedResponse:
    """A Fetch v12 response frame (response header v1 and body, no size prefix), read in place:
    records stay views of the frame. Every length and count is checked against the bytes left
    before it is used; :class:`~odradek.protocol.bounds.MalformedRequest` for a frame that does
    not hold what it claims. Tagged fields (diverging epoch, current leader, snapshot id) are
    skipped: a follower finds its divergence with OffsetForLeaderEpoch."""
    reader = BoundedReader(frame)
    correlation_id = reader.int32()
    reader.skip_tagged_fields()
    reader.int32()  # throttle time
    error_code = reader.int16()
    session_id = reader.int32()
    topics: list[FetchedTopic] = []
    for _ in range(reader.array_length(True, 3)):
        name = reader.compact_nullable_string()
        if name is None:
            raise MalformedRequest("a null topic name in a Fetch response")
        partitions: list[FetchedPartition] = []
        for _ in range(reader.array_length(True, _FETCHED_MIN_SIZE)):
            index, error, high_watermark, stable, log_start = reader.unpack(_FETCHED_HEAD)
            aborted: tuple[tuple[int, int], ...] = ()
            count = reader.uvarint() - 1  # nullable: -1 is null
            if count > 0:
                if count * _ABORTED_V12_SIZE > reader.end - reader.position:
                    raise MalformedRequest(
                        f"{count} aborted transactions claimed with "
                        f"{reader.end - reader.position} bytes left"
                    )
                entries = []
                for _ in range(count):
                    producer_id, first_offset = reader.unpack(_ABORTED)
                    entries.append((producer_id, first_offset))
                    reader.skip_tagged_fields()
                aborted = tuple(entries)
            reader.int32()  # preferred read replica
            size = reader.uvarint() - 1
            records = None if size <= 0 else reader.slice(size)
            reader.skip_tagged_fields()
            partitions.append(
                FetchedPartition(index, error, high_watermark, stable, log_start, aborted, records)
            )
        reader.skip_tagged_fields()
        topics.append(FetchedTopic(name, partitions))
    reader.skip_tagged_fields()
    if reader.position != reader.end:
        raise MalformedRequest(
            f"{reader.end - reader.position} bytes after the end of a Fetch response"
        )
    return FetchedResponse(correlation_id, error_code, session_id, topics)
