"""Log compaction: the cleaner keeps the latest record of each key, offsets unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.protocol import compression
from odradek.protocol.errors import KafkaError
from odradek.protocol.record_batch import read_header
from odradek.protocol.records import encode_batch, iter_records
from odradek.storage import LogConfig, LogManager, PartitionLog
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from odradek.storage.producer_state import ProducerStateManager

from .conftest import DAY, append, compacted, keyed_batch, open_manager, read_all, records_of

Record = tuple[int, bytes | None, bytes | None]
COMPACT = compacted(segment_bytes=1000)


@pytest.fixture
def manager(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    manager = open_manager(tmp_path, clock, COMPACT)
    yield manager
    manager.close()


def latest_per_key(records: list[Record], end: int) -> list[Record]:
    """What compaction of offsets below ``end`` must leave: the last record of each key there
    (keyless ones gone), and everything from ``end`` on."""
    last = {key: offset for offset, key, _ in records if offset < end and key is not None}
    return [
        (offset, key, value)
        for offset, key, value in records
        if offset >= end or (key is not None and last[key] == offset)
    ]


def fill(log: PartitionLog, clock: ManualClock, rounds: int, keys: int = 5) -> list[Record]:
    """``rounds`` batches of ``keys`` records each, every key in every batch; returns them."""
    written: list[Record] = []
    for r in range(rounds):
        pairs: list[tuple[bytes | None, bytes | None]] = [
            (f"k{k}".encode(), f"v{k}-{r}".encode()) for k in range(keys)
        ]
        info = append(log, keyed_batch(pairs, timestamp=clock.time_ms()))
        written += [(info.first_offset + i, k, v) for i, (k, v) in enumerate(pairs)]
    return written


def test_compaction_keeps_the_latest_value_of_each_key_at_its_offset(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    written = fill(log, clock, rounds=40)
    size_before = log.size_bytes()
    cleaner = LogCleaner(manager, clock)
    results = cleaner.clean_until_done()
    assert len(results) == 1
    [result] = results
    active_base = log.segments[-1].base_offset
    assert result.end_offset == active_base == cleaner.first_dirty_offset(log)
    assert records_of(log) == latest_per_key(written, active_base)
    assert log.log_end_offset == len(written)
    assert log.size_bytes() < size_before / 4
    assert result.records_read == active_base and result.records_kept == 5
    # Batches keep their offset ranges: a reader moves past removed records.
    headers = read_all(log)
    assert all(h.base_offset % 5 == 0 and h.last_offset_delta == 4 for h in headers)
    assert cleaner.clean_once() is None  # nothing dirty any more


def test_a_second_pass_compacts_the_clean_and_the_new_dirty_section(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    written = fill(log, clock, rounds=20)
    cleaner = LogCleaner(manager, clock)
    assert cleaner.clean_once() is not None
    written += fill(log, clock, rounds=20)
    result = cleaner.clean_once()
    assert result is not None and result.first_offset == 0
    # The small cleaned segments are merged (Kafka's grouping goes by the sizes before cleaning).
    assert result.segments_after < result.segments_before
    end = log.segments[-1].base_offset
    assert result.end_offset == end
    assert records_of(log) == latest_per_key(written, end)


def test_tombstones_stay_for_delete_retention_then_go(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    written = fill(log, clock, rounds=10)
    info = append(log, keyed_batch([(b"k1", None), (b"k2", b"new")], timestamp=clock.time_ms()))
    tombstone = info.first_offset
    written += [(tombstone, b"k1", None), (tombstone + 1, b"k2", b"new")]
    for _ in range(15):  # roll past the tombstone, so that it can be cleaned
        info = append(log, keyed_batch([(b"other", b"x")], timestamp=clock.time_ms()))
        written.append((info.first_offset, b"other", b"x"))
    cleaner = LogCleaner(manager, clock)
    assert cleaner.clean_once() is not None
    after_first = records_of(log)
    assert after_first == latest_per_key(written, log.segments[-1].base_offset)
    assert (tombstone, b"k1", None) in after_first  # the tombstone stays, its key's values go
    assert [r for r in after_first if r[1] == b"k1"] == [(tombstone, b"k1", None)]
    # The tombstone's batch carries its delete horizon (KIP-534), its record its own timestamp.
    piece = log.read(tombstone, 1 << 20)
    assert piece is not None
    header, records = next(iter_records(piece.read_bytes()))
    assert header.delete_horizon == clock.time_ms() + DAY
    assert records[0].timestamp == clock.time_ms()

    clock.advance(DAY - 1)
    assert cleaner.clean_once() is None  # not yet: nothing dirty, the horizon not reached
    clock.advance(1)
    result = cleaner.clean_once()  # the horizon alone makes the log due
    assert result is not None and result.tombstones_removed == 1
    assert [r for r in records_of(log) if r[1] == b"k1"] == []
    assert (tombstone + 1, b"k2", b"new") in records_of(log)
    assert cleaner.clean_once() is None


def test_keyless_records_do_not_survive_compaction(manager: LogManager, clock: ManualClock) -> None:
    log = manager.create("table", 0, COMPACT)
    append(log, keyed_batch([(None, b"a"), (b"k", b"b"), (None, b"c")]))
    for _ in range(10):
        append(log, keyed_batch([(b"pad", b"x" * 100)]))
    LogCleaner(manager, clock).clean_until_done()
    assert [r for r in records_of(log) if r[0] < 3] == [(1, b"k", b"b")]


def unique_keys(log: PartitionLog, clock: ManualClock, batches: int, start: int) -> int:
    for i in range(start, start + batches):
        append(log, keyed_batch([(f"u{i}-{k}".encode(), b"v") for k in range(5)]))
    return start + batches


def test_min_cleanable_dirty_ratio_decides_when_a_log_is_due(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = LogConfig(
        segment_bytes=1000, compact=True, delete=False, min_cleanable_dirty_ratio=0.5
    )
    manager = open_manager(tmp_path, clock, config)
    log = manager.create("table", 0, config)
    n = unique_keys(log, clock, 40, 0)  # nothing to remove: all of it stays as the clean section
    cleaner = LogCleaner(manager, clock)
    assert cleaner.clean_once() is not None
    clean = sum(s.size for s in log.segments[:-1])
    passes = 0
    for _ in range(100):
        n = unique_keys(log, clock, 1, n)
        dirty = sum(s.size for s in log.segments[:-1]) - clean
        due = dirty / (clean + dirty) >= 0.5
        result = cleaner.clean_once()
        assert (result is not None) == due, (clean, dirty)
        if due:
            passes += 1
            break
    assert passes == 1
    manager.close()


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(
        segment_bytes=1000,
        compact=True,
        delete=False,
        min_cleanable_dirty_ratio=0.0,
        min_compaction_lag_ms=60_000,
    )
    manager = open_manager(tmp_path, clock, config)
    log = manager.create("table", 0, config)
    written = fill(log, clock, rounds=20)
    cleaner = LogCleaner(manager, clock)
    assert cleaner.clean_once() is None  # every segment is younger than the lag
    clock.advance(60_001)
    written += fill(log, clock, rounds=20)  # young records
    end = next(s.base_offset for s in log.segments if s.max_timestamp > clock.time_ms() - 60_000)
    assert 0 < end <= 100
    result = cleaner.clean_once()
    assert result is not None and result.end_offset == end
    assert records_of(log) == latest_per_key(written, end)
    manager.close()


def test_max_compaction_lag_forces_a_pass_and_rolls_the_active_segment(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = LogConfig(
        segment_bytes=1 << 20,
        compact=True,
        delete=False,
        min_cleanable_dirty_ratio=0.99,
        max_compaction_lag_ms=60_000,
    )
    manager = open_manager(tmp_path, clock, config)
    log = manager.create("table", 0, config)
    written = fill(log, clock, rounds=10)
    cleaner = LogCleaner(manager, clock)
    assert cleaner.clean_once() is None  # everything is in the active segment
    clock.advance(60_001)
    written += fill(log, clock, rounds=1)  # the active segment is past the lag: it rolls
    assert log.segment_count() == 2
    assert cleaner.clean_once() is not None  # only dirty data: a ratio of 1
    written += fill(log, clock, rounds=10)
    clock.advance(30_000)
    written += fill(log, clock, rounds=1)
    assert log.segment_count() == 2  # no roll yet
    assert cleaner.clean_once() is None  # the dirty records wait in the active segment
    clock.advance(30_001)
    written += fill(log, clock, rounds=1)
    assert log.segment_count() == 3
    segments = log.segments
    clean, dirty = segments[0].size, segments[1].size
    assert dirty / (clean + dirty) < 0.99  # not due by the ratio ...
    result = cleaner.clean_once()  # ... but by max.compaction.lag.ms
    assert result is not None
    assert records_of(log) == latest_per_key(written, segments[2].base_offset)
    manager.close()


def test_rewritten_batches_take_the_topic_codec(tmp_path: Path, clock: ManualClock) -> None:
    config = LogConfig(
        segment_bytes=2000,
        compact=True,
        delete=False,
        min_cleanable_dirty_ratio=0.0,
        compression=compression.ZSTD,
    )
    manager = open_manager(tmp_path, clock, config)
    log = manager.create("table", 0, config)
    append(log, keyed_batch([(b"a", b"1"), (b"b", b"1")], compression=compression.GZIP))
    append(log, keyed_batch([(b"c", b"1")], compression=compression.LZ4))
    append(log, keyed_batch([(b"a", b"2")], compression=compression.SNAPPY))
    for _ in range(30):
        append(log, keyed_batch([(b"pad", b"x" * 50)]))
    LogCleaner(manager, clock).clean_until_done()
    piece = log.read(0, 1 << 20)
    assert piece is not None
    batches = list(iter_records(piece.read_bytes()))
    codecs_by_base = {h.base_offset: h.compression for h, _ in batches}
    assert codecs_by_base[0] == compression.ZSTD  # lost a record: rebuilt in the topic codec
    assert codecs_by_base[2] == compression.LZ4  # kept whole: stored as it was
    assert codecs_by_base[3] == compression.SNAPPY
    assert [(r.offset, r.key, r.value) for _, rs in batches[:3] for r in rs] == [
        (1, b"b", b"1"),
        (2, b"c", b"1"),
        (3, b"a", b"2"),
    ]
    manager.close()


def test_a_small_dedupe_buffer_cleans_in_several_passes(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    written: list[Record] = []
    for r in range(60):
        pairs: list[tuple[bytes | None, bytes | None]] = [
            (f"key-{r % 30}-{k}".encode(), f"{r}".encode()) for k in range(4)
        ]
        info = append(log, keyed_batch(pairs))
        written += [(info.first_offset + i, k, v) for i, (k, v) in enumerate(pairs)]
    cleaner = LogCleaner(manager, clock, CleanerConfig(dedupe_buffer_bytes=2000))
    results = cleaner.clean_until_done()
    assert len(results) > 2
    end = log.segments[-1].base_offset
    assert results[-1].end_offset == end
    assert records_of(log) == latest_per_key(written, end)


def test_the_first_dirty_offset_survives_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    manager = open_manager(tmp_path, clock, COMPACT)
    log = manager.create("table", 0, COMPACT)
    written = fill(log, clock, rounds=30)
    cleaner = LogCleaner(manager, clock)
    [result] = cleaner.clean_until_done()
    cleaned = records_of(log)
    assert (
        "table 0 " + str(result.end_offset) in (tmp_path / "cleaner-offset-checkpoint").read_text()
    )
    manager.close()

    manager = open_manager(tmp_path, clock, COMPACT)
    reopened = manager.get("table", 0)
    assert reopened is not None
    assert records_of(reopened) == cleaned == latest_per_key(written, result.end_offset)
    cleaner = LogCleaner(manager, clock)
    assert cleaner.first_dirty_offset(reopened) == result.end_offset
    assert cleaner.clean_once() is None
    manager.close()


def test_a_reader_sees_a_consistent_log_across_a_swap(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    written = fill(log, clock, rounds=40)
    by_offset = {offset: (key, value) for offset, key, value in written}
    cleaner = LogCleaner(manager, clock)
    plan = cleaner._plan()
    assert plan is not None
    built = cleaner._build(plan)  # the cleaner thread's part
    assert built is not None

    # A reader half way through the log when the swap happens, with a slice already handed out.
    seen: list[Record] = []
    offset = 0
    for _ in range(3):
        piece = log.read(offset, 200)
        assert piece is not None
        for header, records in iter_records(piece.read_bytes()):
            seen += [(r.offset, r.key, r.value) for r in records]
            offset = header.next_offset
    in_flight = log.read(offset, 200)
    assert in_flight is not None
    assert cleaner._swap(built) is not None
    # The slice handed out before the swap still reads the old bytes.
    for header, records in iter_records(in_flight.read_bytes()):
        seen += [(r.offset, r.key, r.value) for r in records]
        offset = header.next_offset
    while (piece := log.read(offset, 200)) is not None:
        for header, records in iter_records(piece.read_bytes()):
            seen += [(r.offset, r.key, r.value) for r in records]
            offset = header.next_offset
    offsets = [r[0] for r in seen]
    assert offsets == sorted(set(offsets))
    assert all(by_offset[o] == (k, v) for o, k, v in seen)
    last_seen = {k: v for _, k, v in seen}
    assert last_seen == {k: v for _, k, v in written}  # every key's latest value was read


def test_a_pass_is_dropped_when_the_log_changes_under_it(
    manager: LogManager, clock: ManualClock, tmp_path: Path
) -> None:
    log = manager.create("table", 0, COMPACT)
    fill(log, clock, rounds=40)
    before = records_of(log)
    cleaner = LogCleaner(manager, clock)
    plan = cleaner._plan()
    assert plan is not None
    built = cleaner._build(plan)
    assert built is not None
    log.delete_records_before(log.segments[1].base_offset)  # DeleteRecords meanwhile
    assert cleaner._swap(built) is None
    assert records_of(log) == [r for r in before if r[0] >= log.log_start_offset]
    directory = tmp_path / "table-0"
    assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".tmp"))]
    assert cleaner.clean_once() is not None  # the next pass works from the new state


def test_the_cleaner_thread_runs_beside_the_event_loop(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    written = fill(log, clock, rounds=40)

    async def main() -> None:
        cleaner = LogCleaner(manager, clock, CleanerConfig(backoff_ms=10))
        cleaner.start()
        for _ in range(500):
            if cleaner.passes:
                break
            await asyncio.sleep(0.01)
        await cleaner.stop()
        assert cleaner.passes == 1

    asyncio.run(main())
    assert records_of(log) == latest_per_key(written, log.segments[-1].base_offset)


def test_stopping_abandons_a_pass_in_progress(
    manager: LogManager, clock: ManualClock, tmp_path: Path
) -> None:
    log = manager.create("table", 0, COMPACT)
    fill(log, clock, rounds=40)
    before = records_of(log)

    async def main() -> None:
        cleaner = LogCleaner(manager, clock, CleanerConfig(io_max_bytes_per_second=1000))
        cleaner.start()
        await asyncio.sleep(0.05)
        await cleaner.stop()
        assert cleaner.passes == 0

    asyncio.run(main())
    assert records_of(log) == before
    directory = tmp_path / "table-0"
    assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".tmp"))]


def test_an_idempotent_producers_last_batch_stays_for_its_sequence(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)

    def idempotent(pairs: list[tuple[bytes, bytes]], sequence: int) -> bytes:
        return encode_batch(
            [(k, v, (), clock.time_ms()) for k, v in pairs],
            producer_id=7,
            producer_epoch=0,
            base_sequence=sequence,
            now_ms=clock.time_ms(),
        )

    append(log, idempotent([(b"a", b"1"), (b"b", b"1")], 0))  # offsets 0-1, sequences 0-1
    append(log, idempotent([(b"a", b"2"), (b"b", b"2")], 2))  # offsets 2-3, sequences 2-3
    # Another producer overwrites both keys: producer 7's batches lose every record.
    for _ in range(15):
        append(log, keyed_batch([(b"a", b"3"), (b"b", b"3")]))
    cleaner = LogCleaner(manager, clock)
    for _ in range(2):  # a second pass finds the emptied batch in the clean section
        cleaner.clean_once()
        for _ in range(15):
            append(log, keyed_batch([(b"a", b"4"), (b"b", b"4")]))
    headers = read_all(log)
    producer_batches = [h for h in headers if h.producer_id == 7]
    assert [(h.base_offset, h.last_offset, h.record_count) for h in producer_batches] == [(2, 3, 0)]
    assert producer_batches[0].base_sequence == 2
    assert [r for r in records_of(log) if r[0] < 4] == []
    # Rebuilt from the log, as after a restart, the producer's state expects sequence 4.
    table = ProducerStateManager(Path("unused-no-snapshots"))
    for h in headers:
        table.update(h, h.base_offset)
    with pytest.raises(KafkaError):
        table.check(read_header(idempotent([(b"c", b"1")], 3)))
    assert table.check(read_header(idempotent([(b"c", b"1")], 4))) is None


def test_the_cleaner_keeps_the_figures_its_metrics_report(
    manager: LogManager, clock: ManualClock
) -> None:
    log = manager.create("table", 0, COMPACT)
    fill(log, clock, rounds=40)
    cleaner = LogCleaner(manager, clock)
    assert (cleaner.passes, cleaner.last_result, cleaner.last_run_ms) == (0, None, None)
    result = cleaner.clean_once()
    assert result is not None
    assert cleaner.passes == 1 and cleaner.last_result == result
    assert result.bytes_written < result.bytes_read
    assert cleaner.last_run_ms == clock.time_ms()
    assert cleaner.max_dirty_ratio == 1.0  # never cleaned: all of it below the active segment
    clock.advance(2_000)
    assert cleaner.clean_once() is None
    assert cleaner.last_run_ms == clock.time_ms()
    assert cleaner.max_dirty_ratio == 0.0  # nothing cleanable when it last looked
    assert cleaner.uncleanable_count() == 0
