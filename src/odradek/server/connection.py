"""One client connection: the asyncio shell over its sans-I/O core (``ConnectionCore``).

The core (no I/O) cuts the received bytes into requests, decides when reading pauses (read-ahead,
the broker's ``queued.max.request.bytes`` pool) and holds the SASL gate; this shell owns the
socket: it receives into the core's buffer, dispatches requests in order, writes responses
(corked, or with ``sendfile``) and runs the TLS handshake.

Like Kafka, a connection handles one request at a time and its responses leave in request order.
One wait is let overlap the next request: on a broker with followers, an acks=all Produce whose
records are appended waits for the in-sync followers (the only thing left of it) in a task of its
own while the connection takes, decodes and handles its next requests (at most
``_MAX_ANSWERING`` taken and unanswered); the appends still happen in request order, and each
response is written only after the one before it. Kafka mutes the channel for the whole wait
instead, so a producer's next request waits a replication round trip before it is even read.
Framing errors close only this connection.

Reading is an :class:`asyncio.BufferedProtocol`: the event loop receives straight into a buffer
the core owns, and each request reaches its handler as a ``memoryview`` of that buffer, so
a Produce request's record batches are not copied between the socket and the segment file.

On an SSL or SASL_SSL listener the connection first completes a TLS handshake (``start_tls``,
so a failed handshake is logged with its reason), and Fetch responses are copied rather than sent
with ``sendfile``. On a SASL listener only ApiVersions, SaslHandshake and SaslAuthenticate are
served until the client has authenticated; a failed authentication closes the connection after
``connection.failed.authentication.delay.ms``, and a session past ``connections.max.reauth.ms``
is closed at its next request unless it re-authenticates first (KIP-368).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import errno
import functools
import logging
import os
import ssl
import struct
import time
import typing
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from odradek.counters import RequestTiming, current_request
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    UnsupportedRequest,
    build,
    decode_request,
    encode_response,
    peek_header,
    response_schema,
)
from odradek.protocol.produce_request import peek_acks
from odradek.security.listeners import Listener
from odradek.security.sasl import SaslSession
from odradek.security.tls import certificate_principal
from odradek.server import client_throttle
from odradek.server.client_throttle import THROTTLED_APIS
from odradek.server.connection_core import (
    API_VERSIONS_KEY,
    SASL_AUTHENTICATE_KEY,
    CloseConnection,
    ConnectionCore,
)
from odradek.server.connection_quotas import client_address
from odradek.server.context import FrameParts, RequestContext
from odradek.server.memory_pool import MemoryPool
from odradek.server.registry import HANDLERS
from odradek.server.services import BrokerServices, Session
from odradek.storage import ReadSlice

log = logging.getLogger(__name__)

_TLS_HANDSHAKE_TIMEOUT_S = 10.0
_INT16 = struct.Struct(">h")
# Below this, a pread and one write cost fewer syscalls and event-loop turns than sendfile,
# which must first drain the transport's buffer.
SENDFILE_MIN_BYTES = 64 * 1024
_WRITE_HIGH_WATER = 4 * 1024 * 1024
# Responses to a burst of pipelined requests are sent together, up to this many bytes at a time.
_CORK_BYTES = 256 * 1024
# Requests of one connection taken and not yet answered (all but the newest waiting for their
# followers, or for the answers before theirs) past which the next is not taken.
_MAX_ANSWERING = 8


_PRODUCE = 0
_ACKS_ALL = -1


def _release(released: asyncio.Future[None], _: object = None) -> None:
    if not released.done():
        released.set_result(None)


class _EarlierFailed(Exception):
    """A request is not answered: one before it on the connection failed (and ends it)."""


class _FdFile:
    """The part of a file object ``loop.sendfile`` needs, over a borrowed fd."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


