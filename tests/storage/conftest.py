"""Hand-made RecordBatch v2 bytes and small helpers for the storage tests."""

from __future__ import annotations

import contextlib
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import crc32c
import pytest

from odradek.clock import ManualClock
from odradek.protocol.record_batch import BatchHeader, iter_headers, validate_batches
from odradek.protocol.records import encode_batch, iter_records
from odradek.storage import AppendInfo, LogConfig, LogManager, PartitionLog
from odradek.storage.flusher import LogFlusher


def varint(n: int) -> bytes:
    """Zigzag varint, as v2 records encode their lengths and deltas."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def make_batch(
    count: int = 1,
    *,
    timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    value: bytes = b"value",
) -> bytes:
    """A valid uncompressed v2 batch of ``count`` records with null keys (base offset 0)."""
    stamps = timestamps if timestamps is not None else [timestamp] * count
    records = b""
    for i, ts in enumerate(stamps):
        body = b"\x00" + varint(ts - stamps[0]) + varint(i) + varint(-1)
        body += varint(len(value)) + value + varint(0)
        records += varint(len(body)) + body
    after_crc = (
        struct.pack(
            ">hiqqqhii", 0, len(stamps) - 1, stamps[0], max(stamps), -1, -1, -1, len(stamps)
        )
        + records
    )
    head = struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, crc32c.crc32c(after_crc))
    return head + after_crc


def append(log: PartitionLog, *batches: bytes, **kwargs: int) -> AppendInfo:
    buf = bytearray(b"".join(batches))
    return log.append(buf, validate_batches(buf, 1 << 30), **kwargs)


def headers_of(data: bytes) -> list[BatchHeader]:
    return list(iter_headers(data))


def read_all(log: PartitionLog, offset: int | None = None) -> list[BatchHeader]:
    """Every batch from ``offset`` (default: the log start) to the end, by repeated reads."""
    found: list[BatchHeader] = []
    offset = log.log_start_offset if offset is None else offset
    while (piece := log.read(offset, 1 << 20)) is not None:
        batch_headers = headers_of(piece.read_bytes())
        found += batch_headers
        offset = batch_headers[-1].next_offset
    return found


BATCH_SIZE = len(make_batch())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


DAY = 24 * 3_600_000


def compacted(segment_bytes: int) -> LogConfig:
    """A compacted topic (no deletion) whose every dirty byte is due for cleaning; tombstones
    and transaction markers stay a day (delete.retention.ms)."""
    return LogConfig(
        segment_bytes=segment_bytes,
        index_interval_bytes=0,
        delete=False,
        compact=True,
        min_cleanable_dirty_ratio=0.0,
        delete_retention_ms=DAY,
    )


def open_manager(directory: Path, clock: ManualClock, config: LogConfig) -> LogManager:
    """A log manager on ``directory`` whose every topic takes ``config``; the caller closes it."""
    manager = LogManager([directory], clock)
    manager.open(lambda topic: config)
    return manager


@pytest.fixture
def open_log(tmp_path: Path, clock: ManualClock) -> Callable[..., PartitionLog]:
    """Open (or reopen) the log `topic-0` under tmp_path with the given config."""

    def opener(config: LogConfig | None = None, **kwargs: int | bool) -> PartitionLog:
        return PartitionLog.open(
            tmp_path / "topic-0",
            config or LogConfig(),
            clock,
            **kwargs,  # type: ignore[arg-type]
        )

    return opener


def keyed_batch(
    pairs: list[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int = 1_700_000_000_000,
    compression: int = 0,
) -> bytes:
    """A v2 batch of records with the given keys and values (None: a null key or a tombstone)."""
    return encode_batch(
        [(key, value, (), timestamp) for key, value in pairs],
        compression=compression,
        now_ms=timestamp,
    )


def records_of(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the log start on, as a reader gets them."""
    found: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while (piece := log.read(offset, 1 << 20)) is not None:
        for header, records in iter_records(piece.read_bytes()):
            found += [(r.offset, r.key, r.value) for r in records if r.offset >= offset]
            offset = header.next_offset
    return found


FLUSHER_WAIT_S = 30  # a bound on waiting for the flusher thread, never a delay


@contextlib.contextmanager
def held(flusher: LogFlusher) -> Iterator[None]:
    """Keep the flusher's thread busy for the block: jobs handed to it meanwhile stay queued."""
    release, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(FLUSHER_WAIT_S)

    flusher.call("held by the test", hold)
    assert started.wait(FLUSHER_WAIT_S)
    try:
        yield
    finally:
        release.set()
