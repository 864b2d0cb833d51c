"""``build`` makes any version's kio entity from one set of fields; requests and responses survive
an encode/decode round trip through kio."""

from __future__ import annotations

import datetime
import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    RequestHeader,
    UnsupportedRequest,
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    entity_to_dict,
    peek_header,
    request_schema,
    response_schema,
)

FETCH_FIELDS = {
    "replica_id": -1,
    "max_wait": 500,
    "min_bytes": 1,
    "max_bytes": 1 << 20,
    "isolation_level": 1,
    "session_id": 0,
    "session_epoch": -1,
    "rack_id": "rack-a",
    "topics": [
        {
            "topic": "t",
            "partitions": [
                {
                    "partition": 3,
                    "current_leader_epoch": 7,
                    "fetch_offset": 42,
                    "last_fetched_epoch": -1,
                    "log_start_offset": -1,
                    "partition_max_bytes": 1024,
                }
            ],
        }
    ],
    "forgotten_topics_data": [],
}


def test_build_drops_fields_the_version_lacks() -> None:
    old = build(request_schema(1, 4), FETCH_FIELDS)
    assert not hasattr(old, "rack_id")
    assert not hasattr(old, "session_id")
    (partition,) = old.topics[0].partitions
    assert not hasattr(partition, "current_leader_epoch")
    assert not hasattr(partition, "log_start_offset")
    assert partition.fetch_offset == 42

    new = build(request_schema(1, 12), FETCH_FIELDS)
    assert new.rack_id == "rack-a"
    assert new.session_epoch == -1
    (partition,) = new.topics[0].partitions
    assert partition.current_leader_epoch == 7
    assert partition.last_fetched_epoch == -1


def test_build_fills_nested_entities_from_mappings() -> None:
    schema = response_schema(3, 12)
    topic_id = uuid.uuid4()
    response = build(
        schema,
        brokers=[{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        cluster_id="c",
        controller_id=1,
        topics=[
            {
                "error_code": 0,
                "name": "t",
                "topic_id": topic_id,
                "partitions": [
                    {"partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": (1,)}
                ],
            }
        ],
    )
    (topic,) = response.topics
    assert type(topic).__name__ == "MetadataResponseTopic"
    assert topic.topic_id == topic_id
    (partition,) = topic.partitions
    assert type(partition).__name__ == "MetadataResponsePartition"
    assert partition.replica_nodes == (1,)
    assert partition.isr_nodes == (1,)
    # Fields not given: the schema default where there is one, else a zero value.
    assert partition.offline_replicas == ()
    assert partition.error_code == ErrorCode.none
    assert response.brokers[0].host == "h"


def test_build_keeps_entities_given_as_entities() -> None:
    schema = request_schema(3, 9)
    topic_type = type(build(schema, topics=[{"name": "x"}]).topics[0])
    made = topic_type(name="y")
    assert build(schema, topics=[made]).topics[0] is made


def test_build_converts_milliseconds_and_error_codes() -> None:
    fetch = build(request_schema(1, 12), FETCH_FIELDS)
    assert fetch.max_wait == datetime.timedelta(milliseconds=500)
    given_delta = build(request_schema(1, 12), max_wait=datetime.timedelta(seconds=2))
    assert given_delta.max_wait == datetime.timedelta(seconds=2)
    produce = build(request_schema(0, 9), acks=-1, timeout=30_000)
    assert produce.timeout == datetime.timedelta(seconds=30)
    response = build(response_schema(18, 3), error_code=35)
    assert response.error_code is ErrorCode.unsupported_version
    assert response.throttle_time == datetime.timedelta(0)


def test_build_gives_required_fields_zero_values() -> None:
    request = build(request_schema(19, 7))
    assert request.topics == ()
    assert request.timeout == datetime.timedelta(seconds=60)  # the schema's default
    assert request.validate_only is False
    produce = build(request_schema(0, 9))
    assert produce.timeout == datetime.timedelta(0)  # required, no default: zero
    assert produce.acks == 0
    topic = build(type(build(request_schema(19, 7), topics=[{}]).topics[0]))
    assert topic.name == ""
    assert topic.num_partitions == 0


def test_entity_to_dict_is_shallow() -> None:
    request = build(request_schema(3, 9), topics=[{"name": "a"}])
    fields = entity_to_dict(request)
    assert set(fields) >= {"topics", "allow_auto_topic_creation"}
    assert fields["topics"] is request.topics


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_request_round_trip(version: int) -> None:
    request = build(request_schema(1, version), FETCH_FIELDS)
    frame = encode_request(RequestHeader(1, version, 1234, "client-1"), request)
    (length,) = struct.unpack_from(">i", frame)
    assert length == len(frame) - 4
    assert peek_header(frame[4:]) == (1, version, 1234)
    header, decoded = decode_request(frame[4:])
    assert header == RequestHeader(1, version, 1234, "client-1")
    assert decoded == request


@pytest.mark.parametrize(("api_key", "version"), [(0, 3), (0, 11), (18, 0), (18, 4), (3, 12)])
def test_request_round_trip(api_key: int, version: int) -> None:
    request = build(
        request_schema(api_key, version),
        acks=-1,
        timeout=1500,
        transactional_id=None,
        topic_data=[{"name": "t", "partition_data": [{"index": 2, "records": b"\x00" * 70}]}],
        client_software_name="odradek",
        client_software_version="0.1",
        # kio reads the all-zero UUID Kafka writes for "no id" as None
        topics=[{"name": "m", "topic_id": None}],
    )
    frame = encode_request(RequestHeader(api_key, version, 9, None), request)
    header, decoded = decode_request(frame[4:])
    assert header.correlation_id == 9
    assert header.client_id is None
    assert decoded == request


@pytest.mark.parametrize(("api_key", "version"), [(0, 3), (0, 11), (18, 0), (18, 4), (2, 8)])
def test_response_round_trip(api_key: int, version: int) -> None:
    response = build(
        response_schema(api_key, version),
        error_code=0,
        api_keys=[{"api_key": 0, "min_version": 3, "max_version": 11}],
        responses=[
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "error_code": 0, "base_offset": 17, "log_start_offset": 0}
                ],
            }
        ],
        topics=[
            {"name": "t", "partitions": [{"partition_index": 0, "offset": 5, "timestamp": -1}]}
        ],
        throttle_time=0,
    )
    frame = encode_response(77, response)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    correlation_id, decoded = decode_response(response_schema(api_key, version), frame[4:])
    assert correlation_id == 77
    assert decoded == response


def test_unknown_api_or_version_is_unsupported_request() -> None:
    frame = struct.pack(">hhih", 999, 0, 1, -1)
    with pytest.raises(UnsupportedRequest):
        decode_request(frame)
    frame = struct.pack(">hhih", 0, 999, 1, -1)
    with pytest.raises(UnsupportedRequest):
        decode_request(frame)


@given(
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=20),
    names=st.lists(st.text(min_size=1, max_size=30), max_size=5),
    version=st.integers(1, 12),
)
def test_metadata_request_round_trip_property(
    correlation_id: int, client_id: str | None, names: list[str], version: int
) -> None:
    request = build(
        request_schema(3, version),
        topics=[{"name": n, "topic_id": None} for n in names],
        allow_auto_topic_creation=True,
    )
    frame = encode_request(RequestHeader(3, version, correlation_id, client_id), request)
    header, decoded = decode_request(frame[4:])
    assert header == RequestHeader(3, version, correlation_id, client_id)
    assert decoded == request
