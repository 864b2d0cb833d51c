"""A request's wait for the metadata store, bounded by the request's own timeout.

A change that ZooKeeper must hold (a topic created, deleted, grown) is answered once it is
written, or REQUEST_TIMED_OUT when the request's ``timeout_ms`` passes first, as Kafka's
controller answers. The write itself goes on (it is shielded): it lands or fails on its own,
and the next request sees the outcome.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable
from typing import Any, TypeVar

from odradek.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")


async def within_timeout(work: Awaitable[T], timeout_ms: int) -> T:
    """``await work``, or ``KafkaError(REQUEST_TIMED_OUT)`` after ``timeout_ms`` (a timeout of 0
    or less waits as long as the store takes, for the requests that have none)."""
    task = asyncio.ensure_future(work)
    if timeout_ms <= 0:
        return await task
    try:
        return await asyncio.wait_for(asyncio.shield(task), timeout_ms / 1000)
    except TimeoutError:
        raise KafkaError(
            ErrorCode.request_timed_out,
            f"not done within the request's timeout of {timeout_ms} ms; it goes on",
        ) from None


def request_timeout_ms(request: Any) -> int:
    """The request's ``timeout`` field (CreateTopics, DeleteTopics, CreatePartitions) in
    milliseconds; 0 when it has none."""
    timeout = getattr(request, "timeout", None)
    if isinstance(timeout, datetime.timedelta):
        return int(timeout.total_seconds() * 1000)
    return int(timeout) if isinstance(timeout, int) else 0
