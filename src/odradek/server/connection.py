"""One client connection: read length-prefixed frames, dispatch them in order, write responses.

Like Kafka, a connection has one request in flight at a time (Kafka mutes the channel), so
responses leave in request order. Framing errors close only this connection.

Reading is an :class:`asyncio.BufferedProtocol`: the event loop receives straight into a buffer
the connection owns, and each request reaches its handler as a ``memoryview`` of that buffer, so
a Produce request's record batches are not copied between the socket and the segment file. A
fast client cannot make the broker buffer without bound: reading pauses while
``_READ_AHEAD_BYTES`` of whole requests wait, as Kafka stops reading a muted channel.

On an SSL or SASL_SSL listener the connection first completes a TLS handshake (``start_tls``,
so a failed handshake is logged with its reason), and Fetch responses are copied rather than sent
with ``sendfile``. On a SASL listener only ApiVersions, SaslHandshake and SaslAuthenticate are
served until the client has authenticated; a failed authentication closes the connection after
``connection.failed.authentication.delay.ms``, and a session past ``connections.max.reauth.ms``
is closed at its next request unless it re-authenticates first (KIP-368).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import errno
import logging
import os
import ssl
import struct
import time
import typing
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
from odradek.security.listeners import Listener
from odradek.security.sasl import SaslFailure, SaslSession
from odradek.security.tls import certificate_principal
from odradek.server.context import FrameParts, RequestContext
from odradek.server.registry import HANDLERS
from odradek.server.services import BrokerServices, Session
from odradek.storage import ReadSlice

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
# What a SASL listener serves before the client has authenticated (Kafka's
# SaslServerAuthenticator; anything else closes the connection).
_BEFORE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
# A TLS record's first bytes (handshake content type 22, major version 3), as a size prefix.
_TLS_HELLO_PREFIX = b"\x16\x03"
_TLS_HANDSHAKE_TIMEOUT_S = 10.0
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
# Below this, a pread and one write cost fewer syscalls and event-loop turns than sendfile,
# which must first drain the transport's buffer.
SENDFILE_MIN_BYTES = 64 * 1024
_WRITE_HIGH_WATER = 4 * 1024 * 1024
# Whole requests received but not yet handled, past which reading pauses until half are handled.
_READ_AHEAD_BYTES = 4 * 1024 * 1024
# Receive buffers start small (most connections carry small requests) and double while they keep
# filling, up to _MAX_BUFFER; a request larger than that gets a buffer of its own size.
_MIN_BUFFER = 64 * 1024
_MAX_BUFFER = 1024 * 1024
# Responses to a burst of pipelined requests are sent together, up to this many bytes at a time.
_CORK_BYTES = 256 * 1024
# A receive into less room than this costs a syscall for too few bytes: take a new buffer instead.
_MIN_READ = 16 * 1024


class _FdFile:
    """The part of a file object ``loop.sendfile`` needs, over a borrowed fd."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


class CloseConnection(Exception):
    """The client sent something that ends the connection, as Kafka ends it."""


def _unexported(buffer: bytearray) -> bool:
    """Whether no memoryview of ``buffer`` is alive, so its bytes may be overwritten.

    A bytearray refuses to change size while exported; shrinking by one byte and growing back
    stays within its allocation, so the probe costs no copy.
    """
    last = buffer[-1]
    try:
        del buffer[-1:]
    except BufferError:
        return False
    buffer.append(last)
    return True


