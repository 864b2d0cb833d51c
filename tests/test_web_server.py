"""The HTTP stack of the broker's listeners (odradek.web_server) over real sockets: the cap on
open connections counted exactly (over TLS too, where a connection counts once its handshake is
done and a failed handshake not at all), handlers' blocking work off the server's loop, and a
stop that does not wait for it."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator

import pytest
from aiohttp import web

from odradek.testing import TestCertificateAuthority, wait_until
from odradek.web_server import WebServer

READ_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context and a client context that trusts it."""
    ca = TestCertificateAuthority(tmp_path_factory.mktemp("certs"))
    issued = ca.issue("server", {"CN": "localhost"}, server=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(issued.keystore_file)
    client = ssl.create_default_context(cafile=str(ca.ca_file))
    client.check_hostname = False
    return server, client


class Blocking:
    """An app whose /wait blocks its (blocking) thread until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.server: WebServer | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/ok", self.ok)
        app.router.add_get("/wait", self.wait)
        return app

    async def ok(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def wait(self, request: web.Request) -> web.Response:
        def block() -> str:
            self.entered.set()
            self.release.wait(READ_TIMEOUT_S)
            return "released"

        assert self.server is not None
        return web.Response(text=await self.server.run_blocking(block))


@pytest.fixture
def blocking() -> Iterator[Blocking]:
    made = Blocking()
    yield made
    made.release.set()


def get(sock: socket.socket, path: str) -> bytes:
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def test_over_tls_a_connection_counts_once_its_handshake_is_done(
    tls: tuple[ssl.SSLContext, ssl.SSLContext], blocking: Blocking
) -> None:
    server_context, client_context = tls
    server = WebServer(
        blocking.app, name="test-http", ssl_context=server_context, max_connections=1
    )
    address = server.start("127.0.0.1", 0)
    try:
        # Handshakes that fail (a plain-text client) never count.
        for _ in range(3):
            with socket.create_connection(address, timeout=READ_TIMEOUT_S) as plain:
                plain.sendall(b"GET /ok HTTP/1.1\r\nHost: localhost\r\n\r\n")
                while plain.recv(65536):
                    pass
        raw = socket.create_connection(address, timeout=READ_TIMEOUT_S)
        held = client_context.wrap_socket(raw, server_hostname="localhost")
        try:
            # The one slot is taken: the next connection is answered 503 over TLS.
            with client_context.wrap_socket(
                socket.create_connection(address, timeout=READ_TIMEOUT_S),
                server_hostname="localhost",
            ) as turned_away:
                answer = get(turned_away, "/ok")
            assert answer.startswith(b"HTTP/1.1 503 ")
            assert answer.endswith(b"too many open connections")
        finally:
            held.close()

        def served() -> bool:
            with client_context.wrap_socket(
                socket.create_connection(address, timeout=READ_TIMEOUT_S),
                server_hostname="localhost",
            ) as sock:
                return get(sock, "/ok").startswith(b"HTTP/1.1 200 ")

        wait_until(served, timeout_s=READ_TIMEOUT_S, what="the slot freed")
    finally:
        server.stop()


def test_blocking_work_leaves_the_loop_free_and_a_stop_does_not_wait_for_it(
    blocking: Blocking,
) -> None:
    server = WebServer(blocking.app, name="test-http")
    blocking.server = server
    address = server.start("127.0.0.1", 0)
    waiting = socket.create_connection(address, timeout=READ_TIMEOUT_S)
    try:
        waiting.sendall(b"GET /wait HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert blocking.entered.wait(READ_TIMEOUT_S)
        with socket.create_connection(address, timeout=READ_TIMEOUT_S) as other:
            assert get(other, "/ok").startswith(b"HTTP/1.1 200 ")
        stopped = threading.Thread(target=server.stop)
        stopped.start()
        stopped.join(READ_TIMEOUT_S)
        assert not stopped.is_alive()  # the blocked call is still blocked
        assert not blocking.release.is_set()
    finally:
        waiting.close()
        blocking.release.set()
        server.stop()


def test_a_port_in_use_is_an_os_error(blocking: Blocking) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        server = WebServer(blocking.app, name="test-http")
        with pytest.raises(OSError):
            server.start("127.0.0.1", taken.getsockname()[1])
        server.stop()


def test_bound_is_the_address_listened_on(blocking: Blocking) -> None:
    server = WebServer(blocking.app, name="test-http")
    host, port = server.start("127.0.0.1", 0)
    try:
        assert (host, port) == server.bound
        assert port != 0
        with socket.create_connection((host, port), timeout=READ_TIMEOUT_S) as sock:
            assert get(sock, "/ok").endswith(b"ok")
    finally:
        server.stop()
