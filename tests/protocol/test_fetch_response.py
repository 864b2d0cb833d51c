"""The hand-written Fetch response writer agrees with kio, field for field and byte for byte; the
follower's hand-written reader reads what kio and the writer write, and refuses the rest."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader

from odradek.protocol import fetch_response
from odradek.protocol.bounds import MalformedRequest
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build, encode_response, response_schema
from odradek.protocol.records import encode_batch

VERSIONS = [4, 5, 7, 11, 12]


@dataclass(frozen=True)
class FakeSlice:
    """Stands in for a storage slice: the writer must pass it through untouched."""

    data: bytes


def join(parts: list[Any]) -> bytes:
    return b"".join(p.data if isinstance(p, FakeSlice) else p for p in parts)


def batch(*values: bytes, base_offset: int = 0) -> bytes:
    return encode_batch(
        [(None, v, (), None) for v in values], base_offset=base_offset, now_ms=1_700_000_000_000
    )


def sample_topics() -> list[fetch_response.TopicData[FakeSlice]]:
    first = batch(b"a", b"b") + batch(b"c", base_offset=2)
    second = batch(b"z" * 300, base_offset=10)
    P = fetch_response.PartitionData
    return [
        fetch_response.TopicData(
            "orders",
            [
                P(0, ErrorCode.none, 3, 3, 0, FakeSlice(first), len(first)),
                P(1, ErrorCode.none, 0, 0, 0, None, 0),
                P(2, ErrorCode.offset_out_of_range, 11, 11, 5, None, 0),
            ],
        ),
        fetch_response.TopicData("ünïcode-topic", []),
        fetch_response.TopicData(
            "events",
            [P(4, ErrorCode.none, 11, 11, 10, FakeSlice(second), len(second))],
        ),
    ]


def as_kio(version: int, topics: list[fetch_response.TopicData[FakeSlice]], **top: Any) -> Any:
    """The same response built as kio's entity."""
    return build(
        response_schema(1, version),
        throttle_time=top.get("throttle_time_ms", 0),
        error_code=top.get("error_code", 0),
        session_id=top.get("session_id", 0),
        responses=[
            {
                "topic": t.name,
                "partitions": [
                    {
                        "partition_index": p.index,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": [],
                        "preferred_read_replica": -1,
                        # Kafka writes no records as empty, not null
                        "records": p.records.data if p.records is not None else b"",
                    }
                    for p in t.partitions
                ],
            }
            for t in topics
        ],
    )


def decode(version: int, frame: bytes) -> tuple[int, Any]:
    schema: Any = response_schema(1, version)
    # kio's readers return the value and how many bytes it took.
    header, header_size = entity_reader(schema.__header_schema__)(frame, 4)
    body, body_size = entity_reader(schema)(frame, 4 + header_size)
    left = len(frame) - 4 - header_size - body_size
    assert left == 0, f"{left} bytes left over"
    return int(header.correlation_id), body


@pytest.mark.parametrize("version", VERSIONS)
def test_decodes_with_kio_to_the_same_values(version: int) -> None:
    topics = sample_topics()
    parts, size = fetch_response.encode(version, 4242, topics)
    frame = join(parts)
    assert size == len(frame)
    assert int.from_bytes(frame[:4], "big") == size - 4
    correlation_id, decoded = decode(version, frame)
    assert correlation_id == 4242
    expected = as_kio(version, topics)
    assert decoded.responses == expected.responses
    assert decoded == expected
    (orders, empty, events) = decoded.responses
    assert orders.partitions[0].records == topics[0].partitions[0].records.data  # type: ignore[union-attr]
    assert not orders.partitions[1].records
    assert orders.partitions[2].error_code == ErrorCode.offset_out_of_range
    assert orders.partitions[2].high_watermark == 11
    assert empty.topic == "ünïcode-topic"
    assert events.partitions[0].partition_index == 4


@pytest.mark.parametrize("version", VERSIONS)
def test_bytes_equal_kio_encoding(version: int) -> None:
    topics = sample_topics()
    parts, _ = fetch_response.encode(version, 7, topics, throttle_time_ms=0)
    assert join(parts) == encode_response(7, as_kio(version, topics))


@pytest.mark.parametrize("version", [7, 11, 12])
def test_top_level_error_and_session(version: int) -> None:
    parts, _ = fetch_response.encode(
        version, 1, [], error_code=ErrorCode.fetch_session_id_not_found, session_id=0
    )
    _, decoded = decode(version, join(parts))
    assert decoded.error_code == ErrorCode.fetch_session_id_not_found
    assert decoded.session_id == 0
    assert decoded.responses == ()


def test_slices_pass_through_as_separate_parts() -> None:
    topics = sample_topics()
    parts, _ = fetch_response.encode(12, 1, topics)
    slices = [p for p in parts if isinstance(p, FakeSlice)]
    assert slices == [topics[0].partitions[0].records, topics[2].partitions[0].records]


def test_the_size_prefix_goes_out_with_the_head_after_it() -> None:
    parts, size = fetch_response.encode(12, 1, sample_topics())
    first = parts[0]
    assert isinstance(first, bytes)
    assert len(first) > 4  # not a send of its own
    assert int.from_bytes(first[:4], "big") == size - 4


def test_versions_outside_the_range_are_refused() -> None:
    for version in (-1, fetch_response.MAX_VERSION + 1):
        with pytest.raises(ValueError):
            fetch_response.encode(version, 1, [])


