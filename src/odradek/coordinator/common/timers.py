"""Deadlines of the group coordinator, kept as data: whoever owns the clock decides when they fire.

The coordinator schedules and cancels named deadlines (a member's session, a group's rebalance);
the broker's event loop asks for :meth:`Timers.next_deadline`, waits until then, and calls
:meth:`Timers.fire_due`. Tests move a ``ManualClock`` and call ``fire_due`` themselves.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable


class Timers:
    """Named one-shot deadlines in monotonic milliseconds; scheduling a name again replaces it."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._entries: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._sequence = itertools.count()
        self.on_earlier_deadline: Callable[[], None] | None = None

    def schedule(self, key: Hashable, deadline_ms: int, action: Callable[[], None]) -> None:
        previous = self.next_deadline()
        sequence = next(self._sequence)
        self._entries[key] = (deadline_ms, sequence, action)
        heapq.heappush(self._heap, (deadline_ms, sequence, key))
        if self.on_earlier_deadline is not None and (previous is None or deadline_ms < previous):
            self.on_earlier_deadline()

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def cancel_where(self, matches: Callable[[Hashable], bool]) -> None:
        """Cancel every deadline whose name ``matches`` (e.g. all of one group's)."""
        for key in [k for k in self._entries if matches(k)]:
            del self._entries[key]

    def deadline_of(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return entry[0] if entry else None

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            _, sequence, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == sequence:
                return
            heapq.heappop(heap)

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def fire_due(self, now_ms: int) -> int:
        """Run, in deadline order, every action due at ``now_ms``; returns how many ran."""
        fired = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return fired
            _, _, key = heapq.heappop(self._heap)
            _, _, action = self._entries.pop(key)
            action()
            fired += 1

    def __len__(self) -> int:
        return len(self._entries)
