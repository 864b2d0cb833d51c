"""A blocking connection to one broker, with pipelined requests, for code that cannot await.

Spark runs the data source in plain Python processes (the driver's planner and the executors'
workers), one task at a time, with no event loop; :mod:`odradek.client.connection` is the asyncio
counterpart for the CLI. This one differs in two ways that matter for moving data:

- **pipelining**: :meth:`WireConnection.send` returns at once and :meth:`WireConnection.receive`
  takes the responses in order, so a reader can ask for the next records while it decodes the
  last ones (Kafka answers a connection's requests in the order they were sent);
- **no copies on the way in**: a response frame is read with ``recv_into`` into one buffer.

Requests are built with :func:`odradek.protocol.messages.build` from version-independent fields.
On connect, ApiVersions tells which versions the broker serves; each request goes out in the
highest version both the broker and :data:`CLIENT_VERSIONS` know.
"""

from __future__ import annotations

import itertools
import socket
import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.client.connection import ClientError, parse_address
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    RequestHeader,
    build,
    decode_response,
    encode_request,
    request_schema,
    response_schema,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18

# The versions this client's callers are written for: (lowest, highest) per API key. Fetch stops at
# 12, the last version that names topics rather than topic ids.
CLIENT_VERSIONS: Mapping[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 8),
    METADATA: (1, 12),
    API_VERSIONS: (0, 3),
}

_INT32 = struct.Struct(">i")
DEFAULT_TIMEOUT_S = 30.0


class WireError(ClientError):
    """The connection failed or broke: the broker is unreachable, closed it, or answered nonsense.

    The connection is unusable afterwards; requests that are safe to repeat can be retried on a
    new one.
    """


@dataclass(frozen=True, slots=True)
class Pending:
    """A request sent and not yet answered."""

    correlation_id: int
    api_key: int
    version: int
    expects_response: bool = True


class WireConnection:
    """A blocking TCP connection to one broker. Open with :meth:`open`; not thread-safe."""

    _correlation_ids = itertools.count(1)

    def __init__(self, sock: socket.socket, address: str, client_id: str, timeout_s: float) -> None:
        self._sock = sock
        self.address = address
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.versions: dict[int, tuple[int, int]] = {}
        self._in_flight: deque[Pending] = deque()
        self._abandoned: set[int] = set()
        self.closed = False

    @classmethod
    def open(
        cls,
        address: str,
        *,
        client_id: str = "odradek-data",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> WireConnection:
        """Connect to ``host:port`` and learn the broker's API versions."""
        host, port = parse_address(address)
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise WireError(f"cannot connect to {host}:{port}: {e}") from e
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        connection = cls(sock, f"{host}:{port}", client_id, timeout_s)
        try:
            connection._negotiate()
        except BaseException:
            connection.close()
            raise
        return connection

    def _negotiate(self) -> None:
        pending = self._send(
            API_VERSIONS,
            3,
            {"client_software_name": "odradek", "client_software_version": "0.1.0"},
        )
        response = self.receive(pending)
        if response.error_code != ErrorCode.none:
            raise WireError(f"ApiVersions failed at {self.address}: {response.error_code.name}")
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def version_for(self, api_key: int) -> int:
        """The highest version of ``api_key`` that both this client and the broker speak."""
        broker = self.versions.get(api_key)
        ours = CLIENT_VERSIONS.get(api_key)
        if broker is None or ours is None:
            side = "broker" if broker is None else "client"
            raise WireError(f"the {side} does not speak API key {api_key}")
        version = min(ours[1], broker[1])
        if version < max(ours[0], broker[0]):
            raise WireError(
                f"no common version of API key {api_key}: broker {broker[0]}..{broker[1]}, "
                f"client {ours[0]}..{ours[1]}"
            )
        return version

    # -- requests ----------------------------------------------------------------------------

    def send(
        self, api_key: int, fields: Mapping[str, Any], *, expects_response: bool = True
    ) -> Pending:
        """Send a request without waiting; pass the result to :meth:`receive` (in order).

        ``expects_response=False`` is for a Produce with acks=0, which Kafka never answers.
        """
        return self._send(api_key, self.version_for(api_key), fields, expects_response)

    def request(self, api_key: int, fields: Mapping[str, Any]) -> Any:
        """Send a request and wait for its decoded response."""
        return self.receive(self.send(api_key, fields))

    def _send(
        self,
        api_key: int,
        version: int,
        fields: Mapping[str, Any],
        expects_response: bool = True,
    ) -> Pending:
        if self.closed:
            raise WireError(f"connection to {self.address} is closed")
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        payload = build(request_schema(api_key, version), fields)
        frame = encode_request(
            RequestHeader(api_key, version, correlation_id, self.client_id), payload
        )
        try:
            self._sock.sendall(frame)
        except OSError as e:
            self.close()
            raise WireError(f"sending to {self.address} failed: {e}") from e
        pending = Pending(correlation_id, api_key, version, expects_response)
        if expects_response:
            self._in_flight.append(pending)
        return pending

    def abandon(self, pending: Pending) -> None:
        """Give up on the answer to ``pending``: it is read and dropped when it comes."""
        if pending in self._in_flight:
            self._abandoned.add(pending.correlation_id)

    def receive(self, pending: Pending) -> Any:
        """The decoded response to ``pending``, which must be the oldest request in flight
        (not counting abandoned ones)."""
        frame = self.receive_frame(pending)
        try:
            correlation_id, response = decode_response(
                response_schema(pending.api_key, pending.version), frame
            )
        except Exception as e:
            self.close()
            raise WireError(
                f"cannot decode the response to API key {pending.api_key} "
                f"v{pending.version} from {self.address}: {e}"
            ) from e
        self.check_correlation(pending, correlation_id)
        return response

    def receive_frame(self, pending: Pending) -> memoryview:
        """The undecoded response frame (header included, length prefix not) to ``pending``,
        for callers that parse a response themselves; they check its correlation id with
        :meth:`check_correlation`."""
        if not pending.expects_response:
            raise ValueError("this request gets no response")
        while self._in_flight and self._in_flight[0].correlation_id in self._abandoned:
            self._abandoned.discard(self._in_flight.popleft().correlation_id)
            self._read_frame()
        if not self._in_flight or self._in_flight[0] is not pending:
            raise ValueError("responses must be received in the order the requests were sent")
        self._in_flight.popleft()
        return self._read_frame()

    def check_correlation(self, pending: Pending, correlation_id: int) -> None:
        if correlation_id != pending.correlation_id:
            self.close()
            raise WireError(
                f"{self.address} answered correlation id {correlation_id}, "
                f"expected {pending.correlation_id}"
            )

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    # -- frames ------------------------------------------------------------------------------

    def _read_frame(self) -> memoryview:
        (size,) = _INT32.unpack(self._read_exactly(4))
        if size < 4:
            self.close()
            raise WireError(f"{self.address} sent a frame of {size} bytes")
        return self._read_exactly(size)

    def _read_exactly(self, size: int) -> memoryview:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        try:
            while got < size:
                n = self._sock.recv_into(view[got:], size - got)
                if n == 0:
                    raise WireError(f"{self.address} closed the connection")
                got += n
        except OSError as e:
            self.close()
            raise WireError(f"reading from {self.address} failed: {e}") from e
        except WireError:
            self.close()
            raise
        return view.toreadonly()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._in_flight.clear()
            self._abandoned.clear()
            self._sock.close()

    def __enter__(self) -> WireConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
