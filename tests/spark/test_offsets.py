"""Offsets JSON, rate limits, range splitting and option parsing: pure functions, no Spark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client.data import EARLIEST, LATEST, TopicPartition
from odradek.spark.offsets import (
    OffsetRange,
    from_json,
    limit_offsets,
    new_offsets,
    split_ranges,
    to_json,
)
from odradek.spark.options import OptionError, ReadOptions, WriteOptions, parse_duration_ms

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "a"}


def test_offsets_json_is_sorted_with_string_partitions() -> None:
    offsets = {B0: 3, A1: 2, TopicPartition("a", 10): 5, A0: 1}
    data = to_json(offsets)
    assert list(data) == ["a", "b"]
    assert data["a"] == {"0": 1, "1": 2, "10": 5}
    assert from_json(data) == offsets


def test_limit_splits_by_lag_and_takes_exactly_the_limit() -> None:
    assert limit_offsets({A0: 0, A1: 0}, {A0: 50, A1: 50}, 20) == {A0: 10, A1: 10}
    end = limit_offsets({A0: 0, A1: 10}, {A0: 90, A1: 20, B0: 5}, 21)
    assert new_offsets({A0: 0, A1: 10}, end) == 21
    assert end[A0] > end[A1] - 10
    assert limit_offsets({A0: 5}, {A0: 8}, 100) == {A0: 8}


@given(
    st.dictionaries(
        st.sampled_from([A0, A1, B0]), st.tuples(st.integers(0, 50), st.integers(0, 200))
    ),
    st.integers(1, 300),
)
def test_limit_never_overshoots(bounds: dict[TopicPartition, tuple[int, int]], limit: int) -> None:
    start = {tp: lo for tp, (lo, _) in bounds.items()}
    latest = {tp: lo + extra for tp, (lo, extra) in bounds.items()}
    end = limit_offsets(start, latest, limit)
    assert new_offsets(start, end) == min(limit, new_offsets(start, latest))
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in latest)


def test_split_honours_min_partitions_and_max_records() -> None:
    ranges = [OffsetRange(A0, 0, 100), OffsetRange(A1, 0, 10), OffsetRange(B0, 5, 5)]
    parts = split_ranges(ranges, min_partitions=6)
    assert len(parts) >= 6
    assert sum(p.size for p in parts) == 110
    assert all(p.size > 0 for p in parts)
    capped = split_ranges(ranges, max_records_per_partition=30)
    assert max(p.size for p in capped) <= 30
    assert [(p.partition, p.start) for p in capped][:4] == [(A0, 0), (A0, 25), (A0, 50), (A0, 75)]


def test_read_options_like_sparks_kafka_source() -> None:
    options = ReadOptions.parse(
        {
            **BASE,
            "startingOffsets": '{"a": {"0": 5, "1": -2}}',
            "maxOffsetsPerTrigger": "100",
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
            "failOnDataLoss": "false",
        },
        streaming=True,
    )
    assert options.starting.per_partition == {A0: 5, A1: EARLIEST}
    assert options.max_offsets_per_trigger == 100
    assert options.max_trigger_delay_ms == 30_000
    assert options.fail_on_data_loss is False
    assert ReadOptions.parse(BASE, streaming=True).starting.default == LATEST
    assert ReadOptions.parse(BASE, streaming=False).starting.default == EARLIEST
    assert (
        ReadOptions.parse({**BASE, "startingTimestamp": "1000"}, streaming=True).starting.timestamp
        == 1000
    )
    assigned = ReadOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "assign": '{"b": [0], "a": [1, 0]}'}, streaming=True
    )
    assert assigned.subscription.assigned == (A0, A1, B0)


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"kafka.bootstrap.servers": "h:1"}, True, "exactly one of"),
        ({**BASE, "subscribePattern": "a.*"}, True, "exactly one of"),
        ({"subscribe": "a"}, True, "kafka.bootstrap.servers"),
        ({**BASE, "endingOffsets": "latest"}, True, "batch queries only"),
        ({**BASE, "startingOffsets": "latest"}, False, "streaming queries only"),
        ({**BASE, "maxOffsetsPerTrigger": "10"}, False, "streaming queries only"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "at least 1"),
        ({**BASE, "startingOffsets": "{nope"}, True, "not valid JSON"),
        ({**BASE, "failOnDataLoss": "maybe"}, True, "true or false"),
        ({**BASE, "maxTriggerDelay": "soon"}, True, "duration"),
        ({**BASE, "subscribePattern": None, "assign": "[1]"}, True, "exactly one of"),
    ],
)
def test_bad_read_options_name_the_problem(
    options: dict[str, str], streaming: bool, message: str
) -> None:
    with pytest.raises(OptionError, match=message):
        ReadOptions.parse(options, streaming=streaming)


def test_write_options() -> None:
    options = WriteOptions.parse(
        {"kafka.bootstrap.servers": "h:1", "kafka.acks": "1", "topic": "t"}
    )
    assert (options.acks, options.topic, options.compression) == (1, "t", 0)
    assert WriteOptions.parse({"kafka.bootstrap.servers": "h:1"}).acks == -1
    with pytest.raises(OptionError, match=r"kafka\.compression\.type"):
        WriteOptions.parse({"kafka.bootstrap.servers": "h:1", "kafka.compression.type": "brotli"})


def test_durations() -> None:
    assert parse_duration_ms("15m") == 900_000
    assert parse_duration_ms("250") == 250
    assert parse_duration_ms("2h") == 7_200_000
