from __future__ import annotations

import random
from collections.abc import Callable

from odradek.storage import LogConfig, PartitionLog

from .conftest import append, make_batch

Opener = Callable[..., PartitionLog]


def test_offset_for_timestamp_finds_the_first_record_at_or_after(open_log: Opener) -> None:
    log = open_log()
    append(log, make_batch(timestamps=[100, 300, 200]))
    append(log, make_batch(timestamps=[250, 400]))
    append(log, make_batch(timestamps=[500]))
    assert log.offset_for_timestamp(50) == (0, 100)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(300) == (1, 300)
    assert log.offset_for_timestamp(301) == (4, 400)
    assert log.offset_for_timestamp(450) == (5, 500)
    assert log.offset_for_timestamp(501) is None
    log.delete_records_before(2)
    assert log.offset_for_timestamp(150) == (2, 200)


def test_offset_for_timestamp_with_log_append_time(open_log: Opener) -> None:
    log = open_log()
    append(log, make_batch(2, timestamp=1), log_append_time=1000)
    append(log, make_batch(2, timestamp=1), log_append_time=2000)
    assert log.offset_for_timestamp(1500) == (2, 2000)
    assert log.offset_for_timestamp(0) == (0, 1000)


def test_offset_for_timestamp_agrees_with_a_scan_across_segments_and_reopen(
    open_log: Opener,
) -> None:
    config = LogConfig(segment_bytes=600, index_interval_bytes=150)
    rng = random.Random(7)
    log = open_log(config)
    stamps: list[int] = []
    batch_maxes: list[tuple[int, int]] = []  # (max timestamp, last offset) per batch
    for _ in range(40):
        batch = [rng.randrange(10_000) + len(stamps) * 100 for _ in range(rng.randint(1, 4))]
        append(log, make_batch(timestamps=batch))
        stamps += batch
        batch_maxes.append((max(batch), len(stamps) - 1))
    assert log.segment_count() > 3

    def expected(target: int) -> tuple[int, int] | None:
        return next(((o, t) for o, t in enumerate(stamps) if t >= target), None)

    targets = [rng.randrange(-10, max(stamps) + 10) for _ in range(200)] + [max(stamps)]
    for target in targets:
        assert log.offset_for_timestamp(target) == expected(target), target
    top = max(stamps)
    first_top_batch_last = next(last for ts, last in batch_maxes if ts == top)
    assert log.max_timestamp_offset() == (first_top_batch_last, top)
    log.close()

    log = open_log(config)
    for target in targets:
        assert log.offset_for_timestamp(target) == expected(target), target
    assert log.max_timestamp_offset() == (first_top_batch_last, top)


def test_max_timestamp_offset_is_the_last_offset_of_the_batch_with_the_max(
    open_log: Opener,
) -> None:
    log = open_log(LogConfig(segment_bytes=1))  # a segment per batch
    assert log.max_timestamp_offset() is None
    append(log, make_batch(timestamps=[10, 90, 20]))
    append(log, make_batch(timestamps=[50]))
    append(log, make_batch(timestamps=[90]))  # a tie: the first batch to reach it wins
    assert log.segment_count() == 3
    assert log.max_timestamp_offset() == (2, 90)
    log.delete_records_before(3)
    assert log.max_timestamp_offset() == (4, 90)
    log.delete_records_before(5)
    assert log.max_timestamp_offset() is None
