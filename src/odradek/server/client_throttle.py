"""Client quotas at the connection: what Produce and consumer Fetch requests count against the
client's byte-rate quotas, what every request's handling time counts against its request quota
(``request_percentage``), and the throttle time the answers carry back.

The request quota, as Kafka's ``ClientRequestQuotaManager``: the time a request is handled
(decoding and handling, less its waits in the purgatory: Kafka's request-handler thread time) is
recorded as a percentage of one thread's second, so ``request_percentage=50`` is half of one
thread's time and 200 two threads'. Exempt, as in Kafka: version negotiation and the SASL
exchange, followers' fetches, acks=0 produces, and what brokers ask of each other. Where a byte
rate quota and the request quota both throttle, the longer time counts. An answer that carries
a throttle time of its own (KIP-599's controller mutations, set by the handler) is held back
that long too.

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

import dataclasses
import datetime
import struct
from typing import Any

from kio.static.primitive import i32Timedelta

from odradek.quotas.manager import ClientQuotas
from odradek.server.context import FrameParts

PRODUCE, FETCH = 0, 1
THROTTLED_APIS = frozenset({PRODUCE, FETCH})
# ControlledShutdown, SaslHandshake, ApiVersions, WriteTxnMarkers, SaslAuthenticate.
REQUEST_QUOTA_EXEMPT = frozenset({7, 17, 18, 27, 36})
_NANOS_TO_PERCENT = 100 / 1_000_000_000
_MILLISECOND = datetime.timedelta(milliseconds=1)
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


def record_time(
    quotas: ClientQuotas,
    api_key: int,
    principal: str,
    client_id: str | None,
    request: Any,
    handling_ns: int,
) -> int:
    """Count a request's handling time against its request quota: the throttle time in ms."""
    if api_key in REQUEST_QUOTA_EXEMPT:
        return 0
    if api_key == FETCH and not is_consumer_fetch(request):
        return 0
    if api_key == PRODUCE and int(getattr(request, "acks", -1)) == 0:
        return 0
    return quotas.request.record(
        user_of(principal), client_id or "", handling_ns * _NANOS_TO_PERCENT
    )


def answer_throttle_time(answer: Any) -> int:
    """The throttle time (ms) a handler set in its unencoded answer; 0 for none."""
    value = getattr(answer, "throttle_time", None)
    if isinstance(value, datetime.timedelta):
        return value // _MILLISECOND
    return 0


def with_throttle_field(answer: Any, throttle_ms: int) -> Any:
    """A kio answer with its ``throttle_time`` raised to ``throttle_ms`` (unchanged without
    the field: the connection is held back all the same)."""
    if not dataclasses.is_dataclass(type(answer)) or not hasattr(answer, "throttle_time"):
        return answer
    if answer_throttle_time(answer) >= throttle_ms:
        return answer
    throttle = datetime.timedelta(milliseconds=min(throttle_ms, 2**31 - 1))
    return dataclasses.replace(answer, throttle_time=i32Timedelta.parse(throttle))


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