class Connection(asyncio.BufferedProtocol):
    """The protocol object of one accepted socket; :meth:`serve` is its request loop, run by
    ``on_open`` (the broker's accept callback, which tracks it) as a task of its own.
    ``pool`` is the broker's bound on request bytes received and not yet handled."""

    def __init__(
        self,
        services: BrokerServices,
        on_open: Callable[[Connection], Coroutine[Any, Any, None]],
        listener: Listener | None = None,
        pool: MemoryPool | None = None,
    ) -> None:
        self.services = services
        self._on_open = on_open
        self.listener = listener if listener is not None else Listener.plaintext()
        self.transport: asyncio.Transport | None = None
        self.session = Session("?")
        self.peer_address = "?"  # the client's IP address, as the connection limits count it
        self._held_back_ms = 0  # a client quota's throttle time, after the answer is sent
        self.sendfile_ok = False
        self._socket_fd = -1  # for sendfile straight to the socket (plaintext only)
        self.last_active_ms = services.clock.monotonic_ms()
        self.busy = False
        self._counters = services.counters.requests if services.counters is not None else None
        self._task: asyncio.Task[None] | None = None
        self.core = ConnectionCore(
            self.session,
            max_request_bytes=services.config.get_int("socket.request.max.bytes"),
            pool=pool,
            arrival_clock=time.perf_counter_ns if self._counters is not None else None,
            on_reading_change=self._sync_reading,
        )
        # Until the TLS handshake is done, the client's bytes are not requests.
        self._handshaking = False
        self._reading_paused = False
        self._frame_waiter: asyncio.Future[None] | None = None
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._throttled: asyncio.Future[None] | None = None  # a client quota's hold
        self._corked: list[bytes] = []
        self._corked_bytes = 0

    @property
    def peer(self) -> str:
        return self.session.peer

    # -- protocol callbacks (the event loop calls these) -----------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer_address = client_address(peer)
        listener = self.listener
        self.session = Session(
            f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer),
            listener=listener.name,
            sasl=SaslSession(listener.sasl) if listener.sasl is not None else None,
        )
        self.core.session = self.session
        self.sendfile_ok = listener.ssl_context is None
        if self.sendfile_ok:
            sock = transport.get_extra_info("socket")
            self._socket_fd = sock.fileno() if sock is not None else -1
        if listener.ssl_context is not None:
            # The client's first bytes belong to the TLS handshake that serve() starts: none
            # may be read as a request before then.
            self._handshaking = True
            self.transport.pause_reading()
        else:
            self.transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        self._task = asyncio.get_running_loop().create_task(self._on_open(self))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.core.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        core = self.core
        core.buffer_updated(nbytes)
        if core.has_requests or core.closing is not None:
            self._wake_reader()
        if not core.reading:
            self._sync_reading()

    def eof_received(self) -> bool:
        self.core.eof_received()
        self._wake_reader()
        return True  # keep the transport: responses to requests already received still go out

    def connection_lost(self, exc: Exception | None) -> None:
        self.core.connection_lost()
        self._wake_reader()
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(ConnectionResetError("connection lost"))

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        waiter, self._drain_waiter = self._drain_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- receiving -------------------------------------------------------------------------------

    def _sync_reading(self) -> None:
        """Pause or resume the socket as the core wants (read-ahead, memory pool, closing)."""
        transport = self.transport
        if transport is None or self._handshaking or transport.is_closing():
            return
        reading = self.core.reading
        if reading == self._reading_paused:
            self._reading_paused = not reading
            if reading:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def _wake_reader(self) -> None:
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _next_frame(self, answering: deque[asyncio.Task[None]]) -> memoryview | None:
        """The next request frame (without its size prefix), or None once the client is gone;
        with metrics on, ``core.arrived`` is when it was received. Raises the failure of a
        request taken before (``answering``) that failed meanwhile."""
        core = self.core
        while True:
            self._retire(answering)
            if self._throttled is not None:
                # Over a client quota (an answer sent while this waited): nothing is taken.
                await asyncio.wait((self._throttled,))
                continue
            frame = core.next_request()
            if frame is not None:
                return frame
            if core.ended:
                if core.ended_mid_request:
                    log.info("connection from %s closed in the middle of a request", self.peer)
                return None
            self._frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._frame_waiter
            finally:
                self._frame_waiter = None

    # -- requests ----------------------------------------------------------------------------------

    async def _start_tls(self) -> bool:
        """The server side of the TLS handshake; False (logged) if it failed."""
        context = self.listener.ssl_context
        assert context is not None and self.transport is not None
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(
                self.transport,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S,
            )
        except (OSError, TimeoutError, ConnectionError) as e:
            reason = getattr(e, "reason", None) or str(e) or type(e).__name__
            if isinstance(e, ssl.SSLCertVerificationError):
                reason = f"{reason}: {e.verify_message}"
            hint = ""
            if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNEXPECTED_RECORD"):
                hint = " (a plaintext client on a TLS listener?)"
            log.warning(
                "closing connection from %s to listener %s: TLS handshake failed: %s%s",
                self.peer,
                self.listener.name,
                reason,
                hint,
            )
            if not self.transport.is_closing():
                self.transport.abort()
            return False
        if transport is None:
            return False
        self.transport = transport
        self.transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        self._handshaking = False
        self._reading_paused = False  # a new transport, reading
        self._sync_reading()
        if self.session.sasl is None:
            self.session.principal = certificate_principal(transport.get_extra_info("ssl_object"))
        return True

    async def _close_after_failed_authentication(self, reason: str) -> None:
        # Kafka delays the close so that a client guessing passwords gets few tries a second;
        # nothing more is read meanwhile.
        assert self.transport is not None
        self.core.stop(reason)
        self._uncork()
        await asyncio.sleep(self.listener.failed_auth_delay_ms / 1000)
        raise CloseConnection(reason)

    async def serve(self) -> None:
        if self.listener.ssl_context is not None and not await self._start_tls():
            return
        loop = asyncio.get_running_loop()
        # Requests taken and not yet answered, oldest first: at most one being handled, the
        # others handled and waiting for replication or for the answers before theirs.
        answering: deque[asyncio.Task[None]] = deque()
        try:
            while True:
                self._retire(answering)
                while len(answering) >= _MAX_ANSWERING:
                    await asyncio.wait((answering[0],))
                    self._retire(answering)
                frame = await self._next_frame(answering)
                if frame is None:
                    await self._finish(answering)
                    return
                self.busy = True
                timed = self._timed(frame)
                if not answering and not self._may_wait(frame):
                    # Nothing before it and nothing of it to overlap: handled in this task.
                    current_request.set(timed[1] if timed is not None else None)
                    try:
                        await self._answer(frame, None, None, timed)
                    finally:
                        del frame  # a live view keeps the receive buffer from being reused
                        self.core.request_done()
                        self.last_active_ms = self.services.clock.monotonic_ms()
                    self._retire(answering)
                    continue
                # Only the wait for the followers may overlap the next request's handling: the
                # appends of a connection happen in request order, as its answers leave.
                released: asyncio.Future[None] = loop.create_future()
                task = self._start(frame, answering[-1] if answering else None, released, timed)
                del frame
                answering.append(task)
                task.add_done_callback(self._answered)
                task.add_done_callback(functools.partial(_release, released))
                await released
        except CloseConnection as e:
            log.warning("closing connection from %s: %s", self.peer, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
        finally:
            for task in answering:
                task.cancel()
            if answering:
                await asyncio.wait(answering)
                for task in answering:
                    if not task.cancelled():
                        task.exception()  # retrieved: the connection ends either way
            if self.transport is not None:
                self._uncork()
                self.transport.close()

    def _timed(self, frame: memoryview) -> tuple[int, RequestTiming, int] | None:
        """With metrics or client quotas: the request's API key, its own timing (to which the
        purgatory adds its waits: Kafka's RemoteTime, which the request quota leaves out), and
        when it arrived."""
        if self._counters is None and self.services.quotas is None:
            return None
        api_key = SASL_AUTHENTICATE_KEY  # a bare token has no header
        if not self.core.expects_legacy_token:
            (api_key,) = _INT16.unpack_from(frame)
        return (api_key, RequestTiming(), self.core.arrived)

    def _may_wait(self, frame: memoryview) -> bool:
        """Whether the request may leave a wait for the followers to overlap what follows (an
        acks=all Produce to a broker with followers). Any other is handled in the connection's
        task: a burst of them is handled in one event-loop turn, their responses corked
        together."""
        return (
            not self.services.replicas.alone
            and not self.core.expects_legacy_token
            and _INT16.unpack_from(frame)[0] == _PRODUCE
            and peek_acks(frame) == _ACKS_ALL
        )

    def _start(
        self,
        frame: memoryview,
        previous: asyncio.Task[None] | None,
        released: asyncio.Future[None],
        timed: tuple[int, RequestTiming, int] | None,
    ) -> asyncio.Task[None]:
        """The task that handles ``frame`` and answers it after ``previous`` is answered;
        ``released`` is done once only a wait for the followers is left of it."""
        context = contextvars.copy_context()
        # In the task's context, so copied by any task a handler starts.
        context.run(current_request.set, timed[1] if timed is not None else None)
        return asyncio.get_running_loop().create_task(
            self._answer(frame, previous, lambda: _release(released), timed), context=context
        )

    async def _answer(
        self,
        frame: memoryview,
        previous: asyncio.Task[None] | None,
        only_waiting_left: Callable[[], None] | None,
        timed: tuple[int, RequestTiming, int] | None,
    ) -> None:
        """Handle one request, then, once the requests before it are answered, send its
        response (Kafka's order: a connection's answers leave as its requests came)."""
        started = time.perf_counter_ns()
        try:
            response = await self.dispatch(frame, only_waiting_left)
        except Exception:
            await self._after(previous)  # a close comes in request order too
            raise
        finally:
            del frame
        handled = time.perf_counter_ns()
        await self._after(previous)
        if response is not None:
            await self.write(response)
        if self._held_back_ms:
            # Over a client quota: nothing more is read for the throttle time.
            held_back, self._held_back_ms = self._held_back_ms, 0
            self._throttled = asyncio.ensure_future(asyncio.sleep(held_back / 1000))
            try:
                await self._throttled
            finally:
                self._throttled = None
        failure = self.core.authentication_failure
        if failure is not None:
            await self._close_after_failed_authentication(failure)
        counters = self._counters
        if counters is not None and timed is not None:
            api_key, timing, arrived = timed
            # Kafka's ResponseSendTimeMs ends when the response is sent; here, when the
            # transport has it (or, corked, when it will go at this loop turn); waiting behind
            # the answers to the connection's earlier requests is part of it.
            answered = time.perf_counter_ns()
            remote = min(timing.remote_ns, handled - started)
            counters.handled(
                api_key,
                queue_ns=started - arrived,
                local_ns=handled - started - remote,
                remote_ns=remote,
                send_ns=answered - handled,
                also=timing.also,
            )

    @staticmethod
    async def _after(previous: asyncio.Task[None] | None) -> None:
        """Wait until the request before is answered; :class:`_EarlierFailed` if it was not."""
        if previous is not None:
            if not previous.done():
                await asyncio.wait((previous,))
            if previous.cancelled() or previous.exception() is not None:
                raise _EarlierFailed

    def _answered(self, task: asyncio.Task[None]) -> None:
        self.core.request_done()
        self.last_active_ms = self.services.clock.monotonic_ms()
        if task.cancelled() or task.exception() is not None:
            self._wake_reader()  # the request loop ends the connection

    def _retire(self, answering: deque[asyncio.Task[None]]) -> None:
        """Drop the answered requests from the front; raise the first one's failure."""
        while answering and answering[0].done():
            task = answering.popleft()
            if not task.cancelled():
                error = task.exception()
                if error is not None and not isinstance(error, _EarlierFailed):
                    raise error
        if not answering:
            self.busy = False
            self.core.shed()

    async def _finish(self, answering: deque[asyncio.Task[None]]) -> None:
        """The client sent its last request: answer what was taken."""
        while answering:
            await asyncio.wait((answering[0],))
            self._retire(answering)

    def close_if_idle(self, now_ms: int, idle_ms: int) -> None:
        """Close a connection with no request for ``connections.max.idle.ms``, as Kafka does;
        this also ends one left hanging in the middle of a frame."""
        if not self.busy and now_ms - self.last_active_ms > idle_ms:
            log.info(
                "closing connection from %s: idle for %d ms",
                self.peer,
                now_ms - self.last_active_ms,
            )
            if self.transport is not None:
                self.transport.close()

    async def dispatch(
        self, frame: memoryview, only_waiting_left: Callable[[], None] | None = None
    ) -> bytes | FrameParts | None:
        """Handle one request; ``only_waiting_left`` is what its handler calls once nothing but
        a wait for the followers is left of it (an acks=all Produce after its appends)."""
        core = self.core
        if core.expects_legacy_token:
            return core.legacy_token(bytes(frame), self.services.clock.monotonic_ms())
        api_key, api_version, correlation_id = peek_header(frame)
        handler = HANDLERS.get(api_key)
        if handler is None:
            raise CloseConnection(f"unknown API key {api_key}")
        core.admit(api_key, self.services.clock.monotonic_ms())
        if not handler.min_version <= api_version <= handler.max_version:
            if api_key == API_VERSIONS_KEY:
                # KIP-511: answer in v0's format so the client can retry with a version we have.
                return encode_response(correlation_id, self._unsupported_api_versions())
            raise CloseConnection(
                f"API key {api_key} version {api_version} is not supported "
                f"(versions {handler.min_version}..{handler.max_version})"
            )
        try:
            if handler.decode is not None:
                header, request = handler.decode(frame)
            else:
                # kio copies what it reads into new objects, and insists on a read-only buffer.
                header, request = decode_request(frame.toreadonly())
        except UnsupportedRequest as e:
            raise CloseConnection(f"unsupported request: {e}") from e
        except Exception as e:
            raise CloseConnection(
                f"malformed request for API key {api_key} v{api_version}: {e}"
            ) from e
        context = RequestContext(self.services, header, self.session, only_waiting_left)
        quotas = self.services.quotas
        timing = current_request.get() if quotas is not None and quotas.request.enabled else None
        if timing is not None:
            began, parked = time.perf_counter_ns(), timing.remote_ns
        answer = await handler.fn(context, request)
        throttle_ms = 0
        if quotas is not None:
            throttle_ms = client_throttle.answer_throttle_time(answer)
            if timing is not None:
                handling_ns = time.perf_counter_ns() - began - (timing.remote_ns - parked)
                throttle_ms = max(
                    throttle_ms,
                    client_throttle.record_time(
                        quotas,
                        api_key,
                        self.session.principal,
                        header.client_id,
                        request,
                        handling_ns,
                    ),
                )
        response: bytes | FrameParts | None
        if answer is None or isinstance(answer, FrameParts | bytes):
            response = answer
        else:
            if throttle_ms > 0:
                answer = client_throttle.with_throttle_field(answer, throttle_ms)
            response = encode_response(correlation_id, answer)
        if quotas is not None and api_key in THROTTLED_APIS:
            bandwidth_ms = client_throttle.record(
                quotas,
                api_key,
                self.session.principal,
                header.client_id,
                request,
                len(frame),
                response,
            )
            throttle_ms = max(throttle_ms, bandwidth_ms)
            if throttle_ms > 0 and response is not None:
                response = client_throttle.with_throttle_time(
                    api_key, api_version, response, throttle_ms
                )
        if throttle_ms > 0:
            self._held_back_ms = throttle_ms
        return response

    def _unsupported_api_versions(self) -> Any:
        return build(
            response_schema(API_VERSIONS_KEY, 0),
            error_code=ErrorCode.unsupported_version,
            api_keys=[
                {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
                for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
            ],
        )

    async def write(self, response: bytes | FrameParts) -> None:
        transport = self.transport
        assert transport is not None
        if isinstance(response, FrameParts) and self._copied_whole(response):
            # Small file slices are copied anyway: one buffer, so one send (and pipelined
            # responses corked together) rather than a send for each piece of the frame.
            response = b"".join(
                p.read_bytes() if isinstance(p, ReadSlice) else p for p in response.parts
            )
        if isinstance(response, bytes) and self.core.has_requests:
            # More requests are already here and will be handled before the loop turns: send
            # their responses in one syscall rather than one each.  The flush is scheduled, so
            # a response never waits for a later request that blocks (a long-polling Fetch).
            if not self._corked:
                asyncio.get_running_loop().call_soon(self._uncork)
            self._corked.append(response)
            self._corked_bytes += len(response)
            if self._corked_bytes >= _CORK_BYTES:
                self._uncork()
            return
        self._uncork()
        if isinstance(response, bytes):
            transport.write(response)
        else:
            for part in response.parts:
                if isinstance(part, ReadSlice):
                    await self._write_slice(transport, part)
                else:
                    transport.write(part)
        await self._drain()

    def _uncork(self) -> None:
        if not self._corked:
            return
        data = self._corked[0] if len(self._corked) == 1 else b"".join(self._corked)
        self._corked.clear()
        self._corked_bytes = 0
        assert self.transport is not None
        if not self.transport.is_closing():
            self.transport.write(data)

    async def _drain(self) -> None:
        """Wait while more than ``_WRITE_HIGH_WATER`` bytes of responses are unsent."""
        if self.core.lost:
            raise ConnectionResetError("connection lost")
        if self._writing_paused:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter

    def _copied_whole(self, response: FrameParts) -> bool:
        """Whether ``response`` is small enough to send as one copied buffer: no slice of it
        goes by sendfile, and it is no bigger than a burst of corked responses."""
        if response.size > _CORK_BYTES:
            return False
        return not self.sendfile_ok or not any(
            isinstance(p, ReadSlice) and p.size >= SENDFILE_MIN_BYTES for p in response.parts
        )

    def _sendfile_now(self, transport: asyncio.Transport, part: ReadSlice) -> int:
        """Bytes of ``part`` sent straight to the socket, without waiting: as many as it takes
        now when nothing is queued before them (else none, and the event loop sends them)."""
        if self._socket_fd < 0 or transport.get_write_buffer_size():
            return 0
        try:
            return os.sendfile(self._socket_fd, part.fd, part.position, part.size)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSOCK):
                raise
            self._socket_fd = -1  # not for this socket: the event loop finds out its way
            return 0

    async def _write_slice(self, transport: asyncio.Transport, part: ReadSlice) -> None:
        if part.size < SENDFILE_MIN_BYTES or not self.sendfile_ok:
            transport.write(part.read_bytes())
            return
        # The event loop's sendfile waits for an empty buffer, stops reading, and takes loop
        # turns and epoll_ctl calls even when the socket takes the whole slice at once: try
        # that first (most responses fit in the socket's buffer).
        sent = self._sendfile_now(transport, part)
        if sent == part.size:
            return
        rest = dataclasses.replace(part, position=part.position + sent, size=part.size - sent)
        loop = asyncio.get_running_loop()
        try:
            sent += await loop.sendfile(
                transport,
                typing.cast(typing.BinaryIO, _FdFile(rest.fd)),
                rest.position,
                rest.size,
                fallback=False,
            )
        except (NotImplementedError, asyncio.SendfileNotAvailableError):
            # An event loop or transport without sendfile (uvloop, TLS): copy instead, from now on.
            self.sendfile_ok = False
            transport.write(rest.read_bytes())
            return
        if sent != part.size:
            # The file shrank under us (truncation); the frame length is already promised.
            transport.write(b"\0" * (part.size - sent))
            log.warning("segment shrank during sendfile to %s", self.peer)
