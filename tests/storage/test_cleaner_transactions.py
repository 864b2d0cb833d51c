"""Compaction of logs with transactions: aborted data goes, markers go after
delete.retention.ms once their transaction's data is gone, undecided transactions stay."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol.control import encode_end_txn_marker
from odradek.protocol.records import encode_batch
from odradek.storage import LogManager, PartitionLog
from odradek.storage.cleaner import LogCleaner

from .conftest import DAY, append, compacted, keyed_batch, open_manager, read_all, records_of

COMPACT = compacted(segment_bytes=400)


@pytest.fixture
def manager(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    manager = open_manager(tmp_path, clock, COMPACT)
    yield manager
    manager.close()


def txn(clock: ManualClock, producer_id: int, sequence: int, key: bytes, value: bytes) -> bytes:
    return encode_batch(
        [(key, value, (), clock.time_ms())],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=True,
        now_ms=clock.time_ms(),
    )


def end(clock: ManualClock, producer_id: int, commit: bool) -> bytes:
    return encode_end_txn_marker(producer_id, 0, 0, commit=commit, now_ms=clock.time_ms())


def roll_past(log: PartitionLog, clock: ManualClock) -> None:
    """Plain keyed batches until the active segment is a new one."""
    segments = log.segment_count()
    i = 0
    while log.segment_count() == segments:
        append(log, keyed_batch([(b"filler%d" % i, b"f")], timestamp=clock.time_ms()))
        i += 1


def control_offsets(log: PartitionLog) -> list[int]:
    return [h.base_offset for h in read_all(log) if h.is_control]


def test_aborted_data_goes_and_markers_go_after_delete_retention(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    append(log, txn(clock, 7, 0, b"a", b"aborted"))  # 0
    append(log, txn(clock, 8, 0, b"b", b"committed"))  # 1
    append(log, end(clock, 7, commit=False))  # 2
    append(log, end(clock, 8, commit=True))  # 3
    roll_past(log, clock)
    roll_past(log, clock)
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(manager, clock)
    cleaner.clean_until_done()
    kept = {key: value for _, key, value in records_of(log) if key in (b"a", b"b")}
    assert kept == {b"b": b"committed"}
    # The ABORT marker stays while the pass met its data; the COMMIT marker too (its data
    # stays).
    assert control_offsets(log) == [2, 3]
    assert log.aborted_transactions(0, log.log_end_offset) == [(7, 0)]
    # A second pass: the aborted data is gone, so its marker gets a delete horizon...
    roll_past(log, clock)
    log.update_high_watermark(log.log_end_offset)
    cleaner.clean_until_done()
    assert control_offsets(log) == [2, 3]
    # ...and a pass after delete.retention.ms removes it.
    clock.advance(DAY + 1)
    roll_past(log, clock)
    log.update_high_watermark(log.log_end_offset)
    cleaner.clean_until_done()
    assert control_offsets(log) == [3]
    assert {key: value for _, key, value in records_of(log) if key in (b"a", b"b")} == {
        b"b": b"committed"
    }


def test_an_undecided_transaction_is_never_cleaned(manager: LogManager, clock: ManualClock) -> None:
    log = manager.create("table", 0, COMPACT)
    append(log, keyed_batch([(b"a", b"old")], timestamp=clock.time_ms()))
    append(log, txn(clock, 7, 0, b"a", b"pending"))  # 1: open
    roll_past(log, clock)
    append(log, keyed_batch([(b"a", b"newest")], timestamp=clock.time_ms()))
    roll_past(log, clock)
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(manager, clock)
    cleaner.clean_until_done()
    # The segment holding the open transaction and everything after it stay as written.
    values = [value for _, key, value in records_of(log) if key == b"a"]
    assert values == [b"old", b"pending", b"newest"]
    append(log, end(clock, 7, commit=False))
    roll_past(log, clock)
    log.update_high_watermark(log.log_end_offset)
    cleaner.clean_until_done()
    assert [value for _, key, value in records_of(log) if key == b"a"] == [b"newest"]


def test_aborted_data_goes_when_its_marker_is_in_the_active_segment(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    append(log, keyed_batch([(b"a", b"committed before")], timestamp=clock.time_ms()))
    append(log, txn(clock, 7, 0, b"a", b"aborted"))
    roll_past(log, clock)
    append(log, end(clock, 7, commit=False))  # in the active segment, never cleaned
    log.update_high_watermark(log.log_end_offset)
    LogCleaner(manager, clock).clean_until_done()
    # The aborted value neither stays nor hides the committed one it would have replaced.
    assert [value for _, key, value in records_of(log) if key == b"a"] == [b"committed before"]
