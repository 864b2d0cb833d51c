"""The sans-I/O client core fed bytes: no sockets, no broker."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client.core import (
    API_VERSIONS,
    FETCH,
    METADATA,
    PRODUCE,
    ClientCore,
    ClientError,
    ConnectionFailed,
    ProtocolError,
    Response,
    produce_acks,
    request_frame,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import (
    build,
    decode_request,
    encode_response,
    response_schema,
)

from .conftest import METADATA_FIELDS


def metadata_response(correlation_id: int, version: int = 12, port: int = 9092) -> bytes:
    """A whole Metadata response frame, size prefix included."""
    body = build(
        response_schema(METADATA, version),
        brokers=[{"node_id": 1, "host": "h", "port": port, "rack": None}],
        topics=[],
        cluster_id="c",
        controller_id=1,
    )
    return encode_response(correlation_id, body)


def versions_response(correlation_id: int, versions: dict[int, tuple[int, int]]) -> bytes:
    body = build(
        response_schema(API_VERSIONS, 3),
        error_code=ErrorCode.none,
        api_keys=[
            {"api_key": k, "min_version": low, "max_version": high}
            for k, (low, high) in versions.items()
        ],
    )
    return encode_response(correlation_id, body)


def produce_fields(acks: int, transactional_id: str | None = None) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b""}]}],
    }


def events(core: ClientCore) -> list[Response]:
    return list(core.events())


def test_a_request_frame_is_what_kio_reads_back() -> None:
    core = ClientCore("me", first_correlation_id=41)
    request, data = core.send(METADATA, METADATA_FIELDS, version=12)
    assert (request.correlation_id, request.api_key, request.version) == (41, METADATA, 12)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    header, body = decode_request(data[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (METADATA, 12, 41)
    assert header.client_id == "me"
    assert body.topics is None
    assert core.in_flight == 1


@given(cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=8))
def test_responses_cut_anywhere_come_out_whole(cuts: list[int]) -> None:
    core = ClientCore()
    requests = [core.send(METADATA, METADATA_FIELDS, version=12)[0] for _ in range(3)]
    stream = b"".join(metadata_response(r.correlation_id, port=i) for i, r in enumerate(requests))
    got: list[Response] = []
    start = 0
    for cut in [*sorted({min(c, len(stream)) for c in cuts}), len(stream)]:
        core.receive_data(stream[start:cut])
        got += events(core)
        start = cut
    assert [r.request for r in got] == requests
    assert [r.body.brokers[0].port for r in got] == [0, 1, 2]


def test_a_response_split_at_every_position() -> None:
    frame = metadata_response(1)
    for cut in range(len(frame) + 1):
        core = ClientCore()
        request, _ = core.send(METADATA, METADATA_FIELDS, version=12)
        core.receive_data(frame[:cut])
        early = events(core)
        core.receive_data(frame[cut:])
        late = events(core)
        assert [r.request for r in early + late] == [request], cut
        assert bool(early) == (cut == len(frame))


def test_a_response_fed_one_byte_at_a_time() -> None:
    core = ClientCore()
    request, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    for byte in metadata_response(request.correlation_id):
        assert core.next_event() is None
        core.receive_data(bytes([byte]))
    (response,) = events(core)
    assert response.request == request and not core.buffered


@pytest.mark.parametrize("size", [10, 64 << 10, (64 << 10) + 1, 3 << 20])
@pytest.mark.parametrize("piece", [1000, 65536, 1 << 20])
def test_large_and_small_frames_in_any_pieces(size: int, piece: int) -> None:
    """Frames past the small-frame limit get a buffer of their own; the ones around them
    still come out right."""
    core = ClientCore()
    requests = [core.send(FETCH, {}, version=12, raw=True)[0] for _ in range(3)]
    bodies = [bytes([i]) * size for i in range(3)]
    stream = b"".join(
        (len(b) + 4).to_bytes(4, "big") + r.correlation_id.to_bytes(4, "big") + b
        for r, b in zip(requests, bodies, strict=True)
    )
    got = []
    for start in range(0, len(stream), piece):
        core.receive_data(stream[start : start + piece])
        got += events(core)
    assert [bytes(r.frame[4:]) for r in got] == bodies
    assert all(r.body is None for r in got)


def test_the_buffer_interface_reads_in_place() -> None:
    """get_buffer / buffer_updated, as asyncio's BufferedProtocol and recv_into use them."""
    core = ClientCore()
    request, _ = core.send(FETCH, {}, version=12, raw=True)
    body = b"x" * (1 << 20)
    stream = (len(body) + 4).to_bytes(4, "big") + request.correlation_id.to_bytes(4, "big") + body
    position = 0
    while position < len(stream):
        buffer = core.get_buffer(-1)
        n = min(len(buffer), len(stream) - position, 100_000)
        buffer[:n] = stream[position : position + n]
        buffer.release()
        core.buffer_updated(n)
        position += n
    (response,) = events(core)
    assert bytes(response.frame[4:]) == body
    assert isinstance(response.frame, memoryview) and response.frame.readonly