@given(
    version=st.sampled_from(VERSIONS),
    partitions=st.lists(
        st.tuples(
            st.integers(0, 1000),
            st.integers(0, 2**40),
            st.binary(min_size=0, max_size=200),
        ),
        max_size=4,
    ),
    throttle=st.integers(0, 10_000),
)
def test_round_trip_property(
    version: int, partitions: list[tuple[int, int, bytes]], throttle: int
) -> None:
    P = fetch_response.PartitionData
    topics = [
        fetch_response.TopicData(
            "t",
            [
                P(i, 0, hw, hw, 0, FakeSlice(data) if data else None, len(data))
                for i, hw, data in partitions
            ],
        )
    ]
    parts, size = fetch_response.encode(version, 3, topics, throttle_time_ms=throttle)
    frame = join(parts)
    assert size == len(frame)
    _, decoded = decode(version, frame)
    assert decoded == as_kio(version, topics, throttle_time_ms=throttle)


# -- reading v12 in place (the follower fetcher, the data client) ------------------------------


def kio_frame_with_everything() -> bytes:
    """A Fetch v12 response as kio writes it, with what a follower skips: aborted
    transactions, a preferred replica and tagged fields (diverging epoch, current leader)."""
    first = batch(b"a", b"b") + batch(b"c", base_offset=2)
    response = build(
        response_schema(1, 12),
        throttle_time=5,
        error_code=ErrorCode.none,
        session_id=77,
        responses=[
            {
                "topic": "orders",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": ErrorCode.none,
                        "high_watermark": 3,
                        "last_stable_offset": 1,
                        "log_start_offset": 0,
                        "diverging_epoch": {"epoch": 4, "end_offset": 2},
                        "current_leader": {"leader_id": 2, "leader_epoch": 5},
                        "aborted_transactions": [
                            {"producer_id": 9, "first_offset": 1},
                            {"producer_id": 10, "first_offset": 2},
                        ],
                        "preferred_read_replica": 3,
                        "records": first,
                    },
                    {
                        "partition_index": 1,
                        "error_code": ErrorCode.fenced_leader_epoch,
                        "high_watermark": -1,
                        "last_stable_offset": -1,
                        "log_start_offset": -1,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": None,
                    },
                ],
            },
            {"topic": "ünïcode-topic", "partitions": []},
        ],
    )
    return encode_response(31, response)[4:]


def test_a_v12_answer_reads_as_kio_writes_it() -> None:
    frame = kio_frame_with_everything()
    answer = fetch_response.decode_fetch_v12(frame)
    assert (answer.correlation_id, answer.error_code, answer.session_id) == (
        31,
        ErrorCode.none,
        77,
    )
    orders, other = answer.responses
    assert (orders.topic, other.topic, other.partitions) == ("orders", "ünïcode-topic", [])
    first, second = orders.partitions
    assert (first.partition_index, first.error_code, first.high_watermark) == (0, 0, 3)
    assert (first.last_stable_offset, first.log_start_offset) == (1, 0)
    assert first.aborted_transactions == ((9, 1), (10, 2))
    assert first.records is not None
    assert bytes(first.records) == batch(b"a", b"b") + batch(b"c", base_offset=2)
    assert (second.partition_index, second.error_code, second.records) == (
        1,
        ErrorCode.fenced_leader_epoch,
        None,
    )


def test_a_v12_answer_reads_as_the_broker_writes_it_with_records_as_views_of_the_frame() -> None:
    parts, _ = fetch_response.encode(12, 8, sample_topics(), error_code=0, session_id=0)
    frame = memoryview(join(parts))[4:]
    answer = fetch_response.decode_fetch_v12(frame)
    kio_answer = decode(12, join(parts))[1]
    for ours, theirs in zip(answer.responses, kio_answer.responses, strict=True):
        assert ours.topic == theirs.topic
        for p, q in zip(ours.partitions, theirs.partitions, strict=True):
            assert (p.partition_index, p.error_code, p.high_watermark, p.log_start_offset) == (
                q.partition_index,
                q.error_code,
                q.high_watermark,
                q.log_start_offset,
            )
            assert bytes(p.records or b"") == (q.records or b"")
    records = answer.responses[0].partitions[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame.obj  # not copied


def test_a_cut_or_padded_answer_is_malformed_never_another_error() -> None:
    frame = kio_frame_with_everything()
    for end in range(len(frame)):
        with pytest.raises(MalformedRequest):
            fetch_response.decode_fetch_v12(frame[:end])
    with pytest.raises(MalformedRequest):
        fetch_response.decode_fetch_v12(frame + b"\0")


@given(st.binary(max_size=200))
def test_any_bytes_read_as_an_answer_or_malformed(data: bytes) -> None:
    with contextlib.suppress(MalformedRequest):
        fetch_response.decode_fetch_v12(data)


def test_a_lying_count_is_refused_before_anything_is_allocated() -> None:
    # correlation id, no header tags, throttle, no error, session, then 2**28 topics claimed
    frame = bytes(4) + b"\0" + bytes(4) + bytes(2) + bytes(4) + b"\x80\x80\x80\x80\x01"
    with pytest.raises(MalformedRequest, match="elements claimed"):
        fetch_response.decode_fetch_v12(frame)
