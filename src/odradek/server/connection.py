"""One client connection: read length-prefixed frames, dispatch them in order, write responses.

Like Kafka, a connection has one request in flight at a time (Kafka mutes the channel), so
responses leave in request order. Framing errors close only this connection.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import typing
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    UnsupportedRequest,
    build,
    decode_request,
    encode_response,
    peek_header,
    response_schema,
)
from odradek.server.context import FrameParts, RequestContext
from odradek.server.registry import HANDLERS
from odradek.storage import ReadSlice

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
_INT32 = struct.Struct(">i")
# Below this, a pread and one write cost fewer syscalls and event-loop turns than sendfile,
# which must first drain the transport's buffer.
SENDFILE_MIN_BYTES = 64 * 1024
_WRITE_HIGH_WATER = 4 * 1024 * 1024


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


class Connection:
    def __init__(
        self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.sendfile_ok = writer.get_extra_info("sslcontext") is None
        self.last_active_ms = broker.clock.monotonic_ms()
        self.busy = False

    async def serve(self) -> None:
        max_request = self.broker.config.get_int("socket.request.max.bytes")
        try:
            while True:
                try:
                    prefix = await self.reader.readexactly(4)
                except asyncio.IncompleteReadError:
                    return
                (size,) = _INT32.unpack(prefix)
                if size < 0 or size > max_request:
                    hint = " (an HTTP request?)" if prefix[:4].isalpha() else ""
                    raise CloseConnection(
                        f"frame of {size} bytes is outside 0..socket.request.max.bytes "
                        f"({max_request}){hint}"
                    )
                if size < 8:
                    raise CloseConnection(f"frame of {size} bytes is too short for a header")
                try:
                    frame = await self.reader.readexactly(size)
                except asyncio.IncompleteReadError:
                    log.info("connection from %s closed in the middle of a request", self.peer)
                    return
                self.busy = True
                try:
                    response = await self.dispatch(frame)
                    if response is not None:
                        await self.write(response)
                finally:
                    self.busy = False
                    self.last_active_ms = self.broker.clock.monotonic_ms()
        except CloseConnection as e:
            log.warning("closing connection from %s: %s", self.peer, e)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
        finally:
            self.writer.close()

    def close_if_idle(self, now_ms: int, idle_ms: int) -> None:
        """Close a connection with no request for ``connections.max.idle.ms``, as Kafka does;
        this also ends one left hanging in the middle of a frame."""
        if not self.busy and now_ms - self.last_active_ms > idle_ms:
            log.info(
                "closing connection from %s: idle for %d ms",
                self.peer,
                now_ms - self.last_active_ms,
            )
            self.writer.close()

    async def dispatch(self, frame: bytes) -> bytes | FrameParts | None:
        api_key, api_version, correlation_id = peek_header(frame)
        handler = HANDLERS.get(api_key)
        if handler is None:
            raise CloseConnection(f"unknown API key {api_key}")
        if not handler.min_version <= api_version <= handler.max_version:
            if api_key == API_VERSIONS_KEY:
                # KIP-511: answer in v0's format so the client can retry with a version we have.
                return encode_response(correlation_id, self._unsupported_api_versions())
            raise CloseConnection(
                f"API key {api_key} version {api_version} is not supported "
                f"(versions {handler.min_version}..{handler.max_version})"
            )
        try:
            header, request = decode_request(frame)
        except UnsupportedRequest as e:
            raise CloseConnection(f"unsupported request: {e}") from e
        except Exception as e:
            raise CloseConnection(
                f"malformed request for API key {api_key} v{api_version}: {e}"
            ) from e
        context = RequestContext(self.broker, header, self.peer)
        response = await handler.fn(context, request)
        if response is None:
            return None
        if isinstance(response, FrameParts):
            return response
        return encode_response(correlation_id, response)

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
        if isinstance(response, bytes):
            self.writer.write(response)
        else:
            for part in response.parts:
                if isinstance(part, ReadSlice):
                    await self._write_slice(part)
                else:
                    self.writer.write(part)
        if self.writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            await self.writer.drain()

    async def _write_slice(self, part: ReadSlice) -> None:
        if part.size < SENDFILE_MIN_BYTES or not self.sendfile_ok:
            self.writer.write(part.read_bytes())
            return
        loop = asyncio.get_running_loop()
        try:
            sent = await loop.sendfile(
                self.writer.transport,
                typing.cast(typing.BinaryIO, _FdFile(part.fd)),
                part.position,
                part.size,
                fallback=False,
            )
        except (NotImplementedError, asyncio.SendfileNotAvailableError):
            # An event loop or transport without sendfile (uvloop, TLS): copy instead, from now on.
            self.sendfile_ok = False
            self.writer.write(part.read_bytes())
            return
        if sent != part.size:
            # The file shrank under us (truncation); the frame length is already promised.
            self.writer.write(b"\0" * (part.size - sent))
            log.warning("segment shrank during sendfile to %s", self.peer)
