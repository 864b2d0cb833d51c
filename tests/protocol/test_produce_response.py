"""The hand-written Produce response agrees with kio's decoder for every version we serve."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.protocol import produce_response
from odradek.protocol.messages import build, decode_response, encode_response, response_schema

PARTITIONS: list[dict[str, Any]] = [
    {
        "index": 0,
        "error_code": 0,
        "base_offset": 1234567890123,
        "log_append_time": -1,
        "log_start_offset": 17,
        "record_errors": [],
        "error_message": None,
    },
    {
        "index": 7,
        "error_code": 87,  # INVALID_RECORD, with a record error
        "base_offset": -1,
        "log_append_time": 1_700_000_000_000,
        "log_start_offset": -1,
        "record_errors": [
            {"batch_index": 3, "batch_index_error_message": "no key"},
            {"batch_index": 4, "batch_index_error_message": None},
        ],
        "error_message": "compacted topics need keys: ünïcode",
    },
]
KIO_MIN_VERSION = 3  # v0-v2: test_old_versions_read_by_kafka_python
TOPICS = [("orders", PARTITIONS), ("ünïcode-topic", PARTITIONS[:1]), ("empty", [])]


@pytest.mark.parametrize("version", range(KIO_MIN_VERSION, produce_response.MAX_VERSION + 1))
def test_kio_reads_what_is_written(version: int) -> None:
    frame = produce_response.encode(version, 424242, TOPICS, throttle_time_ms=5)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, body = decode_response(response_schema(0, version), memoryview(frame)[4:])
    assert correlation_id == 424242
    response: Any = body
    assert int(response.throttle_time.total_seconds() * 1000) == 5
    assert [t.name for t in response.responses] == [name for name, _ in TOPICS]
    for topic, (_, expected) in zip(response.responses, TOPICS, strict=True):
        assert len(topic.partition_responses) == len(expected)
        for got, want in zip(topic.partition_responses, expected, strict=True):
            assert got.index == want["index"] and got.error_code == want["error_code"]
            assert got.base_offset == want["base_offset"]
            if want["log_append_time"] == -1:
                assert got.log_append_time is None  # kio's reading of -1
            else:
                assert int(got.log_append_time.timestamp() * 1000) == want["log_append_time"]
            if version >= 5:
                assert got.log_start_offset == want["log_start_offset"]
            if version >= 8:
                assert got.error_message == want["error_message"]
                assert [
                    (e.batch_index, e.batch_index_error_message) for e in got.record_errors
                ] == [
                    (e["batch_index"], e["batch_index_error_message"])
                    for e in want["record_errors"]
                ]


def test_versions_outside_the_range_are_refused() -> None:
    for version in (produce_response.MIN_VERSION - 1, produce_response.MAX_VERSION + 1):
        with pytest.raises(ValueError):
            produce_response.encode(version, 1, TOPICS)


@pytest.mark.parametrize("version", range(KIO_MIN_VERSION, produce_response.MAX_VERSION + 1))
def test_the_same_bytes_as_kio_writes(version: int) -> None:
    responses = [{"name": name, "partition_responses": parts} for name, parts in TOPICS]
    expected = encode_response(
        99, build(response_schema(0, version), {"responses": responses, "throttle_time": 5})
    )
    assert produce_response.encode(version, 99, TOPICS, throttle_time_ms=5) == expected