def test_pipelined_responses_in_one_read() -> None:
    core = ClientCore()
    requests = [core.send(METADATA, METADATA_FIELDS, version=12)[0] for _ in range(50)]
    core.receive_data(b"".join(metadata_response(r.correlation_id) for r in requests))
    assert [r.request for r in events(core)] == requests
    assert core.in_flight == 0


def test_an_unknown_correlation_id_is_a_protocol_error() -> None:
    core = ClientCore()
    request, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    core.receive_data(metadata_response(request.correlation_id + 100))
    with pytest.raises(ProtocolError, match="unknown correlation id"):
        core.next_event()
    assert core.closed
    with pytest.raises(ProtocolError):
        core.send(METADATA, METADATA_FIELDS, version=12)
    assert core.close() == [request]


def test_an_answer_to_nothing_is_a_protocol_error() -> None:
    core = ClientCore()
    core.receive_data(metadata_response(7))
    with pytest.raises(ProtocolError, match="to no request"):
        core.next_event()


def test_an_out_of_order_response_is_a_protocol_error() -> None:
    core = ClientCore()
    first, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    second, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    core.receive_data(metadata_response(second.correlation_id))
    with pytest.raises(ProtocolError, match="out of order"):
        core.next_event()
    assert core.close() == [first, second]


@pytest.mark.parametrize("size", [-1, 0, 3])
def test_a_bad_frame_size_is_a_protocol_error(size: int) -> None:
    core = ClientCore()
    with pytest.raises(ProtocolError, match=f"frame of {size} bytes"):
        core.receive_data(size.to_bytes(4, "big", signed=True) + b"\0" * 8)


def test_a_frame_over_the_limit_is_a_protocol_error() -> None:
    core = ClientCore(max_frame_bytes=1000)
    with pytest.raises(ProtocolError, match="1001"):
        core.receive_data((1001).to_bytes(4, "big"))


def test_an_undecodable_response_is_a_protocol_error() -> None:
    core = ClientCore()
    request, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    core.receive_data(
        (8).to_bytes(4, "big") + request.correlation_id.to_bytes(4, "big") + b"\xff" * 4
    )
    with pytest.raises(ProtocolError, match="cannot decode"):
        core.next_event()


def test_an_abandoned_request_is_answered_silently() -> None:
    core = ClientCore()
    dropped, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    kept, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    core.abandon(dropped)
    assert core.requests_in_flight() == (kept,)
    core.receive_data(metadata_response(dropped.correlation_id))
    assert core.next_event() is None
    core.receive_data(metadata_response(kept.correlation_id))
    assert [r.request for r in events(core)] == [kept]


def test_expected_answers_to_bytes_sent_elsewhere() -> None:
    core = ClientCore()
    sent, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    outside = core.expect(METADATA, 12, 5000)
    core.receive_data(metadata_response(sent.correlation_id) + metadata_response(5000))
    first, second = events(core)
    assert first.request == sent and first.body is not None
    assert second.request == outside and second.body is None  # raw, checked by the caller


def test_next_frame_hands_out_frames_unmatched() -> None:
    core = ClientCore()
    core.receive_data(metadata_response(77) + metadata_response(78)[:5])
    frame = core.next_frame()
    assert frame is not None and int.from_bytes(bytes(frame[:4]), "big") == 77
    assert core.next_frame() is None and core.buffered


# -- acks=0 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(3, 14))
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("transactional_id", [None, "", "txn"])
@pytest.mark.parametrize("client_id", [None, "c" * 300])
def test_produce_acks_are_read_from_any_frame(
    version: int, acks: int, transactional_id: str | None, client_id: str | None
) -> None:
    frame = request_frame(
        PRODUCE, version, produce_fields(acks, transactional_id), client_id=client_id
    )
    assert produce_acks(frame) == acks


