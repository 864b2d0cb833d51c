"""ControlledShutdown (API key 7) requests and responses, v0-v3, written and read by hand.

kio carries no schema for this ZooKeeper-era API: a broker that stops sends it to the controller,
which moves the broker's leaderships away and answers the partitions it still leads. Layouts
after Kafka 3.x's ControlledShutdownRequest.json / ControlledShutdownResponse.json:

    request   broker_id int32 | broker_epoch int64 (v2+; -1 when unknown)
    response  error_code int16 | remaining_partitions [topic_name string, partition_index int32]

v3 is the flexible version: compact array and string lengths (unsigned varint of length + 1)
and a tagged-field section closing each structure (none are defined; unknown ones are skipped).
The request header is Kafka's v0 for request v0 (api key, version, correlation id, without the
client id every other header has), v1 for v1-v2, v2 for v3 (client id kept a non-compact
string, then tagged fields); the response header is v0 up to v2 and v1 (tagged fields) for v3.
``broker_epoch`` is ignorable: v0 and v1 drop it. Pure functions on bytes, no I/O.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from odradek.protocol.bounds import BoundedReader, MalformedRequest
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_response import uvarint
from odradek.protocol.framing import framed
from odradek.protocol.messages import RequestHeader, peek_header

API_KEY = 7
MIN_VERSION = 0
MAX_VERSION = 3
FIRST_FLEXIBLE_VERSION = 3
FIRST_BROKER_EPOCH_VERSION = 2
UNKNOWN_BROKER_EPOCH = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_HEADER_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id
_NO_TAGS = b"\0"


class MalformedControlledShutdown(MalformedRequest):
    """Bytes that are not a ControlledShutdown message of the version named."""


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int = UNKNOWN_BROKER_EPOCH


@dataclass(frozen=True, slots=True)
class RemainingPartition:
    topic_name: str
    partition_index: int


@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    error_code: ErrorCode
    remaining_partitions: tuple[RemainingPartition, ...] = ()


def request_header_version(version: int) -> int:
    _check_version(version)
    if version == 0:
        return 0
    return 2 if version >= FIRST_FLEXIBLE_VERSION else 1


def response_header_version(version: int) -> int:
    _check_version(version)
    return 1 if version >= FIRST_FLEXIBLE_VERSION else 0


def _check_version(version: int) -> None:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise MalformedControlledShutdown(f"ControlledShutdown version {version} is not v0-v3")


# -- bodies ----------------------------------------------------------------------------------------


def encode_request_body(version: int, request: ControlledShutdownRequest) -> bytes:
    _check_version(version)
    out = bytearray(_INT32.pack(request.broker_id))
    if version >= FIRST_BROKER_EPOCH_VERSION:
        out += _INT64.pack(request.broker_epoch)
    if version >= FIRST_FLEXIBLE_VERSION:
        out += _NO_TAGS
    return bytes(out)


def decode_request_body(
    version: int, data: bytes | bytearray | memoryview
) -> ControlledShutdownRequest:
    _check_version(version)
    with _malformed():
        return _read_request(BoundedReader(data), version)


def encode_response_body(version: int, response: ControlledShutdownResponse) -> bytes:
    _check_version(version)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(_INT16.pack(response.error_code))
    partitions = response.remaining_partitions
    out += uvarint(len(partitions) + 1) if flexible else _INT32.pack(len(partitions))
    for partition in partitions:
        name = partition.topic_name.encode()
        out += uvarint(len(name) + 1) if flexible else _INT16.pack(len(name))
        out += name
        out += _INT32.pack(partition.partition_index)
        if flexible:
            out += _NO_TAGS
    if flexible:
        out += _NO_TAGS
    return bytes(out)


def decode_response_body(
    version: int, data: bytes | bytearray | memoryview
) -> ControlledShutdownResponse:
    _check_version(version)
    with _malformed():
        return _read_response(BoundedReader(data), version)


# -- whole frames ----------------------------------------------------------------------------------


def encode_request(
    version: int, correlation_id: int, client_id: str | None, request: ControlledShutdownRequest
) -> bytes:
    """A whole request frame, length prefix included (a stopping broker's, to the controller)."""
    header = bytearray(_HEADER_PREFIX.pack(API_KEY, version, correlation_id))
    if request_header_version(version) >= 1:
        if client_id is None:
            header += _INT16.pack(-1)
        else:
            encoded = client_id.encode()
            header += _INT16.pack(len(encoded)) + encoded
    if request_header_version(version) >= 2:
        header += _NO_TAGS
    return framed(bytes(header) + encode_request_body(version, request))


def decode_request(
    frame: bytes | bytearray | memoryview,
) -> tuple[RequestHeader, ControlledShutdownRequest]:
    """Parse a whole request frame (without its length prefix); v0's header has no client id."""
    with _malformed():
        reader = BoundedReader(frame)
        reader.take(_HEADER_PREFIX.size)
        api_key, version, correlation_id = peek_header(reader.view)
        if api_key != API_KEY:
            raise MalformedControlledShutdown(f"API key {api_key} is not ControlledShutdown")
        header_version = request_header_version(version)
        client_id = reader.nullable_string() if header_version >= 1 else None
        if header_version >= 2:
            reader.skip_tagged_fields()
        request = _read_request(reader, version)
        return RequestHeader(api_key, version, correlation_id, client_id), request


def encode_response(
    version: int, correlation_id: int, response: ControlledShutdownResponse
) -> bytes:
    """A whole response frame, length prefix included."""
    header = _INT32.pack(correlation_id)
    if response_header_version(version) >= 1:
        header += _NO_TAGS
    return framed(header + encode_response_body(version, response))


def decode_response(
    version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, ControlledShutdownResponse]:
    """Correlation id and body of a response frame (without its length prefix)."""
    _check_version(version)
    with _malformed():
        reader = BoundedReader(frame)
        correlation_id = reader.int32()
        if response_header_version(version) >= 1:
            reader.skip_tagged_fields()
        return correlation_id, _read_response(reader, version)


# -- reading -----------------------------------------------------------------------------------


def _read_request(reader: BoundedReader, version: int) -> ControlledShutdownRequest:
    broker_id = reader.int32()
    broker_epoch = UNKNOWN_BROKER_EPOCH
    if version >= FIRST_BROKER_EPOCH_VERSION:
        (broker_epoch,) = reader.unpack(_INT64)
    if version >= FIRST_FLEXIBLE_VERSION:
        reader.skip_tagged_fields()
    return ControlledShutdownRequest(broker_id, int(broker_epoch))


def _read_response(reader: BoundedReader, version: int) -> ControlledShutdownResponse:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    code = reader.int16()
    try:
        error_code = ErrorCode(code)
    except ValueError:
        raise MalformedControlledShutdown(f"unknown error code {code}") from None
    partitions: list[RemainingPartition] = []
    for _ in range(reader.array_length(flexible)):
        name = reader.compact_nullable_string() if flexible else reader.nullable_string()
        if name is None:
            raise MalformedControlledShutdown("null topic name")
        partitions.append(RemainingPartition(name, reader.int32()))
        if flexible:
            reader.skip_tagged_fields()
    if flexible:
        reader.skip_tagged_fields()
    return ControlledShutdownResponse(error_code, tuple(partitions))


@contextlib.contextmanager
def _malformed() -> Iterator[None]:
    """The shared frame reader's errors, as this API's."""
    try:
        yield
    except MalformedRequest as e:
        raise MalformedControlledShutdown(str(e)) from e
