"""The console's HTTP listener itself, over a raw socket: what it does with request bodies it
cannot or will not read. No cluster is needed: every request here is answered before the API is
asked anything."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from odradek.console.api import ConsoleApi
from odradek.console.server import HttpServer, host_allowed, local_names
from odradek.testing import wait_until

# Long enough for a loaded machine; a server that keeps the connection open fails the test
# through it instead of hanging.
READ_TIMEOUT_S = 20.0


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    # Never started: a request that reached it would not be answered.
    http = HttpServer(None, ConsoleApi("127.0.0.1:1"))
    bound = http.start("127.0.0.1", 0)
    try:
        yield bound
    finally:
        http.stop()


def exchange(address: tuple[str, int], request: bytes) -> bytes:
    """Send ``request`` and read until the server closes the connection."""
    with socket.create_connection(address, timeout=READ_TIMEOUT_S) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_a_body_left_unread_closes_the_connection(server: tuple[str, int]) -> None:
    # The body of a refused cross-site POST is itself a request: it must not be served.
    smuggled = b"GET /static/app.js HTTP/1.1\r\nHost: localhost\r\n\r\n"
    request = (
        b"POST /api/topics HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.test\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(smuggled)
    ) + smuggled
    answer = exchange(server, request)
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert answer.count(b"HTTP/1.1 ") == 1
    assert b"Connection: close" in answer


@pytest.mark.parametrize("length", [b"-1", b"lots"])
def test_a_content_length_that_is_not_a_byte_count(server: tuple[str, int], length: bytes) -> None:
    request = (
        b"POST /api/topics HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + length + b"\r\n\r\n{}"
    )
    answer = exchange(server, request)
    # Refused by aiohttp's parser, which names the header (and closes the connection).
    assert answer.split(b" ", 2)[1] == b"400"
    assert b"Content-Length" in answer.split(b"\r\n\r\n", 1)[1]


def test_a_chunked_body_is_refused(server: tuple[str, int]) -> None:
    request = (
        b"POST /api/topics HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    )
    answer = exchange(server, request)
    assert answer.startswith(b"HTTP/1.1 411 ")
    assert answer.count(b"HTTP/1.1 ") == 1


def test_connections_past_the_limit_are_answered_busy_until_one_ends() -> None:
    http = HttpServer(None, ConsoleApi("127.0.0.1:1"), max_connections=2)
    address = http.start("127.0.0.1", 0)
    try:
        held = [socket.create_connection(address, timeout=READ_TIMEOUT_S) for _ in range(2)]
        # Each held connection has its thread, waiting for a request line.
        answer = exchange(address, b"GET /nothing HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503 ")
        assert answer.endswith(b"too many open connections")
        for sock in held:
            sock.close()

        def served() -> bool:
            # Its thread ends once it reads the end of the closed connection.
            request = b"GET /nothing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            return exchange(address, request).startswith(b"HTTP/1.1 404 ")

        wait_until(served, timeout_s=READ_TIMEOUT_S, what="a slot freed")
    finally:
        http.stop()


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:9090", True),
        ("[::1]:9090", True),
        ("localhost:9090", True),
        ("LOCALHOST", True),
        ("console.example:9090", True),  # named in console.allowed.hosts
        ("rebound.attacker.test:9090", False),
        ("", False),
    ],
)
def test_the_api_answers_only_under_this_machines_names(host: str, allowed: bool) -> None:
    names = local_names(["console.example"])
    assert host_allowed(host, names) is allowed
    assert host_allowed("rebound.attacker.test", local_names(["*"]))


def test_a_page_rebound_to_this_address_cannot_read_the_api(server: tuple[str, int]) -> None:
    request = (
        b"GET /api/topics HTTP/1.1\r\nHost: rebound.attacker.test\r\nConnection: close\r\n\r\n"
    )
    answer = exchange(server, request)
    assert answer.startswith(b"HTTP/1.1 403 ")
    assert b"console.allowed.hosts" in answer
