"""Produce requests (v0-v11) read by hand, so record sets stay views of the request frame.

kio copies each partition's ``records`` into a new ``bytes``; on the produce path that is a copy
of almost the whole request, and the broker then needs the batches writable anyway (it assigns
offsets by rewriting ``baseOffset`` in place). Here each ``records`` is a ``memoryview`` slice
of the frame: writable when the frame is (a connection's own receive buffer), read-only when it
is ``bytes``. Field order follows ProduceRequest.json and RequestHeader.json; v3 added
``transactional_id`` (v0-v2 carry message sets v0/v1, see :mod:`odradek.protocol.legacy`), v9 is
the first flexible version (header v2, compact strings, arrays and bytes, tagged-field sections).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.bounds import BoundedReader, MalformedRequest
from odradek.protocol.messages import RequestHeader, peek_header

API_KEY = 0
MIN_VERSION = 0
FIRST_RECORD_BATCH_VERSION = 3  # Produce v3+ carries RecordBatch v2 only
FIRST_ZSTD_VERSION = 7  # KIP-110
# v12 is v11 from a transaction version 2 producer: its partitions join the transaction by
# being produced to (KIP-890 part 2).
FIRST_IMPLICIT_ADD_VERSION = 12
MAX_VERSION = 12
FIRST_FLEXIBLE_VERSION = 9

_HEADER_PREFIX_SIZE = 8  # api key, api version, correlation id
_ACKS_TIMEOUT = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class TopicProduceData:
    name: str
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """The fields of kio's ``ProduceRequest`` the broker reads, under the same names."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...]


def _read_up_to_topics(
    reader: BoundedReader,
) -> tuple[tuple[int, int, int, str | None], str | None, int, int]:
    """The header (key, version, correlation id, client id), transactional id, acks and
    timeout of a Produce request frame."""
    reader.take(_HEADER_PREFIX_SIZE)
    api_key, version, correlation_id = peek_header(reader.view)
    if api_key != API_KEY or not MIN_VERSION <= version <= MAX_VERSION:
        raise MalformedRequest(f"API key {api_key} version {version} is not read here")
    # Even header v2 keeps client_id a non-compact string, for older brokers' sake.
    client_id = reader.nullable_string()
    if version >= FIRST_FLEXIBLE_VERSION:
        reader.skip_tagged_fields()
        transactional_id = reader.compact_nullable_string()
    elif version >= FIRST_RECORD_BATCH_VERSION:
        transactional_id = reader.nullable_string()
    else:
        transactional_id = None
    acks, timeout_ms = reader.unpack(_ACKS_TIMEOUT)
    return (api_key, version, correlation_id, client_id), transactional_id, acks, timeout_ms


def peek_acks(frame: bytes | bytearray | memoryview) -> int | None:
    """The acks of a Produce request frame (without its length prefix), read without the rest;
    None when the frame is no Produce request read here or ends before its acks (the decoder
    then says why)."""
    try:
        return int(_read_up_to_topics(BoundedReader(frame))[2])
    except (MalformedRequest, struct.error, ValueError, IndexError):
        return None


def decode_produce_request(
    frame: bytes | bytearray | memoryview,
) -> tuple[RequestHeader, ProduceRequest]:
    """Parse a whole Produce request frame (without its length prefix).

    Raises :class:`MalformedRequest` when the frame is not a Produce request of a version
    read here, or its fields do not fit the frame.
    """
    reader = BoundedReader(frame)
    header, transactional_id, acks, timeout_ms = _read_up_to_topics(reader)
    api_key, version, correlation_id, client_id = header
    flexible = version >= FIRST_FLEXIBLE_VERSION
    topics: list[TopicProduceData] = []
    for _ in range(reader.array_length(flexible)):
        name = reader.compact_nullable_string() if flexible else reader.nullable_string()
        if name is None:
            raise MalformedRequest("null topic name")
        partitions: list[PartitionProduceData] = []
        for _ in range(reader.array_length(flexible)):
            index = reader.int32()
            size = reader.uvarint() - 1 if flexible else reader.int32()
            records = None if size == -1 else reader.slice(size)
            partitions.append(PartitionProduceData(index, records))
            if flexible:
                reader.skip_tagged_fields()
        topics.append(TopicProduceData(name, tuple(partitions)))
        if flexible:
            reader.skip_tagged_fields()
    if flexible:
        reader.skip_tagged_fields()
    return (
        RequestHeader(api_key, version, correlation_id, client_id),
        ProduceRequest(transactional_id, int(acks), int(timeout_ms), tuple(topics)),
    )
