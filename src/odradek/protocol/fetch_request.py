"""Fetch requests: v0-v3 read by hand, v4 and later by kio; a follower's Fetch v12 written by hand.

kio carries only Kafka 4's Fetch versions (v4+). The versions before KIP-98 differ from v4 only
by fields they lack (v3 added ``max_bytes``, KIP-74; v4 ``isolation_level``), so they are read
into objects with the attribute names of kio's ``FetchRequest`` and the defaults Kafka gives the
missing fields (FetchRequest.json of Kafka 3.9): the handler reads every version alike.

A follower sends a Fetch for every batch it copies, so :func:`encode_replica_fetch` writes its
v12 frame directly (kio's building and writing of the dataclasses cost more than the rest of a
follower's round), byte for byte what kio writes for the same fields.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.protocol.bounds import BoundedReader, MalformedRequest
from odradek.protocol.fetch_response import uvarint
from odradek.protocol.messages import RequestHeader, decode_request, peek_header

API_KEY = 1
FIRST_KIO_VERSION = 4
MAX_BYTES_DEFAULT = 0x7FFFFFFF

_HEADER_PREFIX_SIZE = 8  # api key, api version, correlation id
_PARTITION = struct.Struct(">iqi")  # partition, fetch offset, partition max bytes
_REQUEST = struct.Struct(">iii")  # replica id, max wait ms, min bytes
_TOPIC_MIN_SIZE = 6  # name length, partition count
REPLICA_FETCH_VERSION = 12  # the last with topics by name and replica_id in the body (v15 moved it)
# Fetch v12, header v2 (size prefix, key, version, correlation id, client id, no tagged fields).
_FRAME_HEAD = struct.Struct(">ihhih")
# replica id, max wait ms, min bytes, max bytes, isolation level, session id, session epoch
_REPLICA_REQUEST = struct.Struct(">iiiibii")
# partition, current leader epoch, fetch offset, last fetched epoch, log start offset,
# partition max bytes, no tagged fields
_REPLICA_PARTITION = struct.Struct(">iiqiqib")
_NO_LAST_FETCHED_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ReplicaFetchPartition:
    """What a follower asks of one partition."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int


def encode_replica_fetch(
    correlation_id: int,
    client_id: str,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    topics: list[tuple[str, list[ReplicaFetchPartition]]],
    *,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: Sequence[tuple[str, Sequence[int]]] = (),
) -> bytes:
    """A follower's Fetch v12 frame (size prefix included): read_uncommitted (a follower reads
    to the log end whatever it asks), no rack; without a fetch session unless told, else with
    the partitions ``forgotten`` (topic, indexes) leaving it."""
    client = client_id.encode()
    out = bytearray(_FRAME_HEAD.size)
    out += client
    out += b"\0"  # the header's tagged fields
    out += _REPLICA_REQUEST.pack(
        replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch
    )
    out += uvarint(len(topics) + 1)
    pack = _REPLICA_PARTITION.pack
    for name, partitions in topics:
        encoded = name.encode()
        out += uvarint(len(encoded) + 1)
        out += encoded
        out += uvarint(len(partitions) + 1)
        for p in partitions:
            out += pack(
                p.partition,
                p.current_leader_epoch,
                p.fetch_offset,
                _NO_LAST_FETCHED_EPOCH,
                p.log_start_offset,
                p.partition_max_bytes,
                0,
            )
        out += b"\0"  # the topic's tagged fields
    out += uvarint(len(forgotten) + 1)
    for name, indexes in forgotten:
        encoded = name.encode()
        out += uvarint(len(encoded) + 1)
        out += encoded
        out += uvarint(len(indexes) + 1)
        out += struct.pack(f">{len(indexes)}i", *indexes)
        out += b"\0"  # the forgotten topic's tagged fields
    out += b"\1"  # rack id: empty
    out += b"\0"  # the body's tagged fields
    _FRAME_HEAD.pack_into(
        out, 0, len(out) - 4, API_KEY, REPLICA_FETCH_VERSION, correlation_id, len(client)
    )
    return bytes(out)


@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchTopic:
    topic: str
    partitions: tuple[FetchPartition, ...]


@dataclass(frozen=True, slots=True)
class OldFetchRequest:
    """A Fetch v0-v3 request under kio's field names."""

    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    topics: tuple[FetchTopic, ...]
    isolation_level: int = 0  # read_uncommitted: the only reading before v4


def decode_fetch_request(frame: memoryview) -> tuple[RequestHeader, Any]:
    """Parse a whole Fetch request frame (without its length prefix) of any served version."""
    api_key, version, correlation_id = peek_header(frame)
    if version >= FIRST_KIO_VERSION:
        return decode_request(frame.toreadonly())
    if api_key != API_KEY or version < 0:
        raise MalformedRequest(f"API key {api_key} version {version} is not read here")
    reader = BoundedReader(frame)
    reader.take(_HEADER_PREFIX_SIZE)
    client_id = reader.nullable_string()
    replica_id, max_wait_ms, min_bytes = reader.unpack(_REQUEST)
    max_bytes = reader.int32() if version >= 3 else MAX_BYTES_DEFAULT
    topics = []
    for _ in range(reader.array_length(False, _TOPIC_MIN_SIZE)):
        name = reader.nullable_string()
        if name is None:
            raise MalformedRequest("null topic name")
        partitions = tuple(
            FetchPartition(*map(int, reader.unpack(_PARTITION)))
            for _ in range(reader.array_length(False, _PARTITION.size))
        )
        topics.append(FetchTopic(name, partitions))
    request = OldFetchRequest(
        int(replica_id),
        datetime.timedelta(milliseconds=int(max_wait_ms)),
        int(min_bytes),
        max_bytes,
        tuple(topics),
    )
    return RequestHeader(api_key, version, correlation_id, client_id), request
