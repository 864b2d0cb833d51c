"""What a handler gets besides its request: the broker, the request header, the connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.static.protocol import ResponsePayload

from odradek.protocol.messages import RequestHeader, build, response_schema

if TYPE_CHECKING:
    from odradek.server.broker import Broker


@dataclass(frozen=True, slots=True)
class FrameParts:
    """A response frame written in pieces: bytes, and file slices sent with ``sendfile``.

    ``parts`` includes the 4-byte length prefix; ``size`` is the whole frame length.
    """

    parts: list[Any]  # bytes | storage.ReadSlice
    size: int


# A kio payload to encode, a frame in parts, or a whole frame already encoded (length prefix
# included) by a hand-written writer.
Response = ResponsePayload | FrameParts | bytes


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str

    @property
    def version(self) -> int:
        return self.header.api_version

    def respond(self, **fields: Any) -> ResponsePayload:
        """The response of this request's API and version, from version-independent fields."""
        schema = response_schema(self.header.api_key, self.header.api_version)
        return build(schema, fields)
