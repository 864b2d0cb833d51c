"""A listening socket served on the event loop, with a bounded answer to running out of fds.

asyncio's own servers (Python 3.11) meet an ``accept`` that fails for want of descriptors or
memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) by reporting it and scheduling a retry a second later,
once for each of up to ``backlog`` attempts per wakeup, and each retry wakes the listener
again: the retries and their reports multiply every second (a broker out of descriptors wrote
hundreds of megabytes of log in minutes and stopped answering).  An :class:`Acceptor` stops
listening on the first such failure, reports it once to ``on_error``, and listens again a second
later; connections waiting meanwhile stay in the kernel's backlog.  Accepted sockets get
TCP_NODELAY and become transports through ``loop.connect_accepted_socket``, as asyncio's servers
make them.

With :class:`~odradek.server.connection_quotas.ConnectionQuotas`, the acceptor asks before each
accept whether its listener may take one more connection (stopping listening until a connection
ends, or until a creation-rate throttle has passed) and after it whether the client's address
may (closing the socket at once when it may not).

Caller: the broker, on the event-loop thread.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

from odradek.server.connection_quotas import (
    UNTIL_A_CONNECTION_ENDS,
    ConnectionQuotas,
    client_address,
)

log = logging.getLogger(__name__)

_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_BACKLOG = 100
ACCEPT_RETRY_S = 1.0


class Acceptor:
    """Accepts connections on ``sockets`` (bound, listening) for ``protocol_factory``."""

    def __init__(
        self,
        sockets: list[socket.socket],
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        on_error: Callable[[OSError], None],
        quotas: ConnectionQuotas | None = None,
        listener: str = "",
    ) -> None:
        self.sockets = sockets
        self._factory = protocol_factory
        self._on_error = on_error
        self._quotas = quotas
        self._listener = listener
        self._held: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()
        self._retries: dict[int, asyncio.TimerHandle] = {}
        self._serving = False
        self._closed = self._loop.create_future()
        self._tasks: set[asyncio.Task[object]] = set()

    @classmethod
    def bind(
        cls,
        host: str,
        port: int,
        protocol_factory: Callable[[], asyncio.BaseProtocol],
        on_error: Callable[[OSError], None],
        quotas: ConnectionQuotas | None = None,
        listener: str = "",
    ) -> Acceptor:
        """Bind ``host:port`` without serving yet: an empty host is every interface (IPv6 and
        IPv4 on one socket where the system can), a name every address it has (the first
        only for port 0, where each socket would get a port of its own)."""
        targets: list[tuple[socket.AddressFamily, tuple[str, int], bool]]
        if not host:
            if socket.has_dualstack_ipv6():
                targets = [(socket.AF_INET6, ("::", port), True)]
            else:
                targets = [(socket.AF_INET, ("0.0.0.0", port), False)]
        else:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            targets = []
            for found_family, _, _, _, address in infos:
                target = (found_family, (str(address[0]), int(address[1])), False)
                if target not in targets:
                    targets.append(target)
            if port == 0:
                targets = targets[:1]
        sockets: list[socket.socket] = []
        try:
            for family, address, dualstack in targets:
                sockets.append(
                    socket.create_server(
                        address, family=family, backlog=_BACKLOG, dualstack_ipv6=dualstack
                    )
                )
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        for sock in sockets:
            sock.setblocking(False)
        return cls(sockets, protocol_factory, on_error, quotas, listener)

    def start_serving(self) -> None:
        self._serving = True
        for sock in self.sockets:
            self._listen(sock)

    def _listen(self, sock: socket.socket) -> None:
        self._retries.pop(sock.fileno(), None)
        if self._serving:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(_BACKLOG):
            if self._quotas is not None and self._hold_back(self._quotas):
                return
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as e:
                if e.errno not in _OUT_OF_RESOURCES:
                    log.warning("accepting a connection failed: %s", e)
                    return
                # Not listening until the retry: the kernel keeps the waiting connections.
                self._loop.remove_reader(sock.fileno())
                self._retries[sock.fileno()] = self._loop.call_later(
                    ACCEPT_RETRY_S, self._listen, sock
                )
                self._on_error(e)
                return
            ip = client_address(address)
            if self._quotas is not None:
                throttle_ms = self._quotas.ip_throttle_ms(ip)
                if throttle_ms > 0:
                    # Kafka closes it after the throttle time: a client reconnecting at once
                    # waits that long to learn it was refused.
                    self._close_at(conn, self._quotas.clock.monotonic_ms() + throttle_ms)
                    continue
                if not self._quotas.opened(self._listener, ip):
                    conn.close()
                    continue
            try:
                conn.setblocking(False)
                # As Kafka's acceptor does. asyncio sets it only on sockets made with
                # IPPROTO_TCP, and ``socket.create_server``'s are not: left to Nagle, the last
                # partial segment of a big answer waited for the client's delayed ACK (40 ms).
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError as e:  # reset already: not worth a connection (nor its quota)
                log.info("dropping a connection from %s: %s", ip, e)
                conn.close()
                if self._quotas is not None:
                    self._quotas.closed(self._listener, ip)
                continue
            task = self._loop.create_task(self._connect(conn, ip))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _close_at(self, conn: socket.socket, due_ms: int) -> None:
        """Close ``conn`` once the limits' clock reaches ``due_ms`` (looked at again after the
        time left, so that an injected clock decides)."""
        assert self._quotas is not None
        left_ms = due_ms - self._quotas.clock.monotonic_ms()
        if left_ms <= 0 or self._closed.done():
            conn.close()
        else:
            self._loop.call_later(left_ms / 1000, self._close_at, conn, due_ms)

    async def _connect(self, conn: socket.socket, ip: str) -> None:
        try:
            await self._loop.connect_accepted_socket(self._factory, conn)
        except OSError as e:
            log.warning("cannot set up an accepted connection: %s", e)
            conn.close()
            if self._quotas is not None:
                self._quotas.closed(self._listener, ip)

    def _hold_back(self, quotas: ConnectionQuotas) -> bool:
        """Stop listening while the listener is at a connection limit or throttled: until a
        connection ends, or for the throttle time. False when it may accept now."""
        wait_ms = quotas.wait_ms(self._listener)
        if wait_ms == 0:
            return False
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
        if wait_ms == UNTIL_A_CONNECTION_ENDS:
            quotas.when_a_connection_ends(self._listener, self._resume)
        elif self._held is None:
            self._held = self._loop.call_later(wait_ms / 1000, self._resume)
        return True

    def _resume(self) -> None:
        self._held = None
        for sock in self.sockets:
            if sock.fileno() not in self._retries and sock.fileno() >= 0:
                self._listen(sock)

    def close(self) -> None:
        """Stop listening and close the listening sockets; connections are left alone."""
        if self._closed.done():
            return
        self._serving = False
        if self._held is not None:
            self._held.cancel()
            self._held = None
        for sock in self.sockets:
            retry = self._retries.pop(sock.fileno(), None)
            if retry is not None:
                retry.cancel()
            self._loop.remove_reader(sock.fileno())
            sock.close()
        self._closed.set_result(None)

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    async def serve_forever(self) -> None:
        """Serve until closed (or cancelled)."""
        if not self._serving:
            self.start_serving()
        await asyncio.shield(self._closed)
