"""Delayed operations: requests parked until their condition holds or their time runs out.

Kafka keeps Fetch long-polls (``min.bytes`` not yet there) and acks=all produces (the in-sync
replicas do not have the records yet) in a purgatory, watched by partition, and re-checks an
operation when something it watches changes. Here the watched things are partitions (anything
with ``add_waiter``/``remove_waiter``): an append or a high watermark move wakes the parked
fetches once, a high watermark move (or a change of role or ISR) the acks=all produces, which
watch the partition's ``replication``; each re-checks its condition and parks again if it still
does not hold.
The replica manager decides what waits here (:mod:`~odradek.cluster.replication.delayed`):
the purgatory only parks, wakes and times out. Runs on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from odradek.cluster.replication.delayed import DelayedProduce, Replicating, Watchable
from odradek.counters import RequestCounters, remote_wait
from odradek.protocol.errors import ErrorCode

__all__ = ["Purgatory", "Replicating", "Watchable"]


class Purgatory:
    """The broker's delayed operations; ``parked`` counts those waiting now. With
    ``counters`` (metrics on), each wait of a request (``api_key`` given) is added to that
    request's :class:`~odradek.counters.RequestTiming`, its RemoteTime."""

    def __init__(self, counters: RequestCounters | None = None) -> None:
        self.parked = 0
        self._counters = counters

    async def park(
        self,
        watched: Iterable[Watchable],
        ready: Callable[[], bool],
        timeout_s: float,
        api_key: int = -1,
    ) -> bool:
        """Wait, after the caller found ``ready()`` false, until it is true (checked whenever a
        watched partition changes, and once more at the end) or ``timeout_s`` passed; returns
        ``ready()``'s last answer. ``api_key``: the request that waits (Kafka's RemoteTime)."""
        loop = asyncio.get_running_loop()
        waited = self._wait(list(watched), ready, loop.time() + max(timeout_s, 0.0))
        self.parked += 1
        try:
            if self._counters is not None and api_key >= 0:
                return await remote_wait(waited)
            return await waited
        finally:
            self.parked -= 1

    @staticmethod
    async def _wait(watched: list[Watchable], ready: Callable[[], bool], deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        while True:
            if deadline - loop.time() <= 0:
                return ready()
            future: asyncio.Future[None] = loop.create_future()

            def wake(future: asyncio.Future[None] = future) -> None:
                if not future.done():
                    future.set_result(None)

            # The deadline resolves the same future a change does (not asyncio.wait_for, whose
            # wrapper takes one more turn of the loop to pass a wake-up on: a long poll's answer
            # then leaves after the appending request's own).
            timer = loop.call_at(deadline, wake)
            for item in watched:
                item.add_waiter(wake)
            try:
                await future
            finally:
                timer.cancel()
                for item in watched:
                    item.remove_waiter(wake)
            if ready():
                return True

    async def replicated(
        self, partition: Replicating, required_offset: int, timeout_s: float, api_key: int = -1
    ) -> ErrorCode:
        """Wait until the partition's high watermark reaches ``required_offset`` (as an acks=all
        produce does): NONE, the error that ended the wait (leadership lost, the ISR below
        ``min.insync.replicas``), or REQUEST_TIMED_OUT."""

        delayed = DelayedProduce([(partition, required_offset)])
        if not delayed.try_complete():
            await self.park(delayed.watched(), delayed.try_complete, timeout_s, api_key)
        (outcome,) = delayed.outcomes()
        return outcome
