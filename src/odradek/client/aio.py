"""The asyncio shell around :class:`~odradek.client.core.ClientCore`: one connection to one broker.

For the CLI, the admin client, the console and the follower fetcher. Many requests can be in
flight at once on the connection (pipelined): each :meth:`AsyncConnection.request` writes its
frame at once and waits on a future that the response completes, whatever order the awaiting
tasks run in. A request that times out is abandoned (its late answer is dropped) and the
connection goes on; a lost connection, or a broker that breaks the protocol, fails every request
in flight with :class:`~odradek.client.core.ConnectionFailed`.

The connection is an :class:`asyncio.BufferedProtocol`: the event loop reads straight into the
core's buffer (a large response into a buffer of its own), so nothing is copied on the way in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from odradek.client.core import (
    DEFAULT_TIMEOUT_S,
    ClientCore,
    ClientError,
    ConnectionFailed,
    CoreShell,
    ProtocolError,
    Request,
    RequestTimeout,
    Response,
    parse_address,
)
from odradek.protocol.bounds import MalformedRequest

if TYPE_CHECKING:
    from odradek.security.client_settings import ClientSecurity

ResponseCallback = Callable[[Response | ClientError], None]

_CLOSE_TIMEOUT_S = 5.0


class AsyncConnection(CoreShell, asyncio.BufferedProtocol):
    """A connection to one broker. Open with :meth:`open`, close with :meth:`close`.

    The protocol callbacks (``connection_made``, ``get_buffer``, …) are the event loop's; the
    rest is the client's API.
    """

    def __init__(self, core: ClientCore, address: str, timeout_s: float) -> None:
        self.core = core
        self.address = address
        self.timeout_s = timeout_s
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        # By correlation id: the future of each request in flight, or the callback of one sent
        # with :meth:`send_frame_then`.
        self._waiting: dict[int, asyncio.Future[Response | None] | ResponseCallback] = {}
        self._error: ClientError | None = None
        self._lost = self._loop.create_future()
        self._writable: asyncio.Future[None] | None = None  # set while the transport is full

    @classmethod
    async def open(
        cls,
        address: str,
        *,
        client_id: str = "odradek-client",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client_versions: Mapping[int, tuple[int, int]] | None = None,
        negotiate: bool = True,
        security: ClientSecurity | None = None,
    ) -> AsyncConnection:
        """Connect to ``host:port`` (over TLS and authenticated with SASL as ``security``
        says) and (unless ``negotiate`` is false) learn the broker's API versions."""
        host, port = parse_address(address)
        core = ClientCore(client_id, client_versions=client_versions)
        connection = cls(core, f"{host}:{port}", timeout_s)
        loop = asyncio.get_running_loop()
        context = security.ssl_context() if security is not None else None
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: connection,
                    host,
                    port,
                    ssl=context,
                    server_hostname=host if context is not None else None,
                ),
                timeout_s,
            )
        except (OSError, TimeoutError) as e:
            raise ConnectionFailed(f"cannot connect to {host}:{port}: {e!r}") from e
        try:
            if negotiate:
                await connection.negotiate()
            if security is not None and security.sasl:
                await connection.authenticate(security)
        except BaseException:
            await connection.close()
            raise
        return connection

    async def authenticate(self, security: ClientSecurity) -> None:
        """The SASL exchange (KIP-152): SaslHandshake, then SaslAuthenticate until done."""
        from odradek.client.oauth import token_for
        from odradek.client.security import (
            SASL_AUTHENTICATE,
            SASL_HANDSHAKE,
            check_authenticate,
            check_handshake,
            sasl_client,
        )

        token = None
        if security.oauth is not None:
            token = await asyncio.to_thread(token_for, security.oauth)
        client = sasl_client(security, token)
        handshake = await self.request(SASL_HANDSHAKE, {"mechanism": client.mechanism}, version=1)
        check_handshake(int(handshake.error_code), list(handshake.mechanisms), client.mechanism)
        message: bytes | None = client.first()
        while message is not None:
            answer = await self.request(SASL_AUTHENTICATE, {"auth_bytes": message}, version=2)
            check_authenticate(int(answer.error_code), answer.error_message)
            message = client.step(bytes(answer.auth_bytes))

    async def negotiate(self) -> None:
        request, data = self.core.versions_request()
        response = await self._wait(request, self._write(request, data), self.timeout_s)
        assert response is not None
        self.core.accept_versions(response.body)

    @property
    def closed(self) -> bool:
        return self._error is not None

    # -- requests ------------------------------------------------------------------------------

    async def request(
        self,
        api_key: int,
        fields: Mapping[str, Any],
        *,
        version: int | None = None,
        highest: int | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Send a request (in ``version``, or the best common one up to ``highest``) and wait
        for its decoded response; None for a Produce with acks=0."""
        response = await self.exchange(
            api_key, fields, version=version, highest=highest, timeout_s=timeout_s
        )
        return None if response is None else response.body

    async def exchange(
        self,
        api_key: int,
        fields: Mapping[str, Any],
        *,
        version: int | None = None,
        highest: int | None = None,
        raw: bool = False,
        timeout_s: float | None = None,
    ) -> Response | None:
        """Like :meth:`request`, but the whole response: with ``raw``, only its frame."""
        request, future = self.send(api_key, fields, version=version, highest=highest, raw=raw)
        await self.drain()
        return await self._wait(request, future, timeout_s)

    async def exchange_frame(
        self, frame: bytes | bytearray, *, timeout_s: float | None = None
    ) -> bytes | memoryview:
        """Send an already-encoded request frame (for APIs kio has no schema of, such as
        ControlledShutdown) and wait for its response frame (header and body, no size prefix)."""
        request, future = self.send_frame(frame, raw=True)
        await self.drain()
        response = await self._wait(request, future, timeout_s)
        if response is None:
            raise ClientError("this request gets no response")
        return response.frame

    async def request_encoded(
        self,
        frame: bytes | bytearray,
        decode: Callable[[bytes | memoryview], Any] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> Any:
        """Like :meth:`request`, for a request frame encoded by hand (a hot path's, see
        :meth:`send_frame`): its decoded response, by ``decode`` (a hand-written reader of the
        response frame, header included, raising MalformedRequest) when given, else by kio."""
        request, future = self.send_frame(frame, raw=decode is not None)
        await self.drain()
        response = await self._wait(request, future, timeout_s)
        if response is None:
            return None
        if decode is None:
            return response.body
        try:
            return decode(response.frame)
        except MalformedRequest as e:
            raise ProtocolError(
                f"{self.address}: cannot decode the response to API key {request.api_key} "
                f"v{request.version}: {e}"
            ) from e

    def send(
        self,
        api_key: int,
        fields: Mapping[str, Any],
        *,
        version: int | None = None,
        highest: int | None = None,
        lowest: int | None = None,
        raw: bool = False,
    ) -> tuple[Request, asyncio.Future[Response | None]]:
        """Write a request without waiting: the request and the future of its response
        (already None for a Produce with acks=0). Await :meth:`drain` between many sends."""
        self._check_open()
        request, data = self.core.send(
            api_key, fields, version=version, highest=highest, lowest=lowest, raw=raw
        )
        return request, self._write(request, data)

    def send_frame(
        self, frame: bytes | bytearray, *, raw: bool = False
    ) -> tuple[Request, asyncio.Future[Response | None]]:
        """Write an already-encoded request frame (see
        :meth:`~odradek.client.core.ClientCore.send_frame`) without waiting."""
        if self._error is not None:
            raise self._error
        request, data = self.core.send_frame(frame, raw=raw)
        return request, self._write(request, data)

    def send_frame_then(self, frame: bytes | bytearray, callback: ResponseCallback) -> Request:
        """Write an already-encoded request frame without waiting; ``callback`` gets its
        response, or the error that ended the connection, as soon as it is read. No future and
        no task: for a load generator, where one per request shows in the profile. A Produce
        with acks=0 gets no callback."""
        if self._error is not None:
            raise self._error
        request, data = self.core.send_frame(frame)
        if request.expects_response:
            self._waiting[request.correlation_id] = callback
        assert self._transport is not None
        self._transport.write(data)
        return request

    async def drain(self) -> None:
        """Wait while the transport's write buffer is full."""
        if self._writable is not None:
            await asyncio.shield(self._writable)
        self._check_open()

    def _write(self, request: Request, data: bytes) -> asyncio.Future[Response | None]:
        future: asyncio.Future[Response | None] = self._loop.create_future()
        if request.expects_response:
            self._waiting[request.correlation_id] = future
        else:
            future.set_result(None)
        assert self._transport is not None
        self._transport.write(data)
        return future

    async def _wait(
        self,
        request: Request,
        future: asyncio.Future[Response | None],
        timeout_s: float | None,
    ) -> Response | None:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        # The timer fails the very future the answer resolves (not asyncio.wait_for around it,
        # whose wrapper takes one more turn of the loop to hand the answer on).
        timer = self._loop.call_later(timeout, self._time_out, request, future, timeout)
        try:
            return await future
        finally:
            timer.cancel()
            if future.cancelled():
                self.abandon(request)

    def _time_out(
        self, request: Request, future: asyncio.Future[Response | None], timeout: float
    ) -> None:
        if future.done():
            return
        future.set_exception(
            RequestTimeout(
                f"no answer from {self.address} to API key {request.api_key} "
                f"v{request.version} within {timeout:g} s"
            )
        )
        self.abandon(request)  # an answer that comes after all is dropped

    def abandon(self, request: Request) -> None:
        """Give up on ``request``: its future is cancelled and its answer dropped."""
        waiter = self._waiting.pop(request.correlation_id, None)
        if isinstance(waiter, asyncio.Future) and not waiter.done():
            waiter.cancel()
        self.core.abandon(request)

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the connection; requests still in flight fail. A close waits for the bytes
        already written to leave; if they cannot (a peer that does not read), the connection is
        aborted after ``_CLOSE_TIMEOUT_S`` rather than holding the caller (a stopping broker)."""
        self._fail(ConnectionFailed(f"the connection to {self.address} was closed"))
        if self._transport is not None:
            self._transport.close()
            try:
                await asyncio.wait_for(asyncio.shield(self._lost), _CLOSE_TIMEOUT_S)
            except TimeoutError:
                self._transport.abort()
                await asyncio.shield(self._lost)

    def _fail(self, error: ClientError) -> None:
        if self._error is None:
            self._error = error
        self.core.close(self._error)
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            if not isinstance(waiter, asyncio.Future):
                waiter(self._error)
            elif not waiter.done():
                waiter.set_exception(self._error)
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the event loop's protocol callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.core.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.core.buffer_updated(nbytes)
            while (response := self.core.next_event()) is not None:
                waiter = self._waiting.pop(response.request.correlation_id, None)
                if waiter is None:
                    continue
                if not isinstance(waiter, asyncio.Future):
                    waiter(response)
                elif not waiter.done():
                    waiter.set_result(response)
        except ProtocolError as e:
            self._fail(ProtocolError(f"{self.address}: {e}"))
            assert self._transport is not None
            self._transport.close()

    def eof_received(self) -> bool:
        self._fail(ConnectionFailed(f"{self.address} closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc!r}" if exc is not None else ""
        self._fail(ConnectionFailed(f"the connection to {self.address} was lost{reason}"))
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        if self._writable is None or self._writable.done():
            self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None
