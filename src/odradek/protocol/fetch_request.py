"""Fetch requests: v0-v3 read by hand, v4 and later by kio.

kio carries only Kafka 4's Fetch versions (v4+). The versions before KIP-98 differ from v4 only
by fields they lack (v3 added ``max_bytes``, KIP-74; v4 ``isolation_level``), so they are read
into objects with the attribute names of kio's ``FetchRequest`` and the defaults Kafka gives the
missing fields (FetchRequest.json of Kafka 3.9): the handler reads every version alike.
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass
from typing import Any

from odradek.protocol.messages import RequestHeader, decode_request, peek_header
from odradek.protocol.produce_request import MalformedProduceRequest, _Reader

API_KEY = 1
FIRST_KIO_VERSION = 4
MAX_BYTES_DEFAULT = 0x7FFFFFFF

_HEADER_PREFIX_SIZE = 8  # api key, api version, correlation id
_PARTITION = struct.Struct(">iqi")  # partition, fetch offset, partition max bytes
_REQUEST = struct.Struct(">iii")  # replica id, max wait ms, min bytes
_TOPIC_MIN_SIZE = 6  # name length, partition count


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
        raise MalformedProduceRequest(f"API key {api_key} version {version} is not read here")
    reader = _Reader(frame)
    reader.take(_HEADER_PREFIX_SIZE)
    client_id = reader.nullable_string()
    replica_id, max_wait_ms, min_bytes = reader.unpack(_REQUEST)
    max_bytes = reader.int32() if version >= 3 else MAX_BYTES_DEFAULT
    topics = []
    for _ in range(reader.array_length(False, _TOPIC_MIN_SIZE)):
        name = reader.nullable_string()
        if name is None:
            raise MalformedProduceRequest("null topic name")
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
