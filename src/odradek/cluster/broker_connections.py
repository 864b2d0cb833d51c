"""Connections from this broker to the brokers of its cluster (itself included), over the
inter-broker listener with its TLS and SASL settings: one per broker, opened when first needed,
dropped when a request over it fails (the next one opens it again), all closed together.

The transaction coordinator's marker channel and the share-state persister ask other brokers
through these. The security settings are read when a connection is first opened: a lone broker
whose only listener is SASL and that never needs another broker needs no credentials of its own.

Nothing durable. The broker's event loop only.
"""

from __future__ import annotations

import asyncio

from odradek.client.aio import AsyncConnection
from odradek.cluster.metadata.view import BrokerEndpoint
from odradek.config import BrokerConfig
from odradek.security.inter_broker import inter_broker_security


class BrokerConnections:
    """The connections to other brokers of one part of this broker (``client_id`` names it)."""

    def __init__(self, config: BrokerConfig, client_id: str, timeout_s: float) -> None:
        self._config = config
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._open: dict[int, AsyncConnection] = {}
        self._closes: set[asyncio.Task[None]] = set()

    async def to(self, endpoint: BrokerEndpoint) -> AsyncConnection:
        """The connection to ``endpoint``'s broker, opened now if there is none."""
        connection = self._open.get(endpoint.node_id)
        if connection is not None and not connection.closed:
            return connection
        connection = await AsyncConnection.open(
            f"{endpoint.host}:{endpoint.port}",
            client_id=self._client_id,
            timeout_s=self._timeout_s,
            security=inter_broker_security(self._config),
        )
        self._open[endpoint.node_id] = connection
        return connection

    def drop(self, node_id: int) -> None:
        """Close the connection to broker ``node_id`` (a request over it failed)."""
        connection = self._open.pop(node_id, None)
        if connection is not None:
            task = asyncio.ensure_future(connection.close())
            self._closes.add(task)
            task.add_done_callback(self._closes.discard)

    async def close(self) -> None:
        connections = list(self._open.values())
        self._open.clear()
        await asyncio.gather(
            *(c.close() for c in connections), *self._closes, return_exceptions=True
        )
