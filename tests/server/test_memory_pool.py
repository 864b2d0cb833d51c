"""queued.max.request.bytes as bookkeeping: waiters woken when memory is released, and one
connection let finish a partial request when nothing else could ever free memory."""

from __future__ import annotations

from odradek.server.memory_pool import MemoryPool


class Waiter:
    def __init__(self) -> None:
        self.calls: list[bool] = []

    def __call__(self, overdraft: bool) -> None:
        self.calls.append(overdraft)


def test_an_unbounded_pool_is_never_exhausted() -> None:
    pool = MemoryPool(-1)
    pool.take(10**12)
    assert not pool.exhausted and pool.available == -1


def test_waiters_are_woken_when_memory_is_released() -> None:
    pool = MemoryPool(100)
    pool.take(100)
    pool.complete(100)
    first, second = Waiter(), Waiter()
    pool.wait(first, partial=False)
    pool.wait(second, partial=True)
    assert pool.exhausted and first.calls == second.calls == []
    pool.release(40, 40)
    assert first.calls == [False] and second.calls == [False]
    pool.release(60, 60)
    assert first.calls == [False]  # woken once: it waits again if it needs to


def test_a_pool_full_of_partial_requests_lets_the_longest_waiting_finish() -> None:
    pool = MemoryPool(100)
    pool.take(100)  # all of it partial: handling nothing will release any
    idle, first, second = Waiter(), Waiter(), Waiter()
    pool.wait(idle, partial=False)
    pool.wait(first, partial=True)
    pool.wait(second, partial=True)
    assert first.calls == [True]  # the first one holding part of a request
    assert idle.calls == second.calls == []  # one overdraft at a time
    pool.take(50)
    pool.complete(150)
    pool.end_overdraft(first)
    assert second.calls == []  # whole requests now hold memory: their handling frees it
    pool.release(150, 150)
    assert idle.calls == [False] and second.calls == [False]


def test_a_closed_overdraft_passes_to_the_next_partial_waiter() -> None:
    pool = MemoryPool(10)
    pool.take(10)
    first, second = Waiter(), Waiter()
    pool.wait(first, partial=True)
    pool.wait(second, partial=True)
    assert first.calls == [True] and second.calls == []
    pool.cancel(first)
    pool.release(5, 0)  # what first's connection held
    assert second.calls == [True]
