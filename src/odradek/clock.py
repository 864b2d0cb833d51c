"""The broker's sense of time, injected so tests can move it without sleeping."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never goes back (timeouts, roll intervals)."""
        ...


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to; for tests."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = start_ms
        self._mono_ms = 0

    def time_ms(self) -> int:
        return self._now_ms

    def monotonic_ms(self) -> int:
        return self._mono_ms

    def advance(self, ms: int) -> None:
        self._now_ms += ms
        self._mono_ms += ms
