"""ControlledShutdown v0-v3 against bytes laid out by hand from Kafka's message schemas."""

from __future__ import annotations

import pytest

from odradek.protocol.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    MalformedControlledShutdown,
    RemainingPartition,
    decode_request,
    decode_request_body,
    decode_response,
    decode_response_body,
    encode_request,
    encode_request_body,
    encode_response,
    encode_response_body,
    request_header_version,
    response_header_version,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import RequestHeader

CORRELATION = bytes.fromhex("0000002a")  # 42
CLIENT_ID = bytes.fromhex("0002") + b"b3"  # a non-compact string in every header version
BROKER_ID = bytes.fromhex("00000003")
BROKER_EPOCH = bytes.fromhex("0000000100000005")  # 4294967301
REQUEST = ControlledShutdownRequest(3, 4294967301)

REQUEST_FRAMES = {
    # v0's header has no client id.
    0: bytes.fromhex("00070000") + CORRELATION + BROKER_ID,
    1: bytes.fromhex("00070001") + CORRELATION + CLIENT_ID + BROKER_ID,
    2: bytes.fromhex("00070002") + CORRELATION + CLIENT_ID + BROKER_ID + BROKER_EPOCH,
    # Header v2: client id, then no tagged fields; the body closes with no tagged fields.
    3: bytes.fromhex("00070003")
    + CORRELATION
    + CLIENT_ID
    + b"\0"
    + BROKER_ID
    + BROKER_EPOCH
    + b"\0",
}

RESPONSE = ControlledShutdownResponse(
    ErrorCode.none, (RemainingPartition("t", 0), RemainingPartition("abc", 7))
)
RESPONSE_BODIES = {
    version: bytes.fromhex("0000")  # error code
    + bytes.fromhex("00000002")  # two partitions
    + bytes.fromhex("0001")
    + b"t"
    + bytes.fromhex("00000000")
    + bytes.fromhex("0003")
    + b"abc"
    + bytes.fromhex("00000007")
    for version in (0, 1, 2)
}
RESPONSE_BODIES[3] = (
    bytes.fromhex("0000")
    + bytes.fromhex("03")  # compact array: 2 + 1
    + bytes.fromhex("02")  # compact string: 1 + 1
    + b"t"
    + bytes.fromhex("00000000")
    + b"\0"  # the partition's tagged fields
    + bytes.fromhex("04")
    + b"abc"
    + bytes.fromhex("00000007")
    + b"\0"
    + b"\0"  # the response's tagged fields
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_request_frames(version: int) -> None:
    frame = REQUEST_FRAMES[version]
    encoded = encode_request(version, 42, "b3", REQUEST)
    assert encoded == len(frame).to_bytes(4, "big") + frame
    header, request = decode_request(frame)
    expected_epoch = REQUEST.broker_epoch if version >= 2 else -1  # ignorable: dropped before v2
    assert request == ControlledShutdownRequest(3, expected_epoch)
    assert header == RequestHeader(7, version, 42, None if version == 0 else "b3")


def test_request_bodies_round_trip() -> None:
    assert encode_request_body(0, REQUEST) == BROKER_ID
    assert encode_request_body(1, REQUEST) == BROKER_ID
    assert encode_request_body(2, REQUEST) == BROKER_ID + BROKER_EPOCH
    assert encode_request_body(3, REQUEST) == BROKER_ID + BROKER_EPOCH + b"\0"
    for version in (2, 3):
        assert decode_request_body(version, encode_request_body(version, REQUEST)) == REQUEST
    assert decode_request_body(1, BROKER_ID) == ControlledShutdownRequest(3, -1)


def test_unknown_tagged_fields_are_skipped() -> None:
    tags = bytes.fromhex("010502aabb")  # one field: tag 5, two bytes
    frame = bytes.fromhex("00070003") + CORRELATION + CLIENT_ID + tags + BROKER_ID
    frame += BROKER_EPOCH + tags
    assert decode_request(frame)[1] == REQUEST


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_response_frames(version: int) -> None:
    body = RESPONSE_BODIES[version]
    assert encode_response_body(version, RESPONSE) == body
    assert decode_response_body(version, body) == RESPONSE
    header = CORRELATION + (b"\0" if version == 3 else b"")
    frame = encode_response(version, 42, RESPONSE)
    assert frame == (len(header) + len(body)).to_bytes(4, "big") + header + body
    assert decode_response(version, frame[4:]) == (42, RESPONSE)


def test_an_error_with_no_partitions() -> None:
    response = ControlledShutdownResponse(ErrorCode.stale_broker_epoch)
    # Error 77, then an empty array: int32 0 before v3, compact length 0 + 1 and no tags in v3.
    assert encode_response_body(0, response) == bytes.fromhex("004d00000000")
    assert encode_response_body(3, response) == bytes.fromhex("004d0100")
    assert decode_response_body(3, bytes.fromhex("004d0100")) == response


def test_header_versions() -> None:
    assert [request_header_version(v) for v in range(4)] == [0, 1, 1, 2]
    assert [response_header_version(v) for v in range(4)] == [0, 0, 0, 1]


@pytest.mark.parametrize(
    ("frame", "complaint"),
    [
        (REQUEST_FRAMES[2][:-3], "runs past the frame"),
        (bytes.fromhex("00080001") + CORRELATION + CLIENT_ID + BROKER_ID, "API key 8"),
        (bytes.fromhex("00070004") + CORRELATION + CLIENT_ID + BROKER_ID, "version 4"),
    ],
)
def test_malformed_requests_are_refused(frame: bytes, complaint: str) -> None:
    with pytest.raises(MalformedControlledShutdown, match=complaint):
        decode_request(frame)


def test_malformed_responses_are_refused() -> None:
    with pytest.raises(MalformedControlledShutdown, match="null topic name"):
        # no error, one partition, topic name of length -1
        decode_response_body(1, bytes.fromhex("000000000001ffff00000000"))
    with pytest.raises(MalformedControlledShutdown, match="unknown error code"):
        decode_response_body(1, bytes.fromhex("7fff00000000"))
    with pytest.raises(MalformedControlledShutdown, match="runs past"):
        decode_response_body(3, RESPONSE_BODIES[3][:-4])
