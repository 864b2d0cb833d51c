"""Offsets as Spark checkpoints them, rate limits, and splitting offset ranges into tasks.

Pure functions. A source offset is ``{"topic": {"partition": offset}}`` — the JSON layout of
Spark's Kafka source, partition numbers as strings — always built with topics and partitions in
sorted order, because Spark compares offsets by their JSON text.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.client.data import TopicPartition

Offsets = dict[TopicPartition, int]
OffsetJson = dict[str, dict[str, int]]


def to_json(offsets: Mapping[TopicPartition, int]) -> OffsetJson:
    result: OffsetJson = {}
    for tp in sorted(offsets):
        result.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return result


def from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


def limit_offsets(start: Offsets, latest: Offsets, max_offsets: int) -> Offsets:
    """End offsets that take at most ``max_offsets`` offsets in all past ``start``.

    The budget goes to partitions in proportion to how far each lags behind ``latest``; what
    rounding down leaves goes one offset at a time to the partitions with the largest
    remaining lag (ties by partition), so a micro-batch takes exactly
    ``min(max_offsets, total lag)`` offsets and the split is deterministic.
    """
    lags = {tp: max(latest[tp] - start.get(tp, 0), 0) for tp in latest}
    total = sum(lags.values())
    if total <= max_offsets:
        return dict(latest)
    shares = {tp: lag * max_offsets // total for tp, lag in lags.items()}
    left = max_offsets - sum(shares.values())
    by_remaining = sorted(lags, key=lambda tp: (-(lags[tp] - shares[tp]), tp))
    for tp in by_remaining[:left]:
        shares[tp] += 1
    return {tp: start.get(tp, 0) + shares[tp] for tp in latest}


def new_offsets(start: Offsets, end: Offsets) -> int:
    """How many offsets lie between ``start`` and ``end`` (partitions new in ``end`` from 0)."""
    return sum(max(offset - start.get(tp, 0), 0) for tp, offset in end.items())


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``start``..``end - 1`` of one partition: the work of one Spark task."""

    partition: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Cut ranges so there are at least ``min_partitions`` of them (large ranges cut in
    proportion to their size, as Spark's Kafka source does) and none holds more than
    ``max_records_per_partition`` offsets. Empty ranges are dropped."""
    pending = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        pending = [
            part for r in pending for part in _cut(r, math.ceil(r.size / max_records_per_partition))
        ]
    total = sum(r.size for r in pending)
    if min_partitions is not None and len(pending) < min_partitions and total > 0:
        pending = [
            part
            for r in pending
            for part in _cut(r, max(1, math.ceil(r.size * min_partitions / total)))
        ]
    return pending


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [OffsetRange(r.partition, a, b) for a, b in itertools.pairwise(bounds)]
