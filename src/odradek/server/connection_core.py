"""The server side of one client connection, without I/O: bytes in, request frames or a close out.

In the manner of h11 (and hypercorn's protocol cores), :class:`ConnectionCore` owns no socket.
The asyncio :class:`~odradek.server.connection.Connection` receives straight into
:meth:`~ConnectionCore.get_buffer`, reports the count to :meth:`~ConnectionCore.buffer_updated`,
takes requests out with :meth:`~ConnectionCore.next_request` and, after each is answered (in
the order they were taken), calls :meth:`~ConnectionCore.request_done`; it asks
:attr:`~ConnectionCore.reading` whether the socket should be read, and is told through
``on_reading_change`` when that changes without it asking.

What the core decides:

- **framing** (:class:`~odradek.protocol.framing.FrameReader`): a size outside
  0..``socket.request.max.bytes`` closes the connection, after the requests before it are
  answered (the close comes in request order). Frames are views of the receive buffer.
- **read-ahead**: reading pauses while ``read_ahead_bytes`` of whole requests wait, and resumes
  when half are handled, as Kafka stops reading a muted channel.
- **memory** (:class:`~odradek.server.memory_pool.MemoryPool`, ``queued.max.request.bytes``):
  every byte received is charged to the broker-wide pool until its request is handled; while
  the pool is exhausted the connection stops reading (it is not closed) until memory is released.
- **the SASL gate**: on a SASL listener only ApiVersions, SaslHandshake and SaslAuthenticate are
  served before authentication; after SaslHandshake v0 the tokens come as bare frames with no
  request header; a session past ``connections.max.reauth.ms`` is closed at its next request
  unless it re-authenticated first (KIP-368).

Event-loop thread only, like the connection that drives it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from odradek.protocol.framing import PREFIX_BYTES, FrameReader, FrameSizeError, framed
from odradek.security.sasl import SaslFailure
from odradek.server.memory_pool import MemoryPool
from odradek.server.services import Session

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
# What a SASL listener serves before the client has authenticated (Kafka's
# SaslServerAuthenticator; anything else closes the connection).
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
# api key (2), api version (2), correlation id (4): the least a request header holds.
_HEADER_BYTES = 8
# Whole requests received but not yet handled, past which reading pauses until half are handled.
READ_AHEAD_BYTES = 4 * 1024 * 1024
# Receive buffers start small (most connections carry small requests) and double while they keep
# filling, up to MAX_BUFFER; a larger request gets a buffer that grows with its bytes.
MIN_BUFFER = 64 * 1024
MAX_BUFFER = 1024 * 1024
# A receive into less room than this costs a syscall for too few bytes: take a new buffer instead.
MIN_READ = 16 * 1024


class CloseConnection(Exception):
    """The client sent something that ends the connection, as Kafka ends it."""


class ConnectionCore:
    """The protocol state of one accepted connection (see the module doc).

    ``arrival_clock``, when given (metrics on), stamps each request with when it was received
    (:attr:`arrived`, for Kafka's RequestQueueTimeMs).
    """

    def __init__(
        self,
        session: Session,
        *,
        max_request_bytes: int,
        pool: MemoryPool | None = None,
        read_ahead_bytes: int = READ_AHEAD_BYTES,
        arrival_clock: Callable[[], int] | None = None,
        on_reading_change: Callable[[], None] | None = None,
    ) -> None:
        self.session = session
        self.max_request_bytes = max_request_bytes
        self.pool = pool if pool is not None else MemoryPool(0)
        self.read_ahead_bytes = read_ahead_bytes
        self._clock = arrival_clock
        self.on_reading_change = on_reading_change
        self._reader = FrameReader(
            max_request_bytes, min_buffer=MIN_BUFFER, max_buffer=MAX_BUFFER, min_read=MIN_READ
        )
        self._taken_bytes = 0  # of the reader's cut_bytes
        # With arrival_clock: when each frame waiting in the reader was received.
        self._arrivals: deque[int] = deque()
        self.arrived = 0
        # Bytes charged to the pool, and how many of them belong to whole requests.
        self._charged = 0
        self._charged_whole = 0
        # Charged bytes of each request taken and not yet answered, oldest first.
        self._handling: deque[int] = deque()
        self._ahead_full = False
        self._pool_waiting = False
        self._overdraft = False
        self.closing: str | None = None  # why no more requests are read
        self.eof = False
        self.lost = False

    # -- receiving -------------------------------------------------------------------------------

    @property
    def reading(self) -> bool:
        """Whether the socket should be read now."""
        return not (self.closing is not None or self.lost or self._ahead_full or self._pool_waiting)

    @property
    def queued_bytes(self) -> int:
        """Bytes of whole requests received and not yet taken (size prefixes not counted)."""
        return self._reader.cut_bytes - self._taken_bytes

    @property
    def has_requests(self) -> bool:
        """Whether whole requests are waiting to be taken."""
        return bool(self._reader.frames)

    def get_buffer(self) -> memoryview:
        """Where to receive the next bytes; within what the pool has left, so that connections
        woken together overshoot it by little."""
        view = self._reader.get_buffer()
        pool = self.pool
        if pool.limit > 0 and not self._overdraft:
            room = max(pool.limit - pool.used, MIN_READ)
            if room < len(view):
                return view[:room]
        return view

    def buffer_updated(self, nbytes: int) -> None:
        if self.closing is not None or self.lost:
            return  # reading stopped; bytes that were already in flight are dropped
        reader = self._reader
        pool = self.pool
        pool.take(nbytes)
        self._charged += nbytes
        before = len(reader.frames)
        before_bytes = reader.cut_bytes
        try:
            reader.buffer_updated(nbytes)
        except FrameSizeError as e:
            self.stop(
                f"frame of {e.size} bytes is outside 0..socket.request.max.bytes "
                f"({self.max_request_bytes}){e.hint}"
            )
        added = len(reader.frames) - before
        if added:
            whole = reader.cut_bytes - before_bytes + PREFIX_BYTES * added
            self._charged_whole += whole
            pool.complete(whole)
            if self._clock is not None:
                now = self._clock()
                self._arrivals.extend([now] * added)
            if self._overdraft:
                self._overdraft = False
                pool.end_overdraft(self._pool_ready)
            if reader.cut_bytes - self._taken_bytes >= self.read_ahead_bytes:
                self._ahead_full = True
        if pool.exhausted and not (self._overdraft or self._pool_waiting or self.closing):
            self._pool_waiting = True
            pool.wait(self._pool_ready, reader.partial > 0)

    def _pool_ready(self, overdraft: bool) -> None:
        self._pool_waiting = False
        self._overdraft = overdraft
        if self.on_reading_change is not None:
            self.on_reading_change()

    def stop(self, reason: str) -> None:
        """Read no more: requests already received are still taken, then ``reason`` closes."""
        if self.closing is None:
            self.closing = reason
            if self.on_reading_change is not None:
                self.on_reading_change()

    def eof_received(self) -> None:
        self.eof = True

    def connection_lost(self) -> None:
        """The socket is gone: nothing more is taken, and the pool gets everything back."""
        self.lost = True
        self._reader.clear()
        self._taken_bytes = self._reader.cut_bytes
        self._arrivals.clear()
        self._release_all()

    @property
    def ended(self) -> bool:
        """Whether no request will come any more (the client closed, or the socket is gone)."""
        return self.lost or self.eof

    @property
    def ended_mid_request(self) -> bool:
        """Whether the client closed its side with a request partly sent."""
        return self.eof and not self.lost and self._reader.partial > 0

    # -- requests --------------------------------------------------------------------------------

    def next_request(self) -> memoryview | None:
        """The next request frame (without its size prefix; a bare token after SaslHandshake v0),
        or None while there is none (see :attr:`ended`). Raises :class:`CloseConnection` once the
        requests before a reason to close are taken."""
        reader = self._reader
        if not reader.frames:
            if self.closing is not None:
                raise CloseConnection(self.closing)
            return None
        frame = reader.frames.popleft()
        self._taken_bytes += len(frame)
        if self._clock is not None:
            self.arrived = self._arrivals.popleft()
        self._handling.append(len(frame) + PREFIX_BYTES)
        if self._ahead_full and self.queued_bytes <= self.read_ahead_bytes // 2:
            self._ahead_full = False
            if self.on_reading_change is not None:
                self.on_reading_change()
        if len(frame) < _HEADER_BYTES and not self.expects_legacy_token:
            size = len(frame)
            self.stop(f"frame of {size} bytes is too short for a header")
            raise CloseConnection(self.closing)
        assert isinstance(frame, memoryview)
        return frame

    def request_done(self) -> None:
        """The oldest request taken and not yet answered is answered: its bytes go back to the
        pool."""
        handled = self._handling.popleft() if self._handling else 0
        if handled and not self.lost:
            self._charged -= handled
            self._charged_whole -= handled
            self.pool.release(handled, handled)

    def shed(self) -> None:
        """Between requests, let go of a buffer that only one outsized request needed."""
        self._reader.shed()

    def _release_all(self) -> None:
        pool = self.pool
        pool.cancel(self._pool_ready)
        self._pool_waiting = self._overdraft = False
        charged, whole = self._charged, self._charged_whole
        self._charged = self._charged_whole = 0
        self._handling.clear()
        if charged:
            pool.release(charged, whole)

    # -- the SASL gate ---------------------------------------------------------------------------

    @property
    def expects_legacy_token(self) -> bool:
        """Whether the next frame is a bare SASL token (after SaslHandshake v0), not a request."""
        sasl = self.session.sasl
        return sasl is not None and sasl.legacy_tokens and sasl.mechanism is not None

    def admit(self, api_key: int, now_ms: int) -> None:
        """Raises :class:`CloseConnection` if a request of ``api_key`` may not be served now."""
        sasl = self.session.sasl
        if sasl is None or api_key in BEFORE_AUTHENTICATION:
            return
        if not sasl.authenticated:
            raise CloseConnection(
                f"API key {api_key} before SASL authentication on listener {self.session.listener}"
            )
        if sasl.expired(now_ms):
            raise CloseConnection(
                "SASL session expired (connections.max.reauth.ms) without re-authentication"
            )

    def legacy_token(self, token: bytes, now_ms: int) -> bytes | None:
        """The answer to a bare SASL token, as a bare frame too; None after a failure (Kafka just
        closes: :attr:`authentication_failure` says why)."""
        sasl = self.session.sasl
        assert sasl is not None
        try:
            answer, complete = sasl.authenticate(token, now_ms)
        except SaslFailure:
            return None
        if complete:
            assert sasl.principal is not None
            self.session.principal = sasl.principal
            sasl.legacy_tokens = False
        return framed(answer)

    @property
    def authentication_failure(self) -> str | None:
        """Why authentication failed, once it has: the connection closes (after a delay)."""
        sasl = self.session.sasl
        return sasl.failure if sasl is not None else None
