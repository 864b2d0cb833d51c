"""Client quotas at the connection: what Produce and consumer Fetch requests count against the
client's quotas, and the throttle time they carry back.

As Kafka does since KIP-219, the answer goes out at once, carrying ``throttle_time_ms``, and the
connection then reads nothing more for that long (the client, told, waits too; one that does
not is held by the broker). Produce counts the request's bytes, a consumer's Fetch the bytes of
its answer; a follower's fetch counts against the replication throttles instead.

The answers are written before their throttle time is known (Produce's by a hand-written
encoder, Fetch's as parts around ``sendfile``), so the time is written into the encoded frame,
where Kafka's schema puts it: last in a Produce answer (before the empty tagged fields of v9+),
first in a Fetch answer (after the response header). Versions without the field (v0) are only
held back.

The broker's event loop only.
"""

from __future__ import annotations

import struct
from typing import Any

from odradek.quotas.manager import ClientQuotas
from odradek.server.context import FrameParts

PRODUCE, FETCH = 0, 1
THROTTLED_APIS = frozenset({PRODUCE, FETCH})
_INT32 = struct.Struct(">i")
_PRINCIPAL_TYPE = "User:"


def user_of(principal: str) -> str:
    """The user name quotas are set for: the principal's name (``User:alice`` → ``alice``)."""
    return principal[len(_PRINCIPAL_TYPE) :] if principal.startswith(_PRINCIPAL_TYPE) else principal


def is_consumer_fetch(request: Any) -> bool:
    replica_id = getattr(request, "replica_id", None)
    if replica_id is None:
        state = getattr(request, "replica_state", None)
        replica_id = getattr(state, "replica_id", -1) if state is not None else -1
    return int(replica_id) < 0


def record(
    quotas: ClientQuotas,
    api_key: int,
    principal: str,
    client_id: str | None,
    request: Any,
    request_bytes: int,
    response: bytes | FrameParts | None,
) -> int:
    """Count the request against its quota: the throttle time in ms (0: within it, or no
    quota applies)."""
    user, client = user_of(principal), client_id or ""
    if api_key == PRODUCE:
        if not quotas.produce.enabled:
            return 0
        return quotas.produce.record(user, client, request_bytes)
    if not quotas.fetch.enabled or response is None or not is_consumer_fetch(request):
        return 0
    size = response.size if isinstance(response, FrameParts) else len(response)
    return quotas.fetch.record(user, client, size)


def with_throttle_time(
    api_key: int, version: int, response: bytes | FrameParts, throttle_ms: int
) -> bytes | FrameParts:
    """The encoded answer (length prefix included) with ``throttle_time_ms`` set."""
    if version < 1:
        return response
    value = _INT32.pack(min(throttle_ms, 2**31 - 1))
    if api_key == PRODUCE and isinstance(response, bytes):
        end = len(response) - (1 if version >= 9 else 0)
        if version >= 9 and response[-1] != 0:
            return response  # tagged fields after it: not where this looks
        return response[: end - 4] + value + response[end:]
    if api_key == FETCH:
        at = 4 + 4 + (1 if version >= 12 else 0)  # length, correlation id, header tags
        if isinstance(response, bytes):
            return response[:at] + value + response[at + 4 :]
        return _patched_parts(response, at, value)
    return response


def _patched_parts(response: FrameParts, at: int, value: bytes) -> FrameParts:
    offset = 0
    for i, part in enumerate(response.parts):
        if not isinstance(part, bytes | bytearray | memoryview):
            return response  # records read from a segment: not the header
        if offset <= at and at + len(value) <= offset + len(part):
            start = at - offset
            patched = bytes(part[:start]) + value + bytes(part[start + len(value) :])
            parts = list(response.parts)
            parts[i] = patched
            return FrameParts(parts, response.size)
        offset += len(part)
    return response
