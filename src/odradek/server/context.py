"""What a handler gets besides its request: the broker's services, the request header, and the
session of the connection it came on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.static.protocol import ResponsePayload

from odradek.protocol.messages import RequestHeader, build, response_schema
from odradek.server.services import BrokerServices, Session


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
    """Built per request (so kept to few slots): the services and session are shared.

    ``only_waiting_left``: called by a handler once all that is left of its request is a wait
    for the followers (an acks=all Produce after its appends), so that the connection may go
    on to its next request meanwhile; the response still leaves in request order."""

    services: BrokerServices
    header: RequestHeader
    session: Session
    only_waiting_left: Callable[[], None] | None = None

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def peer(self) -> str:
        return self.session.peer

    def respond(self, **fields: Any) -> ResponsePayload:
        """The response of this request's API and version, from version-independent fields."""
        schema = response_schema(self.header.api_key, self.header.api_version)
        return build(schema, fields)
