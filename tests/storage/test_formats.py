"""The on-disk formats, round-tripped: what is written is read back the same, byte for byte in
Kafka's layout, and lookups agree with a plain model of the entries."""

from __future__ import annotations

import tempfile
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.storage.formats import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    format_checkpoint,
    format_leader_epoch_checkpoint,
    format_swap_manifest,
    parse_checkpoint,
    parse_leader_epoch_checkpoint,
    parse_partition_dir_name,
    parse_segment_file_name,
    parse_swap_manifest,
    partition_dir_name,
    segment_file_name,
)
from odradek.storage.index import OffsetIndex, TimeIndex

BASE = 1000
INT32 = 2**31 - 1

# Kafka's legal topic names: ASCII letters, digits, '.', '_' and '-', up to 249 characters.
topic_names = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=249,
).filter(lambda name: name not in (".", ".."))
partitions = st.integers(min_value=0, max_value=INT32)
offsets = st.integers(min_value=0, max_value=2**63 - 1)


def increasing(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[list[int]]:
    """Strictly increasing int32s."""
    steps = st.lists(st.integers(1, 10_000), min_size=min_size, max_size=max_size)
    return steps.map(lambda xs: [sum(xs[: i + 1]) for i in range(len(xs))])


_ROOT: list[Path] = []


@pytest.fixture(autouse=True, scope="module")
def _scratch() -> Iterator[None]:
    # Hypothesis runs every example inside one test call, so pytest's tmp_path cannot give
    # each example a directory of its own.
    with tempfile.TemporaryDirectory(prefix="odradek-formats-") as root:
        _ROOT.append(Path(root))
        yield
        _ROOT.pop()


def directory() -> Path:
    return Path(tempfile.mkdtemp(dir=_ROOT[-1]))


@given(topic_names, partitions)
def test_partition_directory_names_round_trip(topic: str, partition: int) -> None:
    assert parse_partition_dir_name(partition_dir_name(topic, partition)) == (topic, partition)


@given(offsets, st.sampled_from([LOG_SUFFIX, INDEX_SUFFIX, ".timeindex", ".txnindex"]))
def test_segment_file_names_round_trip_with_twenty_digits(offset: int, suffix: str) -> None:
    name = segment_file_name(offset, suffix)
    assert name == f"{offset:020d}{suffix}"
    assert parse_segment_file_name(name) == (offset, suffix)


@given(st.dictionaries(st.tuples(topic_names, partitions), offsets, max_size=20))
def test_checkpoints_round_trip_in_kafkas_text_layout(entries: dict[tuple[str, int], int]) -> None:
    data = format_checkpoint(entries)
    lines = data.decode().split("\n")
    assert lines[:2] == ["0", str(len(entries))]
    assert lines[-1] == ""  # every line ends in a newline
    assert parse_checkpoint(data) == entries


@given(increasing(max_size=20), increasing(max_size=20))
def test_leader_epoch_checkpoints_round_trip(epochs: list[int], starts: list[int]) -> None:
    entries = list(zip(epochs, starts, strict=False))
    data = format_leader_epoch_checkpoint(entries)
    assert data.decode().split("\n")[:2] == ["0", str(len(entries))]
    assert parse_leader_epoch_checkpoint(data) == entries


@given(st.dictionaries(offsets, st.lists(offsets, min_size=1, max_size=5), max_size=10))
def test_swap_manifests_round_trip(entries: dict[int, list[int]]) -> None:
    assert parse_swap_manifest(format_swap_manifest(entries)) == entries


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_offset_index_is_kafkas_layout_and_reopens_to_the_same_lookups(
    data: st.DataObject,
) -> None:
    relative = data.draw(increasing(min_size=1, max_size=40))
    positions = data.draw(increasing(min_size=len(relative), max_size=len(relative)))
    path = directory() / f"{BASE:020d}.index"
    index = OffsetIndex.open(path, BASE, 1 << 20)
    for offset, position in zip(relative, positions, strict=True):
        index.append(BASE + offset, position)
    index.write_pending()  # entries reach the file at a flush, seal, rename or close
    assert path.read_bytes() == b"".join(
        OFFSET_INDEX_ENTRY.pack(o, p) for o, p in zip(relative, positions, strict=True)
    )
    reopened = OffsetIndex.open(path, BASE, 1 << 20)
    assert len(reopened) == len(relative)
    assert reopened.problem(log_size=positions[-1] + 1) is None
    probes = data.draw(st.lists(st.integers(BASE - 5, BASE + relative[-1] + 5)))
    for probe in probes:
        slot = bisect_right(relative, probe - BASE) - 1
        expected = positions[slot] if slot >= 0 else 0
        assert index.lookup(probe) == reopened.lookup(probe) == expected
    index.release()
    reopened.release()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_truncated_offset_index_keeps_exactly_the_entries_below(data: st.DataObject) -> None:
    relative = data.draw(increasing(min_size=1, max_size=30))
    cut = data.draw(st.integers(0, relative[-1] + 1))
    path = directory() / f"{BASE:020d}.index"
    index = OffsetIndex.open(path, BASE, 1 << 20)
    for i, offset in enumerate(relative):
        index.append(BASE + offset, (i + 1) * 100)
    index.write_pending()
    index.truncate_to(BASE + cut)
    index.write_pending()
    kept = [o for o in relative if o < cut]
    assert len(index) == len(kept)
    assert len(path.read_bytes()) == len(kept) * OFFSET_INDEX_ENTRY.size
    assert len(OffsetIndex.open(path, BASE, 1 << 20)) == len(kept)
    index.release()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_time_index_keeps_only_growing_timestamps_and_reopens_the_same(
    data: st.DataObject,
) -> None:
    relative = data.draw(increasing(min_size=1, max_size=40))
    timestamps = data.draw(
        st.lists(st.integers(0, 2**40), min_size=len(relative), max_size=len(relative))
    )
    path = directory() / f"{BASE:020d}.timeindex"
    index = TimeIndex.open(path, BASE, 1 << 20)
    model: list[tuple[int, int]] = []
    for offset, timestamp in zip(relative, timestamps, strict=True):
        index.maybe_append(timestamp, BASE + offset)
        if not model or timestamp > model[-1][0]:
            model.append((timestamp, offset))
    index.write_pending()
    assert path.read_bytes() == b"".join(TIME_INDEX_ENTRY.pack(t, o) for t, o in model)
    reopened = TimeIndex.open(path, BASE, 1 << 20)
    next_offset = BASE + relative[-1] + 1
    assert reopened.problem(next_offset) is None
    assert reopened.last_entry == ((model[-1][0], BASE + model[-1][1]) if model else None)
    for probe in data.draw(st.lists(st.integers(-1, 2**40 + 1), max_size=20)):
        slot = bisect_right([t for t, _ in model], probe) - 1
        expected = BASE + model[slot][1] if slot >= 0 else None
        assert index.lookup(probe) == reopened.lookup(probe) == expected
    index.release()
    reopened.release()


@given(increasing(min_size=1, max_size=10), st.integers(1, OFFSET_INDEX_ENTRY.size - 1))
def test_a_torn_last_index_entry_is_reported(relative: list[int], torn: int) -> None:
    path = directory() / f"{BASE:020d}.index"
    index = OffsetIndex.open(path, BASE, 1 << 20)
    for i, offset in enumerate(relative):
        index.append(BASE + offset, (i + 1) * 100)
    index.release()
    with path.open("ab") as f:
        f.write(b"\xff" * torn)
    problem = OffsetIndex.open(path, BASE, 1 << 20).problem(log_size=10**9)
    assert problem is not None and "multiple of the entry size" in problem
