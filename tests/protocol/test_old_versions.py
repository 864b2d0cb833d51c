"""Produce v0-v2 and Fetch v0-v3, which kio lacks, against an old client's bytes.

Requests are frames kafka-python wrote when pinned to old ``api_version`` settings (captured
by ``captured/capture_kafka_python.py`` into ``captured/kafka_python.json``) or built with
kafka-python's protocol classes (generated from Kafka's message definitions, versions 0 and up);
responses are read back with those classes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from odradek.protocol import fetch_response, produce_response
from odradek.protocol.fetch_request import OldFetchRequest, decode_fetch_request
from odradek.protocol.produce_request import decode_produce_request
from odradek.protocol.records import encode_batch

CAPTURED: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "captured" / "kafka_python.json").read_text()
)


def captured(api_key: int, version: int) -> bytes:
    return bytes.fromhex(CAPTURED[f"{api_key}/v{version}"]["frame"])


def captured_versions(api_key: int, below: int) -> list[int]:
    return sorted(
        v["api_version"]
        for v in CAPTURED.values()
        if v["api_key"] == api_key and v["api_version"] < below
    )


@pytest.mark.parametrize("version", captured_versions(0, 3))
def test_captured_old_produce_requests_read_as_kafka_python_wrote_them(version):
    frame = captured(0, version)
    want = ProduceRequest.decode(frame, version=version, header=True)
    header, got = decode_produce_request(frame)
    assert (header.api_key, header.api_version) == (0, version)
    assert header.correlation_id == want.header.correlation_id
    assert header.client_id == want.header.client_id
    assert got.transactional_id is None
    assert (got.acks, got.timeout_ms) == (want.acks, want.timeout_ms)
    assert [
        (t.name, [(p.index, bytes(p.records or b"")) for p in t.partition_data])
        for t in got.topic_data
    ] == [
        (t.name, [(p.index, bytes(p.records)) for p in t.partition_data]) for t in want.topic_data
    ]
    # v0/v1 message sets: the magic byte of the first message
    assert got.topic_data[0].partition_data[0].records[16] in (0, 1)


def test_produce_v0_built_by_kafka_python_reads():
    T = ProduceRequest[0].TopicProduceData
    P = T.PartitionProduceData
    request = ProduceRequest[0](
        acks=1,
        timeout_ms=1500,
        topic_data=[T(name="t", partition_data=[P(index=3, records=b"records")])],
    )
    request.with_header(correlation_id=9, client_id="old")
    header, got = decode_produce_request(request.encode(header=True))
    assert (header.api_version, header.correlation_id, header.client_id) == (0, 9, "old")
    assert (got.acks, got.timeout_ms) == (1, 1500)
    assert [
        (t.name, [(p.index, bytes(p.records or b"")) for p in t.partition_data])
        for t in got.topic_data
    ] == [("t", [(3, b"records")])]


PARTITIONS = [
    {
        "index": 0,
        "error_code": 0,
        "base_offset": 1234567890123,
        "log_append_time": 1_700_000_000_000,
        "log_start_offset": 17,
        "record_errors": [],
        "error_message": None,
    },
    {
        "index": 7,
        "error_code": 2,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": "corrupt",
    },
]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_old_produce_responses_read_by_kafka_python(version):
    frame = produce_response.encode(version, 77, [("orders", PARTITIONS), ("none", [])], 5)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    got = ProduceResponse[version].decode(frame[4:], header=True)
    assert got.header.correlation_id == 77
    assert [
        (t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
        for t in got.responses
    ] == [("orders", [(0, 0, 1234567890123), (7, 2, -1)]), ("none", [])]
    if version >= 1:
        assert got.throttle_time_ms == 5
    if version >= 2:
        assert [p.log_append_time_ms for p in got.responses[0].partition_responses] == [
            1_700_000_000_000,
            -1,
        ]


def fetch_request(version: int) -> bytes:
    T = FetchRequest[version].FetchTopic
    P = T.FetchPartition
    fields: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 250,
        "min_bytes": 1,
        "topics": [
            T(
                topic="t",
                partitions=[
                    P(partition=0, fetch_offset=5, partition_max_bytes=1000),
                    P(partition=2, fetch_offset=2**40, partition_max_bytes=1 << 20),
                ],
            ),
            T(topic="u", partitions=[]),
        ],
    }
    if version >= 3:
        fields["max_bytes"] = 12345
    request = FetchRequest[version](**fields)
    request.with_header(correlation_id=31, client_id="old-consumer")
    return request.encode(header=True)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_old_fetch_requests_read_as_kio_names_them(version):
    header, got = decode_fetch_request(memoryview(fetch_request(version)))
    assert (header.api_key, header.api_version, header.correlation_id) == (1, version, 31)
    assert header.client_id == "old-consumer"
    assert isinstance(got, OldFetchRequest)
    assert (got.replica_id, got.max_wait.total_seconds(), got.min_bytes) == (-1, 0.25, 1)
    assert got.max_bytes == (12345 if version >= 3 else 0x7FFFFFFF)
    assert got.isolation_level == 0
    assert [
        (t.topic, [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions])
        for t in got.topics
    ] == [("t", [(0, 5, 1000), (2, 2**40, 1 << 20)]), ("u", [])]


@pytest.mark.parametrize("version", captured_versions(1, 4))
def test_captured_old_fetch_requests(version):
    frame = captured(1, version)
    want = FetchRequest.decode(frame, version=version, header=True)
    _, got = decode_fetch_request(memoryview(frame))
    assert [
        (t.topic, [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions])
        for t in got.topics
    ] == [
        (t.topic, [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions])
        for t in want.topics
    ]
    assert got.min_bytes == want.min_bytes


def test_fetch_v4_and_later_are_kios():
    header, got = decode_fetch_request(memoryview(fetch_request(4)))
    assert header.api_version == 4
    assert type(got).__module__.startswith("kio.")


@pytest.mark.parametrize("cut", [3, 10, 25, 40])
def test_truncated_old_fetch_request_is_refused(cut):
    frame = fetch_request(2)
    with pytest.raises(ValueError):
        decode_fetch_request(memoryview(frame[: len(frame) - cut]))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_old_fetch_responses_read_by_kafka_python(version):
    records = encode_batch([(b"k", b"v", (), 1)], now_ms=0)
    topics = [
        fetch_response.TopicData(
            "t",
            [
                fetch_response.PartitionData(0, 0, 100, 90, 3, records, len(records)),
                fetch_response.PartitionData(1, 1, -1, -1, -1, None, 0),
            ],
        )
    ]
    parts, size = fetch_response.encode(version, 5, topics, throttle_time_ms=9)
    frame = b"".join(parts)
    assert len(frame) == size
    got = FetchResponse[version].decode(frame[4:], header=True)
    assert got.header.correlation_id == 5
    if version >= 1:
        assert got.throttle_time_ms == 9
    [topic] = got.responses
    assert topic.topic == "t"
    assert [(p.partition_index, p.error_code, p.high_watermark) for p in topic.partitions] == [
        (0, 0, 100),
        (1, 1, -1),
    ]
    assert bytes(topic.partitions[0].records or b"") == records
