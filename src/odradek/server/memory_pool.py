"""The broker-wide bound on request bytes received and not yet handled: queued.max.request.bytes.

Kafka's ``MemoryPool`` in spirit: every connection charges the bytes of requests as they arrive
and gives them back once each request is handled; while the pool is exhausted, connections stop
reading (they are not closed) and wait, and they read again as soon as memory is released. A
request is charged for what has arrived of it, never for the size its prefix announces, so
clients that announce huge requests and send little cost little.

Because partly received requests are charged too, the pool could fill up with nothing but
requests that cannot complete until their connections read again. The pool then lets the
connection that has waited longest read on past the limit until its request is whole (Kafka's
pool, too, lets one allocation overshoot): so memory stays within the limit plus one
``socket.request.max.bytes``, and the broker cannot wedge.

Pure bookkeeping: waiters are callbacks that the connections' shells turn into resumed reads.
Event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Callable

# Called with True when the waiter may read past the limit until its request is whole.
Waiter = Callable[[bool], None]


class MemoryPool:
    """``limit`` bytes at most (<= 0: unbounded, Kafka's -1)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        # Bytes of whole requests among ``used``: handling them will release memory.
        self.releasable = 0
        # Insertion-ordered (the longest waiting first), each with whether it holds part of a
        # request (only finishing one of those can unwedge a pool of partial requests).
        self._waiters: dict[Waiter, bool] = {}
        self._overdrawn: Waiter | None = None

    @property
    def bounded(self) -> bool:
        return self.limit > 0

    @property
    def exhausted(self) -> bool:
        return 0 < self.limit <= self.used

    @property
    def available(self) -> int:
        """Bytes that may still be taken (``used`` and ``limit`` apart); -1 when unbounded."""
        return max(self.limit - self.used, 0) if self.limit > 0 else -1

    def take(self, nbytes: int) -> None:
        """``nbytes`` of requests arrived."""
        self.used += nbytes

    def complete(self, nbytes: int) -> None:
        """``nbytes`` already taken now belong to whole requests."""
        self.releasable += nbytes

    def release(self, nbytes: int, whole: int) -> None:
        """``nbytes`` are free again, ``whole`` of them bytes of whole requests (the rest of
        requests that never completed, from a connection that closed)."""
        self.used -= nbytes
        self.releasable -= whole
        self._wake()

    def wait(self, waiter: Waiter, partial: bool) -> None:
        """Call ``waiter`` once reading may go on; ``partial``: its connection holds part of a
        request."""
        self._waiters[waiter] = partial
        self._wake()

    def cancel(self, waiter: Waiter) -> None:
        """``waiter`` no longer waits (its connection closed, or its overdraft ended)."""
        self._waiters.pop(waiter, None)
        if self._overdrawn == waiter:  # equal, not identical: bound methods
            self._overdrawn = None
            self._wake()

    def end_overdraft(self, waiter: Waiter) -> None:
        """The request ``waiter`` was let finish past the limit is whole."""
        if self._overdrawn == waiter:  # equal, not identical: bound methods
            self._overdrawn = None
            self._wake()

    def _wake(self) -> None:
        if not self._waiters:
            return
        if not self.exhausted:
            waiters = list(self._waiters)
            self._waiters.clear()
            for waiter in waiters:
                waiter(False)
        elif self.releasable <= 0 and self._overdrawn is None:
            # Nothing handled will free memory: only finishing a partial request can.
            chosen = next((w for w, partial in self._waiters.items() if partial), None)
            if chosen is None:
                return
            del self._waiters[chosen]
            self._overdrawn = chosen
            chosen(True)
