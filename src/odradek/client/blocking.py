"""The blocking shell around :class:`~odradek.client.core.ClientCore`: one socket to one broker.

For code that cannot await: Spark runs the data source in plain Python processes (the driver's
planner, the executors' workers) with no event loop, and the bench's helpers and the ``topics``
command are plain functions. :meth:`BlockingConnection.send` returns at once and
:meth:`BlockingConnection.receive` waits for one answer, so many requests can be in flight (a
reader asks for the next records while it decodes the last ones); answers read while waiting for
a later one are kept until asked for. Responses are read with ``recv_into`` into the core's
buffer, a large one into a buffer of its own, so nothing is copied on the way in.

Any failure of the socket (refused, reset, closed, silent for ``timeout_s``) or of the protocol
closes the connection and raises :class:`~odradek.client.core.ConnectionFailed`; every request in
flight is lost with it.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.client.core import (
    DEFAULT_TIMEOUT_S,
    ClientCore,
    ClientError,
    ConnectionFailed,
    CoreShell,
    ProtocolError,
    Request,
    Response,
    parse_address,
)

if TYPE_CHECKING:
    from odradek.security.client_settings import ClientSecurity

_RECEIVE_BUFFER_BYTES = 4 << 20


class BlockingConnection(CoreShell):
    """A blocking TCP connection to one broker. Open with :meth:`open`; not thread-safe."""

    def __init__(self, sock: socket.socket, core: ClientCore, address: str) -> None:
        self._sock = sock
        self.core = core
        self.address = address
        self._answered: dict[Request, Response] = {}
        self.closed = False

    @property
    def local_port(self) -> int:
        """The port of this end of the connection (to tell it in the kernel's socket tables)."""
        return int(self._sock.getsockname()[1])

    @classmethod
    def open(
        cls,
        address: str,
        *,
        client_id: str = "odradek-client",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client_versions: Mapping[int, tuple[int, int]] | None = None,
        negotiate: bool = True,
        security: ClientSecurity | None = None,
    ) -> BlockingConnection:
        """Connect to ``host:port`` (over TLS and authenticated with SASL as ``security``
        says) and (unless ``negotiate`` is false) learn the broker's API versions."""
        host, port = parse_address(address)
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECEIVE_BUFFER_BYTES)
            context = security.ssl_context() if security is not None else None
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as e:
            raise ConnectionFailed(f"cannot connect to {host}:{port}: {e}") from e
        core = ClientCore(client_id, client_versions=client_versions)
        connection = cls(sock, core, f"{host}:{port}")
        try:
            if negotiate:
                connection.negotiate()
            if security is not None and security.sasl:
                connection.authenticate(security)
        except BaseException:
            connection.close()
            raise
        return connection

    def authenticate(self, security: ClientSecurity) -> None:
        """The SASL exchange (KIP-152): SaslHandshake, then SaslAuthenticate until done."""
        from odradek.client.oauth import token_for
        from odradek.client.security import (
            SASL_AUTHENTICATE,
            SASL_HANDSHAKE,
            check_authenticate,
            check_handshake,
            sasl_client,
        )

        token = None if security.oauth is None else token_for(security.oauth)
        client = sasl_client(security, token)
        handshake = self.request(SASL_HANDSHAKE, {"mechanism": client.mechanism}, version=1)
        check_handshake(int(handshake.error_code), list(handshake.mechanisms), client.mechanism)
        message: bytes | None = client.first()
        while message is not None:
            answer = self.request(SASL_AUTHENTICATE, {"auth_bytes": message}, version=2)
            check_authenticate(int(answer.error_code), answer.error_message)
            message = client.step(bytes(answer.auth_bytes))

    def negotiate(self) -> None:
        request, data = self.core.versions_request()
        self._write(data)
        response = self.receive(request)
        assert response is not None
        self.core.accept_versions(response.body)

    # -- requests ------------------------------------------------------------------------------

    def request(
        self,
        api_key: int,
        fields: Mapping[str, Any],
        *,
        version: int | None = None,
        highest: int | None = None,
        lowest: int | None = None,
    ) -> Any:
        """Send a request (in ``version``, or the best common one within ``lowest..highest``)
        and wait for its decoded response; None for a Produce with acks=0."""
        response = self.receive(
            self.send(api_key, fields, version=version, highest=highest, lowest=lowest)
        )
        return None if response is None else response.body

    def send(
        self,
        api_key: int,
        fields: Mapping[str, Any],
        *,
        version: int | None = None,
        highest: int | None = None,
        lowest: int | None = None,
        raw: bool = False,
    ) -> Request:
        """Send a request without waiting; pass the result to :meth:`receive`."""
        self._check_open()
        request, data = self.core.send(
            api_key, fields, version=version, highest=highest, lowest=lowest, raw=raw
        )
        self._write(data)
        return request

    def send_frame(self, frame: bytes | bytearray, *, raw: bool = False) -> Request:
        """Send an already-encoded request frame (see
        :meth:`~odradek.client.core.ClientCore.send_frame`) without waiting."""
        self._check_open()
        request, data = self.core.send_frame(frame, raw=raw)
        self._write(data)
        return request

    def send_bytes(self, data: bytes) -> None:
        """Write ``data`` as it is, unseen by the core: for tests feeding the broker exact (or
        broken) bytes. Answers they expect are announced with :meth:`expect`."""
        self._check_open()
        self._write(data)

    def expect(self, api_key: int, version: int, correlation_id: int) -> Request:
        """An answer to bytes sent with :meth:`send_bytes`, due after those in flight; pass
        it to :meth:`receive` (its response is raw)."""
        self._check_open()
        return self.core.expect(api_key, version, correlation_id)

    def receive(self, request: Request) -> Response | None:
        """The response to ``request`` (None for a Produce with acks=0), reading as long as
        it takes; answers to earlier requests read on the way are kept for them."""
        if not request.expects_response:
            return None
        answered = self._answered.pop(request, None)
        if answered is not None:
            return answered
        if request not in self.core.requests_in_flight():
            self._check_open()
            raise ClientError(f"correlation id {request.correlation_id} is not awaiting an answer")
        try:
            while True:
                for response in self.core.events():
                    if response.request is request:
                        return response
                    self._answered[response.request] = response
                self._read()
        except ProtocolError as e:
            self.close()
            raise ProtocolError(f"{self.address}: {e}") from e

    def abandon(self, request: Request) -> None:
        """Give up on the answer to ``request``: it is dropped when it comes."""
        if self._answered.pop(request, None) is None:
            self.core.abandon(request)

    def read_frame(self) -> bytes | memoryview:
        """The next frame received, matched to no request: for a caller that sent its own
        bytes with nothing else in flight and checks the answer itself."""
        try:
            while (frame := self.core.next_frame()) is None:
                self._read()
        except ProtocolError as e:
            self.close()
            raise ProtocolError(f"{self.address}: {e}") from e
        return frame

    def wait_readable(self, wait_s: float) -> bool:
        """Whether something (an answer, or the close) arrives within ``wait_s``."""
        if self.core.buffered:
            return True
        if isinstance(self._sock, ssl.SSLSocket) and self._sock.pending():
            return True  # decrypted already, so select would not see it
        readable, _, _ = select.select([self._sock], [], [], wait_s)
        return bool(readable)

    # -- the socket ----------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as e:
            self.close()
            raise ConnectionFailed(f"sending to {self.address} failed: {e!r}") from e

    def _read(self) -> None:
        buffer = self.core.get_buffer()
        try:
            n = self._sock.recv_into(buffer)
        except OSError as e:
            self.close()
            raise ConnectionFailed(f"reading from {self.address} failed: {e!r}") from e
        finally:
            buffer.release()
        if n == 0:
            self.close()
            raise ConnectionFailed(f"{self.address} closed the connection")
        self.core.buffer_updated(n)

    def _check_open(self) -> None:
        if self.closed:
            raise ConnectionFailed(f"the connection to {self.address} is closed")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.core.close(ConnectionFailed(f"the connection to {self.address} is closed"))
            self._answered.clear()
            self._sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