def test_acks_0_has_no_response() -> None:
    core = ClientCore()
    silent, _ = core.send(PRODUCE, produce_fields(acks=0), version=9)
    assert not silent.expects_response and core.in_flight == 0
    answered, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    assert core.in_flight == 1
    core.receive_data(metadata_response(answered.correlation_id))
    assert [r.request for r in events(core)] == [answered]


def test_acks_0_in_a_prebuilt_frame_has_no_response() -> None:
    core = ClientCore()
    frame = bytearray(request_frame(PRODUCE, 9, produce_fields(acks=0)))
    silent, _ = core.send_frame(frame)
    assert not silent.expects_response and core.in_flight == 0
    acked, _data = core.send_frame(bytearray(request_frame(PRODUCE, 9, produce_fields(acks=1))))
    assert acked.expects_response and core.in_flight == 1
    assert acked.correlation_id == silent.correlation_id + 1


def test_send_frame_renumbers_a_frame_in_place() -> None:
    core = ClientCore(first_correlation_id=10)
    frame = bytearray(request_frame(METADATA, 12, METADATA_FIELDS, correlation_id=999))
    ids = []
    for _ in range(3):
        request, data = core.send_frame(frame)
        header, _ = decode_request(data[4:])
        ids.append((request.correlation_id, header.correlation_id))
    assert ids == [(10, 10), (11, 11), (12, 12)]
    assert int.from_bytes(frame[8:12], "big") == 12
    with pytest.raises(ValueError, match="size prefix"):
        core.send_frame(b"\0\0\0\x09" + bytes(9))


def test_correlation_ids_wrap_to_zero() -> None:
    core = ClientCore(first_correlation_id=0x7FFFFFFF)
    first, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    second, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    assert (first.correlation_id, second.correlation_id) == (0x7FFFFFFF, 0)


# -- versions ----------------------------------------------------------------------------------


def negotiated(versions: dict[int, tuple[int, int]], **kwargs: Any) -> ClientCore:
    core = ClientCore(**kwargs)
    request, data = core.versions_request()
    header, body = decode_request(data[4:])
    assert (header.api_key, header.api_version) == (API_VERSIONS, 3)
    assert body.client_software_name == "odradek"
    core.receive_data(versions_response(request.correlation_id, versions))
    (response,) = events(core)
    core.accept_versions(response.body)
    return core


def test_versions_pick_the_highest_both_sides_speak() -> None:
    core = negotiated({PRODUCE: (3, 11), FETCH: (4, 17), METADATA: (0, 12)})
    assert core.broker_versions == {PRODUCE: (3, 11), FETCH: (4, 17), METADATA: (0, 12)}
    assert core.version_for(PRODUCE) == 11  # kio knows 13, the broker 11
    assert core.version_for(FETCH, highest=12) == 12  # the caller's limit
    assert core.version_for(METADATA, highest=9, lowest=1) == 9


def test_the_client_table_narrows_versions() -> None:
    core = negotiated({FETCH: (4, 17)}, client_versions={FETCH: (4, 12)})
    assert core.version_for(FETCH) == 12
    assert core.version_for(FETCH, highest=8) == 8


def test_no_common_version_is_a_client_error() -> None:
    core = negotiated({PRODUCE: (3, 11), METADATA: (0, 12)})
    with pytest.raises(ClientError, match="no common version of API key 0"):
        core.version_for(PRODUCE, highest=2)
    with pytest.raises(ClientError, match="no common version"):
        core.version_for(METADATA, lowest=13)
    with pytest.raises(ClientError, match="does not speak API key 1"):
        core.version_for(FETCH)
    with pytest.raises(ClientError, match="does not speak"):
        core.send(FETCH, {})


def test_versions_before_negotiation_are_unknown() -> None:
    with pytest.raises(ClientError, match="not known yet"):
        ClientCore().version_for(METADATA)


def test_a_failed_api_versions_is_a_client_error() -> None:
    core = ClientCore()
    body = build(response_schema(API_VERSIONS, 3), error_code=ErrorCode.unsupported_version)
    with pytest.raises(ClientError, match="unsupported_version"):
        core.accept_versions(body)


def test_a_closed_core_refuses_requests() -> None:
    core = ClientCore()
    request, _ = core.send(METADATA, METADATA_FIELDS, version=12)
    assert core.close(ConnectionFailed("gone")) == [request]
    with pytest.raises(ConnectionFailed, match="gone"):
        core.send(METADATA, METADATA_FIELDS, version=12)
    with pytest.raises(ConnectionFailed, match="gone"):
        core.get_buffer()
