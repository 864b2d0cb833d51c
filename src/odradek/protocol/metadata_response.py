"""Metadata responses (v0-v12) written by hand.

kio writes a response through validated entity objects, several function calls per field: a
Metadata answer for 20,000 partitions took over a second of the event loop that way, and clients
ask for one after each topic change. This writer takes the handler's plain values. Field order
follows MetadataResponse.json: v1 added the controller id, the brokers' racks and is_internal; v2
the cluster id; v3 the throttle time; v5 the offline replicas; v7 the leader epoch; v8 the
authorized operations (the cluster's until v10); v9 is the first flexible version (compact strings
and arrays, tagged-field sections, response header v1); v10 added the topic id; v12 made a
topic's name nullable.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.protocol.fetch_response import uvarint
from odradek.protocol.framing import fill_size_prefix

MIN_VERSION = 0
MAX_VERSION = 12
FIRST_FLEXIBLE_VERSION = 9
NO_OPERATIONS = -(2**31)

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_CORRELATION_FLEXIBLE = struct.Struct(">ib")  # correlation id, no header tags
# error code, partition index, leader id (+ leader epoch from v7)
_PARTITION = struct.Struct(">hii")
_PARTITION_EPOCH = struct.Struct(">hiii")
_NO_TOPIC_ID = bytes(16)


def _string(out: bytearray, value: str | None, flexible: bool) -> None:
    if value is None:
        out += b"\0" if flexible else _INT16.pack(-1)
        return
    data = value.encode()
    out += uvarint(len(data) + 1) if flexible else _INT16.pack(len(data))
    out += data


def _length(out: bytearray, length: int, flexible: bool) -> None:
    out += uvarint(length + 1) if flexible else _INT32.pack(length)


def _int32s(values: Sequence[int], flexible: bool) -> bytes:
    count = len(values)
    head = uvarint(count + 1) if flexible else _INT32.pack(count)
    return head + struct.pack(f">{count}i", *values) if count else head


def encode(
    version: int,
    correlation_id: int,
    *,
    brokers: Sequence[Mapping[str, Any]],
    cluster_id: str | None,
    controller_id: int,
    topics: Sequence[Mapping[str, Any] | bytes],
    throttle_time_ms: int = 0,
    cluster_authorized_operations: int = NO_OPERATIONS,
) -> bytes:
    """The whole frame, length prefix included. A broker is a mapping with ``node_id``,
    ``host``, ``port`` and ``rack``; a topic one with ``error_code``, ``name``, ``partitions``
    and optionally ``topic_id``, ``is_internal`` and ``topic_authorized_operations`` (or that
    topic as :func:`encode_topic` wrote it for this version); a partition one with
    ``error_code``, ``partition_index``, ``leader_id``, ``leader_epoch``, ``replica_nodes``,
    ``isr_nodes`` and ``offline_replicas``. Values are not checked: the handler writes them
    from the broker's own state."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"metadata response version {version} is not written here")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    tags = b"\0" if flexible else b""
    out = bytearray(b"\0\0\0\0")
    out += (
        _CORRELATION_FLEXIBLE.pack(correlation_id, 0) if flexible else _INT32.pack(correlation_id)
    )
    if version >= 3:
        out += _INT32.pack(throttle_time_ms)
    _length(out, len(brokers), flexible)
    for broker in brokers:
        out += _INT32.pack(broker["node_id"])
        _string(out, broker["host"], flexible)
        out += _INT32.pack(broker["port"])
        if version >= 1:
            _string(out, broker["rack"], flexible)
        out += tags
    if version >= 2:
        _string(out, cluster_id, flexible)
    if version >= 1:
        out += _INT32.pack(controller_id)
    _length(out, len(topics), flexible)
    for topic in topics:
        out += topic if isinstance(topic, bytes) else encode_topic(version, topic)
    if 8 <= version <= 10:
        out += _INT32.pack(cluster_authorized_operations)
    out += tags
    fill_size_prefix(out)
    return bytes(out)


def encode_topic(version: int, topic: Mapping[str, Any]) -> bytes:
    """One topic of a Metadata response of ``version`` (see :func:`encode`)."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    tags = b"\0" if flexible else b""
    with_epoch = version >= 7
    with_offline = version >= 5
    out = bytearray(_INT16.pack(topic["error_code"]))
    _string(out, topic["name"], flexible)
    if version >= 10:
        topic_id: uuid.UUID | None = topic.get("topic_id")
        out += _NO_TOPIC_ID if topic_id is None else topic_id.bytes
    if version >= 1:
        out += b"\1" if topic.get("is_internal", False) else b"\0"
    partitions = topic["partitions"]
    _length(out, len(partitions), flexible)
    node_lists: dict[tuple[Sequence[int], Sequence[int], Sequence[int]], bytes] = {}
    for p in partitions:
        if with_epoch:
            out += _PARTITION_EPOCH.pack(
                p["error_code"], p["partition_index"], p["leader_id"], p["leader_epoch"]
            )
        else:
            out += _PARTITION.pack(p["error_code"], p["partition_index"], p["leader_id"])
        # Partitions share a few replica lists: each is encoded once per topic.
        key = (
            tuple(p["replica_nodes"]),
            tuple(p["isr_nodes"]),
            tuple(p["offline_replicas"]) if with_offline else (),
        )
        nodes = node_lists.get(key)
        if nodes is None:
            nodes = _int32s(key[0], flexible) + _int32s(key[1], flexible)
            if with_offline:
                nodes += _int32s(key[2], flexible)
            nodes = node_lists[key] = nodes + tags
        out += nodes
    if version >= 8:
        out += _INT32.pack(topic.get("topic_authorized_operations", NO_OPERATIONS))
    out += tags
    return bytes(out)


class EncodedTopics:
    """Topics as :func:`encode_topic` wrote them, for as long as what they were written from
    stays the same: clients ask for the same topics again and again (librdkafka, starting on
    many topics, asks for every topic it knows each time it learns of one), and a topic's
    answer costs a few microseconds per partition to write.  Keyed by version and topic; each
    entry holds the ``state`` (any value that, compared equal, gives the same bytes) it was
    written for.  At most ``capacity`` entries, the oldest dropped first."""

    def __init__(self, capacity: int = 8192) -> None:
        self.capacity = capacity
        self._entries: dict[tuple[int, str, uuid.UUID | None], tuple[object, bytes]] = {}

    def get(
        self, version: int, name: str, topic_id: uuid.UUID | None, state: object
    ) -> bytes | None:
        entry = self._entries.get((version, name, topic_id))
        if entry is None or entry[0] != state:
            return None
        return entry[1]

    def put(
        self, version: int, name: str, topic_id: uuid.UUID | None, state: object, data: bytes
    ) -> None:
        entries = self._entries
        key = (version, name, topic_id)
        entries.pop(key, None)
        if len(entries) >= self.capacity:
            del entries[next(iter(entries))]
        entries[key] = (state, data)
