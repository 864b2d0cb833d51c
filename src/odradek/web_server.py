"""An aiohttp application served on a thread of its own with an event loop of its own: the one
HTTP stack of the broker's HTTP listeners (the schema registry's, and ``metrics.listener`` with
``/metrics`` and the web console) and of ``odradek console``.

Never on the broker's event loop: a handler may wait (for the broker's loop, for a Kafka
answer) without holding up a client of the broker. What a handler must not do on this server's
loop (block on a lock, a socket, another loop) it hands to :meth:`WebServer.run_blocking`, the
loop's pool of at most ``blocking_threads`` threads, so a slow answer delays only its own
request.

What comes from aiohttp: routing, HTTP/1.1 parsing (header and line sizes), request bodies
(``client_max_size`` of the application: past it, 413), TLS (an :class:`ssl.SSLContext`), and
idle connections closed after ``idle_timeout_s`` (from the start of a connection that never
sends a request too). What this module adds is a cap on connections open at once
(``max_connections``): past it, a new connection is answered ``503 too many open connections``
and closed, so that clients which open connections and keep them cannot pile them up. A
connection counts once it is made (for TLS, after its handshake, which asyncio bounds by its
handshake timeout) until it closes.

Threads: :meth:`WebServer.start` and :meth:`WebServer.stop` from any thread but the server's
own; the application is built (``make_app``) and served on the server's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import ssl
import threading
from collections.abc import Callable
from typing import TypeVar

from aiohttp import web

T = TypeVar("T")

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 30.0
# How long a stop waits for requests in progress to finish before closing their connections.
_SHUTDOWN_TIMEOUT_S = 2.0
IDLE_TIMEOUT_S = 60.0
BLOCKING_THREADS = 32
_TURN_AWAY_S = 5.0
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 25\r\nConnection: close\r\n\r\ntoo many open connections"
)


class _ProtocolLog(logging.Logger):
    """aiohttp's reports of requests it could not parse, at DEBUG: any client can send a
    malformed request (it is answered 400), and a traceback at ERROR for each would let it fill
    the broker's log. Errors of the handlers themselves are logged by the applications."""

    def exception(self, msg: object, *args: object, exc_info: object = True, **kw: object) -> None:
        self.debug(msg, *args, exc_info=exc_info, **kw)  # type: ignore[arg-type]


_PROTOCOL_LOG = _ProtocolLog(f"{__name__}.protocol")
_PROTOCOL_LOG.parent = log


class _Capped(asyncio.Protocol):
    """A connection under the cap: aiohttp's protocol once the connection is made, if fewer
    than the cap are open; else ``503`` and closed. Counted from its ``connection_made`` to its
    ``connection_lost`` (asyncio calls the one only after the other, and for TLS only after the
    handshake), each checked and counted on the server's loop, so the count is exact."""

    def __init__(self, owner: WebServer, make: Callable[[], asyncio.Protocol]) -> None:
        self._owner = owner
        self._make = make
        self._inner: asyncio.Protocol | None = None
        self._turned_away: asyncio.Transport | None = None
        self._seen = b""  # the last bytes of a turned-away connection's request

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        owner, cap = self._owner, self._owner.max_connections
        if cap is not None and owner.open_connections >= cap:
            self._turn_away(transport)
            return
        owner.open_connections += 1
        self._inner = self._make()
        self._inner.connection_made(transport)

    def _turn_away(self, transport: asyncio.BaseTransport) -> None:
        """Answer 503 and end the connection. Closing a socket with a request still unread
        would reset it, losing the answer: the client's side is read (and dropped) until the
        end of its request's head or of the connection, or for at most ``_TURN_AWAY_S``."""
        assert isinstance(transport, asyncio.Transport)
        self._turned_away = transport
        transport.write(_BUSY)
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(_TURN_AWAY_S, transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is not None:
            self._owner.open_connections -= 1
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)
        elif self._turned_away is not None:
            seen = self._seen + data
            if b"\r\n\r\n" in seen:
                self._turned_away.close()
            self._seen = seen[-3:]

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


class WebServer:
    """``make_app``'s application on ``host:port`` (see the module doc). :attr:`bound` is the
    address it listens on once started."""

    def __init__(
        self,
        make_app: Callable[[], web.Application],
        *,
        name: str,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        blocking_threads: int = BLOCKING_THREADS,
    ) -> None:
        self._make_app = make_app
        self._name = name
        self.ssl_context = ssl_context
        self.max_connections = max_connections
        self._idle_timeout_s = idle_timeout_s
        self._blocking = concurrent.futures.ThreadPoolExecutor(
            blocking_threads, thread_name_prefix=f"{name}-blocking"
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.AbstractServer | None = None
        self.open_connections = 0  # now (touched on the server's loop only)
        self.bound: tuple[str, int] = ("", 0)

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind ``host:port`` (port 0: any free port) and serve; raises :class:`OSError` when
        the address cannot be bound."""
        started: concurrent.futures.Future[tuple[str, int]] = concurrent.futures.Future()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                bound = loop.run_until_complete(self._serve(host, port))
            except BaseException as e:  # the caller sees why the bind failed
                loop.run_until_complete(self._cleanup())
                loop.close()
                started.set_exception(e)
                return
            started.set_result(bound)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._cleanup())
                loop.close()

        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        self.bound = started.result(timeout=_START_TIMEOUT_S)
        return self.bound

    async def _serve(self, host: str, port: int) -> tuple[str, int]:
        runner = web.AppRunner(
            self._make_app(),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=_SHUTDOWN_TIMEOUT_S,
            keepalive_timeout=self._idle_timeout_s,
            logger=_PROTOCOL_LOG,
        )
        self._runner = runner
        await runner.setup()
        server = runner.server
        assert server is not None

        def accept() -> asyncio.BaseProtocol:
            return _Capped(self, server)

        # The listening socket is ours rather than a web.TCPSite's: its protocol factory is
        # where a connection past the cap is turned away.
        self._listener = await asyncio.get_running_loop().create_server(
            accept, host, port, ssl=self.ssl_context, reuse_address=True
        )
        address = self._listener.sockets[0].getsockname()
        return str(address[0]), int(address[1])

    async def _cleanup(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def stop(self) -> None:
        """Stop accepting, finish or close the connections, end the thread (blocks)."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_STOP_TIMEOUT_S)
        # Not waiting for calls in progress: one may wait a minute for a cluster that is going
        # away with this process; its answer has nowhere to go now anyway.
        self._blocking.shutdown(wait=False, cancel_futures=True)

    async def run_blocking(self, call: Callable[[], T]) -> T:
        """``call()`` on the server's blocking threads (see the module doc), from a handler."""
        return await asyncio.get_running_loop().run_in_executor(self._blocking, call)
