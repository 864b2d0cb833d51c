"""Answers in the versions kio lacks (:mod:`odradek.protocol.old_messages`), beside kio's."""

from __future__ import annotations

from typing import Any

from odradek.protocol import old_messages
from odradek.server.context import RequestContext, Response


def respond(ctx: RequestContext, **fields: Any) -> Response:
    """``ctx.respond(**fields)``, or for a version kio lacks the frame written here."""
    api_key, version = ctx.header.api_key, ctx.version
    if old_messages.has_version(api_key, version):
        return old_messages.encode_response(api_key, version, ctx.header.correlation_id, fields)
    return ctx.respond(**fields)
