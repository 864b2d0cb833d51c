"""A rate measured over a window of samples, as Kafka's metrics measure one, and the throttle
time Kafka's quotas derive from it.

:class:`WindowedRate` is Kafka's ``Rate`` over a ``SampledStat``: what was recorded in the last
``samples`` samples of ``sample_ms`` each, divided by the time they span, to which a sample is
added for each full one short of all but one (so the first records after a quiet spell do not
look like a burst).
:meth:`WindowedRate.throttle_ms` is ``QuotaUtils.throttleTime``: how long a quota's user must
wait for the rate to fall back to the bound, ``(rate - bound) / bound * window``.

Replication throttles, connection creation rates and client quotas all measure with it.
Nothing is durable (a restart starts with an empty window); the clock is injected; one thread
(the broker's event loop) calls each instance.
"""

from __future__ import annotations

from collections import deque

from odradek.clock import Clock


class WindowedRate:
    """Amounts recorded per sample over the last ``samples`` samples (see the module doc)."""

    def __init__(self, clock: Clock, *, samples: int = 11, sample_ms: int = 1000) -> None:
        self._clock = clock
        self.samples = samples
        self.sample_ms = sample_ms
        # (start of the sample on the clock's monotonic scale, amount), oldest first.
        self._window: deque[tuple[int, float]] = deque()

    def record(self, amount: float = 1.0) -> None:
        now = self._clock.monotonic_ms()
        self._expire(now)
        if self._window and now < self._window[-1][0] + self.sample_ms:
            start, total = self._window[-1]
            self._window[-1] = (start, total + amount)
        else:
            self._window.append((now, amount))

    def rate(self) -> float:
        """Amount per second over the window."""
        now = self._clock.monotonic_ms()
        self._expire(now)
        if not self._window:
            return 0.0
        return sum(amount for _, amount in self._window) * 1000 / self._span_ms(now)

    def throttle_ms(self, bound: float) -> int:
        """How long to hold back for the rate to fall to ``bound`` per second; 0 while it is
        at or below it."""
        rate = self.rate()
        if bound <= 0 or rate <= bound:
            return 0
        return round((rate - bound) / bound * self._span_ms(self._clock.monotonic_ms()))

    def _span_ms(self, now: int) -> int:
        # Kafka's Rate.windowSize: the time since the oldest sample began, plus a sample for
        # each full one short of all but one.
        elapsed = now - self._window[0][0] if self._window else 0
        missing = self.samples - 1 - elapsed // self.sample_ms
        return max(elapsed + max(missing, 0) * self.sample_ms, 1)

    def _expire(self, now: int) -> None:
        oldest = now - self.samples * self.sample_ms
        while self._window and self._window[0][0] + self.sample_ms <= oldest:
            self._window.popleft()
