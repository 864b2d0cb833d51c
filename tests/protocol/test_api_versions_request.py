"""ApiVersions requests: v5 (KIP-1242's cluster and node ids) read by hand, earlier versions by
kio, every truncation refused."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol.api_versions_request import (
    NO_NODE,
    ApiVersionsRequest,
    decode_api_versions_request,
)
from odradek.protocol.messages import (
    MalformedRequest,
    RequestHeader,
    build,
    encode_request,
    request_schema,
)


def _compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    assert len(data) < 127  # a one-byte unsigned varint
    return bytes([len(data) + 1]) + data


def v5_frame(
    correlation_id: int,
    cluster_id: str | None = None,
    node_id: int = NO_NODE,
    client_id: str = "tests",
    software: tuple[str | None, str | None] = ("odradek-tests", "1.0"),
    tagged: bytes = b"\x00",
) -> bytes:
    """An ApiVersions v5 request frame as Kafka 4.4's client writes it, without its length
    prefix."""
    name = client_id.encode()
    return (
        struct.pack(">hhih", 18, 5, correlation_id, len(name))
        + name
        + b"\x00"
        + _compact(software[0])
        + _compact(software[1])
        + _compact(cluster_id)
        + struct.pack(">i", node_id)
        + tagged
    )


def test_v5_carries_the_cluster_and_node_the_client_expects() -> None:
    header, request = decode_api_versions_request(v5_frame(7, "a-cluster", 2))
    assert header == RequestHeader(18, 5, 7, "tests")
    assert request == ApiVersionsRequest("odradek-tests", "1.0", "a-cluster", 2)


def test_v5_without_expectations_and_with_unknown_tagged_fields() -> None:
    # One tagged field (tag 9, 2 bytes) in the body's section: skipped, as Kafka skips it.
    _, request = decode_api_versions_request(v5_frame(1, tagged=b"\x01\x09\x02ab"))
    assert (request.cluster_id, request.node_id) == (None, NO_NODE)


@pytest.mark.parametrize("version", [0, 3, 4])
def test_earlier_versions_are_read_by_kio(version: int) -> None:
    fields = {"client_software_name": "c", "client_software_version": "2"}
    frame = encode_request(
        RequestHeader(18, version, 5, "x"), build(request_schema(18, version), fields)
    )
    header, request = decode_api_versions_request(memoryview(frame)[4:])
    assert header == RequestHeader(18, version, 5, "x")
    expected = ("c", "2") if version >= 3 else ("", "")
    assert (request.client_software_name, request.client_software_version) == expected
    assert (request.cluster_id, request.node_id) == (None, NO_NODE)


def test_every_truncation_of_v5_is_refused() -> None:
    frame = v5_frame(3, "a-cluster", 1)
    for end in range(8, len(frame)):
        with pytest.raises(MalformedRequest):
            decode_api_versions_request(frame[:end])


def test_a_null_software_name_is_refused() -> None:
    with pytest.raises(MalformedRequest):
        decode_api_versions_request(v5_frame(3, software=(None, "1.0")))
