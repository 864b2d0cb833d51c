"""Reads and recovery checked against a plain model of segments and batches."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.clock import ManualClock
from odradek.storage import LogConfig, PartitionLog

from .conftest import append, headers_of, make_batch

Batch = tuple[int, int, int]  # base offset, record count, size


def build(
    directory: Path, counts: list[int], config: LogConfig
) -> tuple[PartitionLog, list[list[Batch]]]:
    """A log of batches of ``counts`` records, and the segments the size rule should give."""
    log = PartitionLog.open(directory, config, ManualClock())
    segments: list[list[Batch]] = [[]]
    offset = 0
    for count in counts:
        batch = make_batch(count)
        if segments[-1] and sum(b[2] for b in segments[-1]) + len(batch) > config.segment_bytes:
            segments.append([])
        segments[-1].append((offset, count, len(batch)))
        append(log, batch)
        offset += count
    return log, segments


def expected_read(
    segments: list[list[Batch]], offset: int, max_bytes: int, max_offset: int
) -> tuple[int, int] | None:
    """(position, size) a read should return, by the rules of PartitionLog.read."""
    if offset >= max_offset:
        return None  # at or past the high watermark there is nothing to read yet, as in Kafka
    for segment in segments:
        position = 0
        for i, (base, count, size) in enumerate(segment):
            if base + count - 1 < offset:
                position += size
                continue
            if base >= max_offset:
                return None
            total = size
            for next_base, _, next_size in segment[i + 1 :]:
                if next_base >= max_offset or total + next_size > max_bytes:
                    break
                total += next_size
            return position, total if size <= max_bytes else size
    return None


@settings(max_examples=60, deadline=None)
@given(
    counts=st.lists(st.integers(1, 4), min_size=1, max_size=25),
    segment_bytes=st.integers(80, 500),
    index_interval=st.integers(0, 300),
    data=st.data(),
)
def test_reads_match_the_model(
    counts: list[int], segment_bytes: int, index_interval: int, data: st.DataObject
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval)
    with tempfile.TemporaryDirectory() as tmp:
        log, segments = build(Path(tmp) / "t-0", counts, config)
        end = sum(counts)
        assert log.log_end_offset == end and log.segment_count() == len(segments)
        for reopen in (False, True):
            if reopen:
                log.close()
                log = PartitionLog.open(Path(tmp) / "t-0", config, ManualClock())
            for _ in range(10):
                offset = data.draw(st.integers(0, end))
                max_bytes = data.draw(st.integers(1, 400))
                max_offset = data.draw(st.integers(0, end))
                piece = log.read(offset, max_bytes, max_offset=max_offset)
                want = expected_read(segments, offset, max_bytes, max_offset)
                got = None if piece is None else (piece.position, piece.size)
                assert got == want
                if piece is not None:
                    first = headers_of(piece.read_bytes())[0]
                    assert first.base_offset <= offset <= first.last_offset
        log.close()


@settings(max_examples=60, deadline=None)
@given(counts=st.lists(st.integers(1, 3), min_size=1, max_size=12), cut=st.integers(0, 2000))
def test_recovery_keeps_exactly_the_whole_batches(counts: list[int], cut: int) -> None:
    config = LogConfig(index_interval_bytes=100)
    with tempfile.TemporaryDirectory() as tmp:
        log, [segment] = build(Path(tmp) / "t-0", counts, config)
        log.close()
        path = Path(tmp) / "t-0" / f"{0:020d}.log"
        size = path.stat().st_size
        os.truncate(path, min(cut, size))
        log = PartitionLog.open(Path(tmp) / "t-0", config, ManualClock(), needs_recovery=True)
        kept, end = 0, 0
        for base, count, batch_size in segment:
            if kept + batch_size > cut:
                break
            kept, end = kept + batch_size, base + count
        assert (log.log_end_offset, log.size_bytes()) == (end, kept)
        log.close()
