"""Delayed operations: parked until their condition holds, a watched partition changes, or time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from odradek.cluster.replication.purgatory import Purgatory


class Watched:
    def __init__(self) -> None:
        self.waiters: list[Callable[[], None]] = []

    def add_waiter(self, callback: Callable[[], None]) -> None:
        self.waiters.append(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        if callback in self.waiters:
            self.waiters.remove(callback)

    def change(self) -> None:
        waiters, self.waiters = self.waiters, []
        for callback in waiters:
            callback()


async def watching(watched: Watched, before: list[Callable[[], None]] | None = None) -> None:
    """Until the parked operation has (re-)registered on ``watched``."""
    for _ in range(100):
        if watched.waiters and watched.waiters != before:
            return
        await asyncio.sleep(0)
    raise AssertionError("the operation never parked")


def test_a_parked_operation_completes_when_a_change_makes_it_ready() -> None:
    async def scenario() -> tuple[bool, int, int]:
        purgatory = Purgatory()
        a, b = Watched(), Watched()
        state = {"ready": False}
        waiting = asyncio.ensure_future(purgatory.park([a, b], lambda: state["ready"], 30))
        await watching(a)
        parked = purgatory.parked
        first = list(a.waiters)
        b.change()  # a change that does not make it ready: parked again
        await watching(a, first)
        state["ready"] = True
        a.change()
        done = await asyncio.wait_for(waiting, 5)
        return done, parked, purgatory.parked + len(a.waiters) + len(b.waiters)

    done, parked, left = asyncio.run(scenario())
    assert done is True
    assert parked == 1
    assert left == 0


def test_an_operation_never_ready_returns_false_at_its_timeout() -> None:
    async def scenario() -> tuple[bool, int]:
        purgatory = Purgatory()
        watched = Watched()
        done = await purgatory.park([watched], lambda: False, 0.01)
        return done, len(watched.waiters)

    assert asyncio.run(scenario()) == (False, 0)
