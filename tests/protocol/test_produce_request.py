"""The hand-written Produce request reader agrees with kio's encoder and decoder, every version."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.bounds import MalformedRequest
from odradek.protocol.messages import (
    RequestHeader,
    build,
    decode_request,
    encode_request,
    request_schema,
)
from odradek.protocol.produce_request import (
    FIRST_RECORD_BATCH_VERSION,
    MAX_VERSION,
    MIN_VERSION,
    decode_produce_request,
    peek_acks,
)
from odradek.protocol.records import encode_batch

# kio has Kafka 4's versions; v0-v2 are checked against kafka-python in test_old_produce_request.py
VERSIONS = range(FIRST_RECORD_BATCH_VERSION, MAX_VERSION + 1)


def batch(*values: bytes) -> bytes:
    return encode_batch([(None, v, (), None) for v in values], now_ms=1_700_000_000_000)


def frame_of(
    version: int,
    topics: list[tuple[str, list[tuple[int, bytes | None]]]],
    *,
    client_id: str | None = "producer-1",
    transactional_id: str | None = None,
    acks: int = -1,
) -> bytes:
    """A Produce request frame as kio writes it, without the length prefix."""
    request = build(
        request_schema(0, version),
        transactional_id=transactional_id,
        acks=acks,
        timeout=30_000,
        topic_data=[
            {"name": name, "partition_data": [{"index": i, "records": r} for i, r in parts]}
            for name, parts in topics
        ],
    )
    return encode_request(RequestHeader(0, version, 42, client_id), request)[4:]


def as_kio_sees_it(frame: bytes) -> tuple[RequestHeader, list[tuple[str, list[tuple[int, Any]]]]]:
    header, request = decode_request(frame)
    topics = [
        (t.name, [(int(p.index), p.records) for p in t.partition_data])
        for t in request.topic_data  # type: ignore[attr-defined]
    ]
    return header, topics


def as_read_here(frame: bytes | bytearray) -> tuple[RequestHeader, list[Any], Any]:
    header, request = decode_produce_request(frame)
    topics = [
        (
            t.name,
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data],
        )
        for t in request.topic_data
    ]
    return header, topics, request


SAMPLE: list[tuple[str, list[tuple[int, bytes | None]]]] = [
    ("orders", [(0, batch(b"a", b"b") + batch(b"c")), (3, None), (7, b"")]),
    ("ünïcode-topic", [(1, batch(b"x" * 300))]),
    ("empty", []),
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("client_id", ["producer-1", None])
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_agrees_with_kio(version: int, client_id: str | None, transactional_id: str | None) -> None:
    frame = frame_of(version, SAMPLE, client_id=client_id, transactional_id=transactional_id)
    header, topics, request = as_read_here(frame)
    kio_header, kio_topics = as_kio_sees_it(frame)
    assert header == kio_header == RequestHeader(0, version, 42, client_id)
    assert topics == kio_topics
    assert request.acks == -1
    assert request.timeout_ms == 30_000
    assert request.transactional_id == transactional_id


@settings(max_examples=60)
@given(
    version=st.sampled_from(list(VERSIONS)),
    topics=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=20),
            st.lists(
                st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.binary(max_size=300))),
                max_size=4,
            ),
        ),
        max_size=4,
    ),
    acks=st.sampled_from([-1, 0, 1]),
)
def test_agrees_with_kio_on_any_request(
    version: int, topics: list[tuple[str, list[tuple[int, bytes | None]]]], acks: int
) -> None:
    frame = frame_of(version, topics, acks=acks)
    header, read_topics, request = as_read_here(frame)
    assert (header, read_topics) == as_kio_sees_it(frame)
    assert request.acks == acks


@pytest.mark.parametrize("version", [FIRST_RECORD_BATCH_VERSION, 9, MAX_VERSION])
def test_records_are_writable_views_of_a_writable_frame(version: int) -> None:
    frame = bytearray(frame_of(version, [("t", [(0, batch(b"v"))])]))
    _, request = decode_produce_request(memoryview(frame))
    records = request.topic_data[0].partition_data[0].records
    assert records is not None and not records.readonly
    records[0:8] = (1234).to_bytes(8, "big")
    _, again = decode_produce_request(frame)
    again_records = again.topic_data[0].partition_data[0].records
    assert again_records is not None
    assert int.from_bytes(again_records[0:8], "big") == 1234


def test_records_of_a_bytes_frame_are_read_only() -> None:
    _, request = decode_produce_request(frame_of(9, [("t", [(0, batch(b"v"))])]))
    records = request.topic_data[0].partition_data[0].records
    assert records is not None and records.readonly


@pytest.mark.parametrize("version", [FIRST_RECORD_BATCH_VERSION, 8, 9, MAX_VERSION])
def test_every_truncation_is_refused(version: int) -> None:
    frame = frame_of(version, [("t", [(0, batch(b"v")), (1, None)])], transactional_id="tx")
    for cut in range(len(frame)):
        with pytest.raises(MalformedRequest):
            decode_produce_request(frame[:cut])


def test_unknown_tagged_fields_are_skipped() -> None:
    frame = bytearray(frame_of(9, [("t", [(0, b"records")])]))
    # The request-level tagged fields are the frame's last byte (a count of zero); replace
    # them with one unknown field (tag 5) of three bytes.
    assert frame[-1] == 0
    frame[-1:] = bytes([1, 5, 3]) + b"xyz"
    _, topics, _ = as_read_here(frame)
    assert topics == [("t", [(0, b"records")])]


@pytest.mark.parametrize(
    ("api_key", "version"), [(1, 9), (0, MIN_VERSION - 1), (0, MAX_VERSION + 1)]
)
def test_other_requests_are_refused(api_key: int, version: int) -> None:
    frame = frame_of(9, [("t", [(0, b"r")])])
    frame = api_key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True) + frame[4:]
    with pytest.raises(MalformedRequest):
        decode_produce_request(frame)


def test_a_negative_array_length_is_refused() -> None:
    frame = bytearray(frame_of(3, [("t", [(0, b"r")])]))
    # v3: header (8 + 2 + len("producer-1")), transactional id (2), acks (2), timeout (4).
    topics_at = 8 + 2 + len("producer-1") + 2 + 2 + 4
    frame[topics_at : topics_at + 4] = (-1).to_bytes(4, "big", signed=True)
    with pytest.raises(MalformedRequest):
        decode_produce_request(frame)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("acks", [-1, 0, 1])
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_acks_are_read_without_the_rest(
    version: int, acks: int, transactional_id: str | None
) -> None:
    frame = frame_of(version, SAMPLE, acks=acks, transactional_id=transactional_id)
    assert peek_acks(frame) == acks
    for cut in range(12):
        assert peek_acks(frame[:cut]) is None  # ends inside the header
