"""Latency percentiles: a small summary a worker process can hand back instead of every sample."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# The points of the percentile curve kept for charts (100 is the maximum).
CURVE_PERCENTILES = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 100.0)


def percentile(ordered: list[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of an ascending, non-empty list."""
    if not ordered:
        raise ValueError("no samples")
    if p <= 0:
        return ordered[0]
    rank = math.ceil(round(p * len(ordered) / 100, 9))  # round: 99.9 * 1000 / 100 > 999
    return ordered[min(len(ordered), max(rank, 1)) - 1]


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Milliseconds; ``curve`` pairs each of :data:`CURVE_PERCENTILES` with its value."""

    count: int
    mean: float
    p50: float
    p99: float
    p999: float
    max: float
    curve: tuple[tuple[float, float], ...]

    @classmethod
    def of(cls, samples_ms: Iterable[float]) -> LatencySummary | None:
        ordered = sorted(samples_ms)
        if not ordered:
            return None
        return cls(
            count=len(ordered),
            mean=sum(ordered) / len(ordered),
            p50=percentile(ordered, 50),
            p99=percentile(ordered, 99),
            p999=percentile(ordered, 99.9),
            max=ordered[-1],
            curve=tuple((p, percentile(ordered, p)) for p in CURVE_PERCENTILES),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "count": self.count,
            "mean": self.mean,
            "p50": self.p50,
            "p99": self.p99,
            "p99.9": self.p999,
            "max": self.max,
            "curve": [list(point) for point in self.curve],
        }
