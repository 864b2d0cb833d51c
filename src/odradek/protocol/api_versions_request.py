"""ApiVersions requests of every version served, v5 included, which kio lacks.

Version 5 (KIP-1242, Kafka 4.4) adds the cluster id and node id a client expects of the broker it
dialled, so that a connection DNS or a load balancer sent to another broker or cluster is refused
before anything else is said on it; Kafka 4.4's clients send it on every connection. Its layout
is v4's with the two fields before the tagged-field section: request header v2 (int16-length
client id, tagged fields), compact strings client software name and version, compact nullable
string cluster id, int32 node id (-1: none), tagged fields. Its response is v4's byte for byte.
Versions 0-4 are read by kio. Pure functions on bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.bounds import BoundedReader, MalformedRequest
from odradek.protocol.messages import RequestHeader, decode_request, peek_header

API_KEY = 18
# The first version kio has no schema of; its response is written in v4's.
FIRST_HAND_READ_VERSION = 5
RESPONSE_VERSION_OF_V5 = 4
NO_NODE = -1
_HEADER_PREFIX_SIZE = 8  # api key, api version, correlation id


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    """The fields of an ApiVersions request, under kio's names; those a version lacks have
    Kafka's defaults."""

    client_software_name: str = ""
    client_software_version: str = ""
    cluster_id: str | None = None
    node_id: int = NO_NODE


def decode_api_versions_request(
    frame: bytes | memoryview,
) -> tuple[RequestHeader, ApiVersionsRequest]:
    """Parse a whole ApiVersions request frame (without its length prefix). Raises
    :class:`odradek.protocol.messages.MalformedRequest` when it does not hold what its version
    needs."""
    api_key, version, correlation_id = peek_header(frame)
    if version < FIRST_HAND_READ_VERSION:
        header, body = decode_request(memoryview(frame).toreadonly())
        return header, ApiVersionsRequest(
            str(getattr(body, "client_software_name", "")),
            str(getattr(body, "client_software_version", "")),
        )
    if api_key != API_KEY:
        raise MalformedRequest(f"API key {api_key} is not ApiVersions")
    reader = BoundedReader(frame)
    reader.take(_HEADER_PREFIX_SIZE)
    # Even header v2 keeps client_id a non-compact string, for older brokers' sake.
    client_id = reader.nullable_string()
    reader.skip_tagged_fields()
    name = reader.compact_nullable_string()
    software_version = reader.compact_nullable_string()
    if name is None or software_version is None:
        raise MalformedRequest("a null client software name or version")
    cluster_id = reader.compact_nullable_string()
    node_id = reader.int32()
    reader.skip_tagged_fields()
    return (
        RequestHeader(api_key, version, correlation_id, client_id),
        ApiVersionsRequest(name, software_version, cluster_id, node_id),
    )