class Connection(asyncio.BufferedProtocol):
    """The protocol object of one accepted socket; :meth:`serve` is its request loop, run by
    ``on_open`` (the broker's accept callback, which tracks it) as a task of its own."""

    def __init__(
        self,
        services: BrokerServices,
        on_open: Callable[[Connection], Coroutine[Any, Any, None]],
        listener: Listener | None = None,
    ) -> None:
        self.services = services
        self._on_open = on_open
        self.listener = listener if listener is not None else Listener.plaintext()
        self._max_request = services.config.get_int("socket.request.max.bytes")
        self.transport: asyncio.Transport | None = None
        self.session = Session("?")
        self.sendfile_ok = False
        self._socket_fd = -1  # for sendfile straight to the socket (plaintext only)
        self.last_active_ms = services.clock.monotonic_ms()
        self.busy = False
        self._counters = services.counters.requests if services.counters is not None else None
        self._task: asyncio.Task[None] | None = None
        # Received bytes: [_start, _end) of _buffer is not yet split into frames, and the frame
        # being received ends at _frame_end (or its size prefix does, while that is incomplete).
        self._buffer = bytearray()
        self._view: memoryview | None = None
        self._buffer_size = _MIN_BUFFER
        self._start = 0
        self._end = 0
        self._frame_end = 4
        self._frames: collections.deque[memoryview] = collections.deque()
        # With metrics on: when each frame of _frames was received (perf_counter_ns).
        self._arrivals: collections.deque[int] = collections.deque()
        self._queued_bytes = 0
        self._reading_paused = False
        self._frame_waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._lost = False
        self._framing_error: str | None = None
        self._writing_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._corked: list[bytes] = []
        self._corked_bytes = 0
        self._arrived = 0

    @property
    def peer(self) -> str:
        return self.session.peer

    # -- protocol callbacks (the event loop calls these) -----------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = typing.cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        listener = self.listener
        self.session = Session(
            f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer),
            listener=listener.name,
            sasl=SaslSession(listener.sasl) if listener.sasl is not None else None,
        )
        self.sendfile_ok = listener.ssl_context is None
        if self.sendfile_ok:
            sock = transport.get_extra_info("socket")
            self._socket_fd = sock.fileno() if sock is not None else -1
        if listener.ssl_context is not None:
            # The client's first bytes belong to the TLS handshake that serve() starts: none
            # may be read as a request before then.
            self.transport.pause_reading()
        else:
            self.transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        self._task = asyncio.get_running_loop().create_task(self._on_open(self))

    def get_buffer(self, sizehint: int) -> memoryview:
        room = len(self._buffer) - self._end
        size_known = self._end - self._start >= 4
        if (
            self._view is None
            or room < self._frame_end - self._end
            or (not size_known and room < _MIN_READ)
        ):
            self._make_room()
        assert self._view is not None
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._framing_error is not None:
            return  # reading stopped; bytes that were already in flight are dropped
        self._end += nbytes
        self._split_frames()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        return True  # keep the transport: responses to requests already received still go out

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._frames.clear()
        self._arrivals.clear()
        self._queued_bytes = 0
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

    # -- receive buffer ---------------------------------------------------------------------------

    def _make_room(self) -> None:
        """Give the frame being received a buffer it fits in, with room to read into.

        Frames already handed out are views of the current buffer, so it is reused only when
        none is alive; otherwise a new one is taken and the old one lives as long as they do.
        Only the partial frame is copied.
        """
        old, old_view = self._buffer, self._view
        partial = self._end - self._start
        if old_view is not None and partial < len(old) // 2:
            # The old buffer filled up with frames: the client is busy, so read in bigger gulps.
            self._buffer_size = min(self._buffer_size * 2, _MAX_BUFFER)
        size = max(self._frame_end - self._start, self._buffer_size)
        if old_view is not None:
            old_view.release()
        if size <= len(old) <= max(size, _MAX_BUFFER) and _unexported(old):
            buffer = old
            view = memoryview(buffer)
            view[:partial] = view[self._start : self._end]
        else:
            buffer = bytearray(size)
            view = memoryview(buffer)
            if partial:
                with memoryview(old) as source:
                    view[:partial] = source[self._start : self._end]
        self._buffer, self._view = buffer, view
        self._frame_end -= self._start
        self._start, self._end = 0, partial

    def _shed_big_buffer(self) -> None:
        """Between requests, let go of a buffer that only one outsized request needed."""
        if len(self._buffer) > _MAX_BUFFER and self._start == self._end and not self._frames:
            if self._view is not None:
                self._view.release()
            self._buffer, self._view = bytearray(), None
            self._start = self._end = 0
            self._frame_end = 4

    def _split_frames(self) -> None:
        view = self._view
        assert view is not None
        start, end = self._start, self._end
        # Frames completed by one read arrived together: one clock reading serves them all.
        arrived = time.perf_counter_ns() if self._counters is not None else 0
        while end - start >= 4:
            (size,) = _INT32.unpack_from(view, start)
            if size < 0 or size > self._max_request:
                prefix = bytes(view[start : start + 4])
                hint = (
                    " (an HTTP request?)"
                    if prefix.isalpha()
                    else " (a TLS handshake on a plaintext listener?)"
                    if prefix.startswith(_TLS_HELLO_PREFIX)
                    else ""
                )
                self._stop_reading(
                    f"frame of {size} bytes is outside 0..socket.request.max.bytes "
                    f"({self._max_request}){hint}"
                )
                break
            if size < 8:
                self._stop_reading(f"frame of {size} bytes is too short for a header")
                break
            frame_end = start + 4 + size
            if frame_end > end:
                break
            self._frames.append(view[start + 4 : frame_end])
            if self._counters is not None:
                self._arrivals.append(arrived)
            self._queued_bytes += size
            start = frame_end
        self._start = start
        self._frame_end = start + 4 + size if end - start >= 4 else start + 4
        if self._frames:
            self._wake_reader()
            if self._queued_bytes >= _READ_AHEAD_BYTES and not self._reading_paused:
                self._reading_paused = True
                assert self.transport is not None
                self.transport.pause_reading()

    def _stop_reading(self, reason: str) -> None:
        # Requests before the bad frame are still answered; the close comes in their order.
        self._framing_error = reason
        self._wake_reader()
        assert self.transport is not None
        self.transport.pause_reading()

    def _wake_reader(self) -> None:
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _next_frame(self) -> memoryview | None:
        """The next request frame (without its size prefix), or None once the client is gone;
        with metrics on, :attr:`_arrived` is when it was received."""
        while not self._frames:
            if self._framing_error is not None:
                raise CloseConnection(self._framing_error)
            if self._lost or self._eof:
                if self._end > self._start and not self._lost:
                    log.info("connection from %s closed in the middle of a request", self.peer)
                return None
            self._frame_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._frame_waiter
            finally:
                self._frame_waiter = None
        frame = self._frames.popleft()
        if self._counters is not None:
            self._arrived = self._arrivals.popleft()
        self._queued_bytes -= len(frame)
        if self._reading_paused and self._queued_bytes <= _READ_AHEAD_BYTES // 2:
            self._reading_paused = False
            if self._framing_error is None:
                assert self.transport is not None
                self.transport.resume_reading()
        return frame

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
        if self.session.sasl is None:
            self.session.principal = certificate_principal(transport.get_extra_info("ssl_object"))
        return True

    async def _close_after_failed_authentication(self, reason: str) -> None:
        # Kafka delays the close so that a client guessing passwords gets few tries a second;
        # nothing more is read meanwhile.
        assert self.transport is not None
        self._framing_error = reason
        self.transport.pause_reading()
        self._uncork()
        await asyncio.sleep(self.listener.failed_auth_delay_ms / 1000)
        raise CloseConnection(reason)

    async def serve(self) -> None:
        if self.listener.ssl_context is not None and not await self._start_tls():
            return
        counters = self._counters
        timing = None
        if counters is not None:
            # This task's context, copied by any task a handler starts: the purgatory adds the
            # request's waits to it (Kafka's RemoteTime).
            timing = RequestTiming()
            current_request.set(timing)
        try:
            while True:
                frame = await self._next_frame()
                if frame is None:
                    return
                self.busy = True
                if timing is not None:
                    started = time.perf_counter_ns()
                    timing.reset()
                    (api_key,) = _INT16.unpack_from(frame)
                    sasl = self.session.sasl
                    if sasl is not None and sasl.legacy_tokens:
                        api_key = SASL_AUTHENTICATE_KEY  # a bare token has no header
                try:
                    response = await self.dispatch(frame)
                    # A live view would keep the receive buffer from being reused.
                    del frame
                    if timing is not None:
                        handled = time.perf_counter_ns()
                    if response is not None:
                        await self.write(response)
                    sasl = self.session.sasl
                    if sasl is not None and sasl.failure is not None:
                        await self._close_after_failed_authentication(sasl.failure)
                    if counters is not None and timing is not None:
                        # Kafka's ResponseSendTimeMs ends when the response is sent; here, when
                        # the transport has it (or, corked, when it will go at this loop turn).
                        remote = min(timing.remote_ns, handled - started)
                        counters.handled(
                            api_key,
                            queue_ns=started - self._arrived,
                            local_ns=handled - started - remote,
                            remote_ns=remote,
                            send_ns=time.perf_counter_ns() - handled,
                        )
                    self._shed_big_buffer()
                finally:
                    self.busy = False
                    self.last_active_ms = self.services.clock.monotonic_ms()
        except CloseConnection as e:
            log.warning("closing connection from %s: %s", self.peer, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
        finally:
            if self.transport is not None:
                self._uncork()
                self.transport.close()

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

    async def dispatch(self, frame: memoryview) -> bytes | FrameParts | None:
        sasl = self.session.sasl
        if sasl is not None and sasl.legacy_tokens and sasl.mechanism is not None:
            return self._legacy_sasl_token(sasl, bytes(frame))
        api_key, api_version, correlation_id = peek_header(frame)
        handler = HANDLERS.get(api_key)
        if handler is None:
            raise CloseConnection(f"unknown API key {api_key}")
        if sasl is not None and api_key not in _BEFORE_AUTHENTICATION:
            if not sasl.authenticated:
                raise CloseConnection(
                    f"API key {api_key} before SASL authentication on listener {self.listener.name}"
                )
            if sasl.expired(self.services.clock.monotonic_ms()):
                raise CloseConnection(
                    "SASL session expired (connections.max.reauth.ms) without re-authentication"
                )
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
        context = RequestContext(self.services, header, self.session)
        response = await handler.fn(context, request)
        if response is None:
            return None
        if isinstance(response, FrameParts | bytes):
            return response
        return encode_response(correlation_id, response)

    def _legacy_sasl_token(self, sasl: SaslSession, token: bytes) -> bytes | None:
        """A SASL token after SaslHandshake v0: the answer goes back as a bare frame too; a
        failure has no answer (Kafka just closes)."""
        try:
            answer, complete = sasl.authenticate(token, self.services.clock.monotonic_ms())
        except SaslFailure:
            return None  # serve() sees sasl.failure and closes after the delay
        if complete:
            assert sasl.principal is not None
            self.session.principal = sasl.principal
            sasl.legacy_tokens = False
        return _INT32.pack(len(answer)) + answer

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
        if isinstance(response, bytes) and self._frames:
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
        if self._lost:
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
