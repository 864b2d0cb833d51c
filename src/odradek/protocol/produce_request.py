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

from odradek.protocol.bounds import MalformedRequest
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
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


class MalformedProduceRequest(MalformedRequest):
    """The frame is not a whole request of the version its header names (the error of every
    reader built on this module's :class:`_Reader`, Produce's first)."""


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


class _Reader:
    """A cursor over a frame; every read checks that the frame holds the bytes it takes."""

    __slots__ = ("end", "position", "view")

    def __init__(self, frame: bytes | bytearray | memoryview) -> None:
        self.view = memoryview(frame).cast("B")
        self.position = 0
        self.end = len(self.view)

    def take(self, size: int) -> int:
        start = self.position
        if size < 0 or start + size > self.end:
            raise MalformedProduceRequest(
                f"a field of {size} bytes at byte {start} runs past the frame's {self.end}"
            )
        self.position = start + size
        return start

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        return layout.unpack_from(self.view, self.take(layout.size))

    def int16(self) -> int:
        return int(_INT16.unpack_from(self.view, self.take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack_from(self.view, self.take(4))[0])

    def uvarint(self) -> int:
        value = 0
        shift = 0
        while True:
            byte = self.view[self.take(1)]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise MalformedProduceRequest("unsigned varint longer than 5 bytes")

    def text(self, size: int) -> str:
        start = self.take(size)
        try:
            return str(self.view[start : start + size], "utf-8")
        except UnicodeDecodeError as e:
            raise MalformedProduceRequest(f"string is not UTF-8: {e}") from e

    def nullable_string(self) -> str | None:
        size = self.int16()
        return None if size == -1 else self.text(size)

    def compact_nullable_string(self) -> str | None:
        size = self.uvarint() - 1
        return None if size == -1 else self.text(size)

    def slice(self, size: int) -> memoryview:
        start = self.take(size)
        return self.view[start : start + size]

    def skip_tagged_fields(self) -> None:
        # Produce defines no tagged fields in v9-v11; unknown ones are skipped, as Kafka does.
        count = self.uvarint()
        if count * 2 > self.end - self.position:  # each takes a tag and a size at the least
            raise MalformedProduceRequest(
                f"{count} tagged fields claimed with {self.end - self.position} bytes left"
            )
        for _ in range(count):
            self.uvarint()
            self.take(self.uvarint())

    def array_length(self, flexible: bool, element_size: int = 1) -> int:
        """An array's element count, checked against the bytes left (each element takes
        ``element_size`` bytes at the least) before anyone loops over it, as Kafka checks it."""
        count = self.uvarint() - 1 if flexible else self.int32()
        if count < 0:
            raise MalformedProduceRequest(f"array length {count} where no null is allowed")
        if count * element_size > self.end - self.position:
            raise MalformedProduceRequest(
                f"array of {count} elements claimed with {self.end - self.position} bytes left"
            )
        return count


def _read_up_to_topics(
    reader: _Reader,
) -> tuple[tuple[int, int, int, str | None], str | None, int, int]:
    """The header (key, version, correlation id, client id), transactional id, acks and
    timeout of a Produce request frame."""
    reader.take(_HEADER_PREFIX_SIZE)
    api_key, version, correlation_id = peek_header(reader.view)
    if api_key != API_KEY or not MIN_VERSION <= version <= MAX_VERSION:
        raise MalformedProduceRequest(f"API key {api_key} version {version} is not read here")
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
        return int(_read_up_to_topics(_Reader(frame))[2])
    except (MalformedProduceRequest, struct.error, ValueError, IndexError):
        return None


def decode_produce_request(
    frame: bytes | bytearray | memoryview,
) -> tuple[RequestHeader, ProduceRequest]:
    """Parse a whole Produce request frame (without its length prefix).

    Raises :class:`MalformedProduceRequest` when the frame is not a Produce request of a version
    read here, or its fields do not fit the frame.
    """
    reader = _Reader(frame)
    header, transactional_id, acks, timeout_ms = _read_up_to_topics(reader)
    api_key, version, correlation_id, client_id = header
    flexible = version >= FIRST_FLEXIBLE_VERSION
    topics: list[TopicProduceData] = []
    for _ in range(reader.array_length(flexible)):
        name = reader.compact_nullable_string() if flexible else reader.nullable_string()
        if name is None:
            raise MalformedProduceRequest("null topic name")
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
