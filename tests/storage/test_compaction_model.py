"""Compaction checked against a plain model: random appends, tombstones, passes and restarts."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner

from .conftest import append, keyed_batch, records_of

Record = tuple[int, bytes | None, bytes | None]
CONFIG = LogConfig(
    segment_bytes=300,
    index_interval_bytes=50,
    delete=False,
    compact=True,
    min_cleanable_dirty_ratio=0.0,
    delete_retention_ms=1000,
)

keys = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]))
values = st.one_of(st.none(), st.binary(min_size=1, max_size=8))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.tuples(keys, values), min_size=1, max_size=4)),
        st.tuples(st.just("clean"), st.integers(200, 5000)),  # with the dedupe buffer size
        st.tuples(st.just("advance"), st.integers(1, 1500)),
        st.tuples(st.just("reopen"), st.none()),
    ),
    max_size=40,
)


def check(written: list[Record], stored: list[Record], first_dirty: int, end: int) -> None:
    by_offset = {offset: (key, value) for offset, key, value in written}
    offsets = [offset for offset, _, _ in stored]
    assert offsets == sorted(set(offsets)), "offsets repeat or go back"
    for offset, key, value in stored:
        assert by_offset[offset] == (key, value), f"offset {offset} changed"
    assert all(offset < end for offset in offsets)
    # Every key's latest record is there; a latest tombstone may be gone, but then so is the key.
    latest: dict[bytes, Record] = {}
    for record in written:
        if record[1] is not None:
            latest[record[1]] = record
    present = set(stored)
    for key, record in latest.items():
        if record[2] is not None:
            assert record in present, f"latest value of {key!r} lost"
        elif record not in present:
            assert not [r for r in stored if r[1] == key], f"{key!r} came back after its delete"
    # The compacted section holds each key once.
    clean_keys = [key for offset, key, _ in stored if offset < first_dirty]
    assert len(clean_keys) == len(set(clean_keys))


@settings(max_examples=40, deadline=None)
@given(ops=operations)
def test_compaction_matches_the_model(ops: list[tuple[str, object]]) -> None:
    clock = ManualClock()
    with tempfile.TemporaryDirectory() as tmp:
        manager = LogManager([Path(tmp)], clock)
        manager.open(lambda topic: CONFIG)
        log = manager.create("model", 0, CONFIG)
        cleaner = LogCleaner(manager, clock)
        written: list[Record] = []
        for op, arg in ops:
            if op == "append":
                assert isinstance(arg, list)
                info = append(log, keyed_batch(arg, timestamp=clock.time_ms()))
                written += [(info.first_offset + i, k, v) for i, (k, v) in enumerate(arg)]
            elif op == "clean":
                assert isinstance(arg, int)
                cleaner.config = CleanerConfig(dedupe_buffer_bytes=arg)
                cleaner.clean_once()
            elif op == "advance":
                assert isinstance(arg, int)
                clock.advance(arg)
            else:
                manager.close()
                manager = LogManager([Path(tmp)], clock)
                manager.open(lambda topic: CONFIG)
                reopened = manager.get("model", 0)
                assert reopened is not None
                log = reopened
                cleaner = LogCleaner(manager, clock)
            assert log.log_end_offset == len(written)
            check(written, records_of(log), cleaner.first_dirty_offset(log), len(written))
        # However it got here, passes until none is due leave a compacted log.
        cleaner.clean_until_done()
        stored = records_of(log)
        check(written, stored, cleaner.first_dirty_offset(log), len(written))
        manager.close()
