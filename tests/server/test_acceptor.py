"""The acceptor over a real listening socket: what an accepted connection is set up with."""

from __future__ import annotations

import asyncio
import socket


class _Kept(asyncio.Protocol):
    """Hands the server side's transport to the test."""

    def __init__(self, made: asyncio.Future[asyncio.BaseTransport]) -> None:
        self._made = made

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._made.set_result(transport)


def test_an_accepted_connection_sends_without_nagle() -> None:
    # Kafka's acceptor sets TCP_NODELAY; asyncio would not here (the listening socket is not
    # made with IPPROTO_TCP), and the tail of a big answer then waited for a delayed ACK.
    from odradek.server.acceptor import Acceptor

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[asyncio.BaseTransport] = loop.create_future()
        acceptor = Acceptor.bind("127.0.0.1", 0, lambda: _Kept(made), lambda e: None)
        acceptor.start_serving()
        port = acceptor.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        try:
            transport = await asyncio.wait_for(made, 10)
            server_side: socket.socket = transport.get_extra_info("socket")
            nodelay = server_side.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            transport.close()
            return nodelay
        finally:
            client.close()
            acceptor.close()

    assert asyncio.run(scenario()) != 0
