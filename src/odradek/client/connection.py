"""One asyncio connection to a Kafka broker: framing, correlation ids, version negotiation.

Requests are built with :func:`odradek.protocol.messages.build` from version-independent fields,
so a caller names the highest version it is written for and the connection picks the highest one
both it and the broker (from ApiVersions) support. One request is in flight at a time, as Kafka's
clients keep it per connection for ordered responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    RequestHeader,
    build,
    decode_response,
    encode_request,
    request_schema,
    response_schema,
)

API_VERSIONS = 18
_API_VERSIONS_VERSION = 3
_INT32 = struct.Struct(">i")
DEFAULT_TIMEOUT_S = 30.0


class ClientError(Exception):
    """The broker could not be reached, or answered something this client cannot use."""


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``, or a bare host) → (host, port)."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit():
        return address.strip().strip("[]"), default_port
    return host.strip("[]"), int(port)


class BrokerConnection:
    """A connection to one broker. Use :meth:`open`; close with :meth:`close`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        timeout_s: float,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._correlation = itertools.count(1)
        self._lock = asyncio.Lock()
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "odradek-client",
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> BrokerConnection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=1 << 24), timeout_s
            )
        except (OSError, TimeoutError) as e:
            raise ClientError(f"cannot connect to {host}:{port}: {e}") from e
        connection = cls(reader, writer, client_id, timeout_s)
        try:
            await connection._negotiate()
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _negotiate(self) -> None:
        response = await self.send(
            API_VERSIONS,
            _API_VERSIONS_VERSION,
            {"client_software_name": "odradek", "client_software_version": "0.1.0"},
        )
        if response.error_code != ErrorCode.none:
            raise ClientError(f"ApiVersions failed: {response.error_code.name}")
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def version_for(self, api_key: int, highest: int, lowest: int = 0) -> int:
        """The version to speak: the highest both sides have, within ``lowest..highest``."""
        broker = self.versions.get(api_key)
        if broker is None:
            raise ClientError(f"the broker does not serve API key {api_key}")
        version = min(highest, broker[1])
        if version < max(lowest, broker[0]):
            raise ClientError(
                f"no common version of API key {api_key}: broker {broker[0]}..{broker[1]}, "
                f"client {lowest}..{highest}"
            )
        return version

    async def request(self, api_key: int, fields: dict[str, Any], *, highest: int) -> Any:
        """Send a request of the best common version up to ``highest``; the decoded response."""
        return await self.send(api_key, self.version_for(api_key, highest), fields)

    async def send(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        """Send a request of exactly ``version``; the decoded response."""
        body = await self.exchange(api_key, version, fields)
        _, response = decode_response(response_schema(api_key, version), body)
        return response

    async def exchange(self, api_key: int, version: int, fields: dict[str, Any]) -> bytes:
        """Send a request of exactly ``version``; the response frame (header and body), checked
        to answer this request."""
        async with self._lock:
            correlation_id = next(self._correlation)
            payload = build(request_schema(api_key, version), fields)
            frame = encode_request(
                RequestHeader(api_key, version, correlation_id, self.client_id), payload
            )
            try:
                self._writer.write(frame)
                await self._writer.drain()
                (size,) = _INT32.unpack(
                    await asyncio.wait_for(self._reader.readexactly(4), self.timeout_s)
                )
                body = await asyncio.wait_for(self._reader.readexactly(size), self.timeout_s)
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
                raise ClientError(f"request {api_key} v{version} failed: {e!r}") from e
            (got,) = _INT32.unpack_from(body, 0)
            if got != correlation_id:
                raise ClientError(f"response for correlation id {got}, expected {correlation_id}")
            return body

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
