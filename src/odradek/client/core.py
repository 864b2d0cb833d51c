"""The client's protocol core: Kafka's framing, correlation and version negotiation, with no I/O.

In the manner of h11, :class:`ClientCore` owns no socket. A shell hands it bytes as they arrive
(:meth:`~ClientCore.receive_data`, or :meth:`~ClientCore.get_buffer` and
:meth:`~ClientCore.buffer_updated` to read straight into its buffer) and takes out events
(:meth:`~ClientCore.next_event`); it asks the core for the bytes of a request
(:meth:`~ClientCore.send`, :meth:`~ClientCore.send_frame`) and writes them itself. Two shells use
it: :mod:`odradek.client.aio` (asyncio: the CLI, the admin client, the follower fetcher) and
:mod:`odradek.client.blocking` (plain sockets: Spark's executors, the bench).

What the core keeps:

- **correlation**: every request gets the next correlation id and joins the in-flight queue, so
  many can be on the wire at once (pipelining). Kafka answers a connection's requests in the order
  they were sent, so a response must answer the oldest request in flight; any other correlation
  id (out of order, or never sent) is a :class:`ProtocolError`. A Produce with acks=0 gets no
  answer, so it never joins the queue.
- **framing** (:class:`~odradek.protocol.framing.FrameReader`, the broker's framing too): the
  received stream is cut into frames at their 4-byte size prefixes, however the reads split
  them. Small frames are copied out of a reusable buffer; a large one is handed out as a
  read-only view of the buffer it was received into, which is then not reused (so records can
  stay views of it). A response past 64 MiB gets a buffer that grows with the bytes that arrive,
  not with the size announced.
- **decoding**: a response is decoded with kio at the version of its request, or handed back as
  its undecoded frame when the request asked for ``raw`` (for callers that parse it in place).
- **versions**: given the broker's ApiVersions answer, :meth:`~ClientCore.version_for` picks the
  highest version that the broker, kio and the caller all speak.

After a :class:`ProtocolError` the byte stream cannot be trusted: the core refuses further use
and the shell closes the connection, failing every request in flight.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any, NamedTuple

from kio.schema.index import api_key_map, schema_name_map

from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import SIZE, FrameReader, FrameSizeError
from odradek.protocol.messages import (
    RequestHeader,
    build,
    decode_response,
    encode_request,
    request_schema,
    response_schema,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
API_VERSIONS_VERSION = 3
SOFTWARE_NAME, SOFTWARE_VERSION = "odradek", "0.1.0"
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_FRAME_BYTES = 1 << 30

_INT32 = SIZE
_KEY_AND_VERSION = struct.Struct(">hh")
_INT16 = struct.Struct(">h")
_CORRELATION_AT = 8  # in a request frame: size prefix (4), api key (2), api version (2)
_FIRST_FLEXIBLE_PRODUCE = 9  # Produce v9 and later have flexible (v2) request headers

# Frames up to this size are copied out of the shared read buffer; larger ones get their own.
_SMALL_FRAME = 64 << 10
_BUFFER_BYTES = 256 << 10
_MIN_READ = 16 << 10
# A response up to this size gets its whole buffer as soon as its size prefix is read (the broker
# is trusted about sizes); a larger one, a buffer that grows as its bytes arrive. Kafka's default
# fetch.max.bytes (50 MiB) fits.
_TRUSTED_FRAME = 64 << 20


class ClientError(Exception):
    """The broker could not be reached, or answered something this client cannot use."""


class ConnectionFailed(ClientError):
    """The connection failed or broke: the broker is unreachable, closed it, went silent, or
    answered nonsense. The connection is unusable afterwards, and every request in flight on it
    fails; requests that are safe to repeat can be retried on a new one."""


class ProtocolError(ConnectionFailed):
    """The broker's bytes broke the protocol: a bad frame size, a correlation id that does not
    answer the oldest request in flight, a response kio cannot decode."""


class RequestTimeout(ClientError):
    """No answer came in time. The request is abandoned (its answer, if it comes, is dropped);
    the connection stays usable."""


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``, or a bare host) → (host, port)."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit():
        return address.strip().strip("[]"), default_port
    return host.strip("[]") or "127.0.0.1", int(port)


class Request(NamedTuple):
    """A request the core framed (or was told of); its answer is a :class:`Response`.

    (Named tuples rather than frozen dataclasses: one of each per request, and a frozen
    dataclass costs three times as much to make, which shows in the bench's load generator.)
    """

    correlation_id: int
    api_key: int
    version: int
    raw: bool = False  # hand back the frame undecoded
    expects_response: bool = True  # False for a Produce with acks=0


class Response(NamedTuple):
    """The answer to ``request``: its decoded ``body`` (None for a raw request) and its
    ``frame`` (response header and body, without the size prefix)."""

    request: Request
    body: Any
    frame: bytes | memoryview


@cache
def kio_versions(api_key: int) -> tuple[int, int] | None:
    """The versions of ``api_key`` kio has schemas for, lowest and highest."""
    name = api_key_map.get(api_key)
    versions = schema_name_map.get(name, {}) if name is not None else {}
    return (min(versions), max(versions)) if versions else None


def request_frame(
    api_key: int,
    version: int,
    fields: Mapping[str, Any],
    *,
    client_id: str | None = "odradek",
    correlation_id: int = 0,
) -> bytes:
    """A whole request frame (size prefix included) built from version-independent ``fields``:
    for a hot path that builds a frame once and sends it with :meth:`ClientCore.send_frame`."""
    try:
        schema = request_schema(api_key, version)
    except Exception as e:  # kio's UnknownAPIKey / UnknownEntity
        raise ClientError(f"kio has no API key {api_key} version {version}") from e
    return encode_request(
        RequestHeader(api_key, version, correlation_id, client_id), build(schema, fields)
    )


def read_uvarint(buf: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """An unsigned varint at ``position``: its value and the position after it."""
    value = 0
    shift = 0
    while True:
        b = buf[position]
        position += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, position
        shift += 7
        if shift > 35:
            raise ValueError("unsigned varint longer than 5 bytes")


def skip_tagged_fields(buf: bytes | bytearray | memoryview, position: int) -> int:
    """The position after a tagged-fields section starting at ``position``."""
    count, position = read_uvarint(buf, position)
    for _ in range(count):
        _, position = read_uvarint(buf, position)
        size, position = read_uvarint(buf, position)
        position += size
    return position


def produce_acks(frame: bytes | bytearray | memoryview) -> int:
    """The acks of a Produce request frame (size prefix included), read in place.

    Produce v3..v8 have a v1 request header and a plain ``transactional_id``; v9 on, a v2 header
    (tagged fields after the client id) and a compact one. ``acks`` follows it.
    """
    (version,) = _INT16.unpack_from(frame, 6)
    (size,) = _INT16.unpack_from(frame, 12)  # client id: always a plain nullable string
    position = 14 + max(size, 0)
    if version >= _FIRST_FLEXIBLE_PRODUCE:
        if frame[position] == 0 and frame[position + 1] == 0:
            # The usual frame, read fast: no tagged fields, no transactional id.
            return int(_INT16.unpack_from(frame, position + 2)[0])
        position = skip_tagged_fields(frame, position)
        size, position = read_uvarint(frame, position)  # compact: length + 1, 0 for null
        position += max(size - 1, 0)
    else:
        (size,) = _INT16.unpack_from(frame, position)
        position += 2 + max(size, 0)
    return int(_INT16.unpack_from(frame, position)[0])


class ClientCore:
    """The protocol state of one client connection to one broker. Not thread-safe.

    ``client_versions`` narrows, per API key, the versions the caller's code is written for
    (lowest, highest); keys it does not name may use any version kio knows.
    """

    def __init__(
        self,
        client_id: str | None = "odradek",
        *,
        client_versions: Mapping[int, tuple[int, int]] | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        first_correlation_id: int = 1,
    ) -> None:
        self.client_id = client_id
        self.client_versions = dict(client_versions or {})
        self.max_frame_bytes = max_frame_bytes
        self.broker_versions: dict[int, tuple[int, int]] | None = None
        self._next_correlation_id = first_correlation_id & 0x7FFFFFFF
        self._in_flight: deque[Request] = deque()
        self._abandoned: set[Request] = set()
        self._broken: ClientError | None = None
        self._reader = FrameReader(
            max_frame_bytes,
            min_size=4,  # a correlation id
            copy_below=_SMALL_FRAME,
            min_buffer=_BUFFER_BYTES,
            max_buffer=_BUFFER_BYTES,
            min_read=_MIN_READ,
            trusted=_TRUSTED_FRAME,
        )

    # -- state ---------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered (abandoned ones included until their answer)."""
        return len(self._in_flight)

    @property
    def buffered(self) -> bool:
        """Whether bytes were received that no event or frame has handed out yet."""
        return bool(self._reader.frames) or self._reader.partial > 0

    def requests_in_flight(self) -> tuple[Request, ...]:
        return tuple(r for r in self._in_flight if r not in self._abandoned)

    def close(self, error: ClientError | None = None) -> list[Request]:
        """The connection is gone: refuse further use; the requests that got no answer (not
        counting abandoned ones), for the shell to fail."""
        if self._broken is None:
            self._broken = error or ConnectionFailed("the connection is closed")
        unanswered = [r for r in self._in_flight if r not in self._abandoned]
        self._in_flight.clear()
        self._abandoned.clear()
        self._reader.clear()
        return unanswered

    @property
    def closed(self) -> bool:
        return self._broken is not None

    def _check_open(self) -> None:
        if self._broken is not None:
            raise self._broken

    # -- versions ------------------------------------------------------------------------------

    def versions_request(self) -> tuple[Request, bytes]:
        """The ApiVersions request that starts a connection; pass its response's body to
        :meth:`accept_versions`."""
        return self.send(
            API_VERSIONS,
            {"client_software_name": SOFTWARE_NAME, "client_software_version": SOFTWARE_VERSION},
            version=API_VERSIONS_VERSION,
        )

    def accept_versions(self, body: Any) -> None:
        """Learn the versions the broker serves from its ApiVersions response."""
        if body.error_code != ErrorCode.none:
            raise ClientError(f"ApiVersions failed: {ErrorCode(body.error_code).name}")
        self.broker_versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys
        }

    def version_for(
        self, api_key: int, highest: int | None = None, lowest: int | None = None
    ) -> int:
        """The version to speak: the highest that the broker, kio, :attr:`client_versions` and
        the caller's ``lowest..highest`` all allow."""
        if self.broker_versions is None:
            raise ClientError("the broker's API versions are not known yet (no ApiVersions)")
        broker = self.broker_versions.get(api_key)
        if broker is None:
            raise ClientError(f"the broker does not speak API key {api_key}")
        ours = kio_versions(api_key)
        if ours is None:
            raise ClientError(f"the client does not speak API key {api_key}")
        low, high = ours
        if api_key in self.client_versions:
            table_low, table_high = self.client_versions[api_key]
            low, high = max(low, table_low), min(high, table_high)
        if lowest is not None:
            low = max(low, lowest)
        if highest is not None:
            high = min(high, highest)
        version = min(high, broker[1])
        if version < max(low, broker[0]):
            raise ClientError(
                f"no common version of API key {api_key}: broker {broker[0]}..{broker[1]}, "
                f"client {low}..{high}"
            )
        return version

    # -- sending -------------------------------------------------------------------------------

    def send(
        self,
        api_key: int,
        fields: Mapping[str, Any],
        *,
        version: int | None = None,
        highest: int | None = None,
        lowest: int | None = None,
        raw: bool = False,
    ) -> tuple[Request, bytes]:
        """A request built from version-independent ``fields``, in ``version`` or else the best
        common one within ``lowest..highest``: the request to wait for and the bytes to write."""
        self._check_open()
        if version is None:
            version = self.version_for(api_key, highest, lowest)
        correlation_id = self._take_correlation_id()
        frame = request_frame(
            api_key, version, fields, client_id=self.client_id, correlation_id=correlation_id
        )
        expects_response = api_key != PRODUCE or produce_acks(frame) != 0
        return self._track(Request(correlation_id, api_key, version, raw, expects_response)), frame

    def send_frame(self, frame: bytes | bytearray, *, raw: bool = False) -> tuple[Request, bytes]:
        """An already-encoded request frame (size prefix included), for hand-built hot paths:
        its correlation id is replaced by the next one (in place when ``frame`` is a
        bytearray, which can then be sent again and again). The request and the bytes to
        write."""
        # The bench's hot path: kept to a few calls.
        if self._broken is not None:
            raise self._broken
        buffer = frame if isinstance(frame, bytearray) else bytearray(frame)
        if len(buffer) < 14 or _INT32.unpack_from(buffer, 0)[0] != len(buffer) - 4:
            raise ValueError("not a request frame with its size prefix")
        api_key, version = _KEY_AND_VERSION.unpack_from(buffer, 4)
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        _INT32.pack_into(buffer, _CORRELATION_AT, correlation_id)
        if api_key == PRODUCE and produce_acks(buffer) == 0:
            return Request(correlation_id, api_key, version, raw, False), bytes(buffer)
        request = Request(correlation_id, api_key, version, raw)
        self._in_flight.append(request)
        return request, bytes(buffer)

    def expect(
        self, api_key: int, version: int, correlation_id: int, *, raw: bool = True
    ) -> Request:
        """A request the caller framed and sent itself (tests sending exact bytes): its answer
        is expected next after those already in flight."""
        self._check_open()
        return self._track(Request(correlation_id, api_key, version, raw))

    def abandon(self, request: Request) -> None:
        """Give up on the answer to ``request``: it is dropped when it comes."""
        if request in self._in_flight:
            self._abandoned.add(request)

    def _take_correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        return correlation_id

    def _track(self, request: Request) -> Request:
        if request.expects_response:
            self._in_flight.append(request)
        return request

    # -- receiving -----------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes received from the broker, however the stream was cut."""
        self._check_open()
        try:
            self._reader.feed(data)
        except FrameSizeError as e:
            raise self._bad_size(e) from e

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where to put the next received bytes (as :class:`asyncio.BufferedProtocol` asks).
        Call :meth:`buffer_updated` with how many were put there."""
        self._check_open()
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written at the start of the last :meth:`get_buffer`."""
        try:
            self._reader.buffer_updated(nbytes)
        except FrameSizeError as e:
            raise self._bad_size(e) from e

    def next_frame(self) -> bytes | memoryview | None:
        """The next whole frame received, unmatched to any request: only for a caller that sent
        its own bytes and tracks their answers itself. None when more bytes are needed."""
        frames = self._reader.frames
        if not frames:
            return None
        frame = frames.popleft()
        return frame.toreadonly() if isinstance(frame, memoryview) else frame

    def next_event(self) -> Response | None:
        """The next response, or None when more bytes are needed. Answers to abandoned
        requests are dropped. Raises :class:`ProtocolError` for a response that does not
        answer the oldest request in flight, or that cannot be decoded."""
        frames = self._reader.frames
        while frames:
            frame = frames.popleft()
            if isinstance(frame, memoryview):
                frame = frame.toreadonly()
            (correlation_id,) = _INT32.unpack_from(frame, 0)
            if not self._in_flight or self._in_flight[0].correlation_id != correlation_id:
                raise self._fail(self._mismatch(correlation_id))
            request = self._in_flight.popleft()
            if self._abandoned and request in self._abandoned:
                self._abandoned.discard(request)
                continue
            if request.raw:
                return Response(request, None, frame)
            try:
                _, body = decode_response(response_schema(request.api_key, request.version), frame)
            except Exception as e:
                raise self._fail(
                    ProtocolError(
                        f"cannot decode the response to API key {request.api_key} "
                        f"v{request.version}: {e!r}"
                    )
                ) from e
            return Response(request, body, frame)
        return None

    def events(self) -> Iterable[Response]:
        """Every response complete so far."""
        while (event := self.next_event()) is not None:
            yield event

    def _mismatch(self, correlation_id: int) -> ProtocolError:
        if not self._in_flight:
            return ProtocolError(f"a response (correlation id {correlation_id}) to no request")
        expected = self._in_flight[0].correlation_id
        if any(r.correlation_id == correlation_id for r in self._in_flight):
            return ProtocolError(
                f"the response to correlation id {correlation_id} came before the one to "
                f"{expected}: out of order"
            )
        return ProtocolError(
            f"a response to unknown correlation id {correlation_id} (expected {expected})"
        )

    def _bad_size(self, error: FrameSizeError) -> ProtocolError:
        return self._fail(ProtocolError(f"the broker sent a frame of {error.size} bytes"))

    def _fail(self, error: ProtocolError) -> ProtocolError:
        self._broken = error
        return error


class CoreShell:
    """What every shell of a :class:`ClientCore` tells alike: the broker's versions and what
    is in flight."""

    core: ClientCore

    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        """The broker's API versions: key → (lowest, highest)."""
        return dict(self.core.broker_versions or {})

    def version_for(
        self, api_key: int, highest: int | None = None, lowest: int | None = None
    ) -> int:
        return self.core.version_for(api_key, highest, lowest)

    @property
    def in_flight(self) -> int:
        """Requests sent and waiting for an answer."""
        return len(self.core.requests_in_flight())
