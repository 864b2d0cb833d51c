"""Bad input gets Kafka's answer — an error code, or the connection closed — and nothing else.

Every test also checks that the broker keeps serving: a connection opened before the bad input
still gets answers, and a fresh connection can produce and fetch. Refused batches must leave the
log as it was: the high watermark unchanged and the earlier records readable.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import crc32c
import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import RequestHeader, build, encode_request, request_schema
from odradek.testing import RunningBroker, running_broker

from .conftest import (
    API_VERSIONS,
    FETCH,
    FETCH_VERSION,
    METADATA,
    PRODUCE,
    KafkaConnection,
    assert_broker_serves,
    batch_of,
    decode_exactly,
    unique_topic,
    values_of,
)

REQUEST_MAX_BYTES = 2048
MESSAGE_MAX_BYTES = 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("bad-input"),
        socket_request_max_bytes=str(REQUEST_MAX_BYTES),
        message_max_bytes=str(MESSAGE_MAX_BYTES),
    ) as b:
        yield b


@pytest.fixture
def bystander(broker: RunningBroker) -> Iterator[KafkaConnection]:
    """A connection opened (and used once) before the bad input arrives."""
    with KafkaConnection(broker.bootstrap) as connection:
        connection.request(METADATA, 9, topics=[], allow_auto_topic_creation=False)
        yield connection


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as connection:
        yield connection


@pytest.fixture
def seeded(client: KafkaConnection) -> str:
    """A topic holding three records at offsets 0..2."""
    topic = unique_topic("seeded")
    client.create_topic(topic)
    response = client.produce(topic, 0, batch_of(b"a", b"b", b"c"))
    assert response.error_code == ErrorCode.none
    return topic


def assert_log_intact(client: KafkaConnection, topic: str) -> None:
    assert client.latest_offset(topic, 0) == 3
    assert [r.value for r in client.read_all(topic, 0)] == [b"a", b"b", b"c"]


def header_bytes(api_key: int, version: int, correlation_id: int = 7) -> bytes:
    """A v1 request header (non-flexible): key, version, correlation id, client id."""
    client_id = b"bad-input"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def rewrite_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


# -- framing ---------------------------------------------------------------------------------------


def test_frame_over_socket_request_max_bytes_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    size = REQUEST_MAX_BYTES + 1
    client.send_raw(struct.pack(">i", size) + header_bytes(API_VERSIONS, 0) + b"\0" * 64)
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


def test_frame_at_socket_request_max_bytes_is_read(
    broker: RunningBroker, client: KafkaConnection
) -> None:
    """The limit is inclusive: a request of exactly the limit is served."""
    topic = unique_topic()
    client.create_topic(topic)
    batch = batch_of(b"x" * 100)
    frame = encode_request(
        RequestHeader(PRODUCE, 9, 99, "c"),
        build(
            request_schema(PRODUCE, 9),
            acks=1,
            timeout=1000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        ),
    )
    # Pad the client id so the whole frame is exactly the limit.
    pad = REQUEST_MAX_BYTES - (len(frame) - 4)
    frame = encode_request(
        RequestHeader(PRODUCE, 9, 99, "c" * (1 + pad)),
        build(
            request_schema(PRODUCE, 9),
            acks=1,
            timeout=1000,
            topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        ),
    )
    assert len(frame) - 4 == REQUEST_MAX_BYTES
    client.send_raw(frame)
    response = client.receive(PRODUCE, 9, 99)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_negative_length_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    client.send_raw(struct.pack(">i", -1) + header_bytes(API_VERSIONS, 0))
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


def test_http_request_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    client.send_raw(b"GET / HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n")
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


def test_half_sent_frame_then_client_closes(
    broker: RunningBroker, bystander: KafkaConnection
) -> None:
    frame = encode_request(
        RequestHeader(METADATA, 9, 5, "half"),
        build(request_schema(METADATA, 9), topics=[{"name": "whatever"}]),
    )
    with KafkaConnection(broker.bootstrap) as client:
        client.send_raw(frame[: len(frame) // 2])
    assert_broker_serves(broker, bystander)


def test_half_sent_frame_left_hanging_blocks_nobody(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    frame = encode_request(
        RequestHeader(API_VERSIONS, 0, 5, "hanging"), build(request_schema(API_VERSIONS, 0))
    )
    client.send_raw(frame[:7])
    assert_broker_serves(broker, bystander)
    assert not client.has_data(0), "the broker answered half a request"
    # The broker was simply waiting for the rest: finishing the frame gets the answer.
    client.send_raw(frame[7:])
    response = client.receive(API_VERSIONS, 0, 5)
    assert response.error_code == ErrorCode.none


def test_too_short_for_a_header_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    client.send_raw(framed(b"\0\x12\0"))
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


# -- headers ---------------------------------------------------------------------------------------


def test_unknown_api_key_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    client.send_raw(framed(header_bytes(9999, 0) + b"\0" * 8))
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


@pytest.mark.parametrize("version", [-1, 12, 32767])
def test_unsupported_produce_version_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, version: int
) -> None:
    # Below v0 and above v11, as Kafka 3.9: the body does not matter, the header decides.
    client.send_raw(framed(header_bytes(PRODUCE, version) + struct.pack(">hii", 1, 1000, 0)))
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


@pytest.mark.parametrize("version", [6, 127])
def test_unsupported_api_versions_version_answers_v0(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, version: int
) -> None:
    """KIP-511: a too-new ApiVersions gets a v0 response with UNSUPPORTED_VERSION and the list."""
    # A flexible (v2) header, as a newer client would send, with some body after it.
    client.send_raw(framed(header_bytes(API_VERSIONS, version, 41) + b"\0" + b"\x02x\x021\0"))
    response = decode_exactly(API_VERSIONS, 0, client.read_frame(), 41)
    assert response.error_code == ErrorCode.unsupported_version
    assert int(ErrorCode.unsupported_version) == 35
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[API_VERSIONS] == (0, 5)
    assert keys[PRODUCE][0] == 0
    assert FETCH in keys
    # The client retries with a version it finds in the list, on the same connection.
    retried = client.request(API_VERSIONS, 3, client_software_name="x", client_software_version="1")
    assert retried.error_code == ErrorCode.none
    assert {k.api_key for k in retried.api_keys} == set(keys)
    assert_broker_serves(broker, bystander)


def test_garbage_body_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    """A well-framed Produce whose body is not a Produce request."""
    # transactional_id claims 1000 bytes; 9 follow.
    body = header_bytes(PRODUCE, 7) + struct.pack(">h", 1000) + b"\xde\xad\xbe\xef" * 2 + b"!"
    client.send_raw(framed(body))
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


def test_truncated_flexible_body_closes(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    frame = encode_request(
        RequestHeader(FETCH, FETCH_VERSION, 3, "cut"),
        build(
            request_schema(FETCH, FETCH_VERSION),
            client.fetch_request_fields([("some-topic", 0, 0)]),
        ),
    )
    body = frame[4:-6]
    client.send_raw(framed(body))
    client.assert_closed_by_broker()
    assert_broker_serves(broker, bystander)


# -- record batches --------------------------------------------------------------------------------


def test_wrong_crc_is_corrupt_message(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    batch = bytearray(batch_of(b"d", b"e"))
    batch[-1] ^= 0xFF  # a bit flipped in the last record
    response = client.produce(seeded, 0, bytes(batch))
    assert response.error_code == ErrorCode.corrupt_message
    assert response.base_offset == -1
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


def test_batch_over_max_message_bytes_is_message_too_large(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    batch = batch_of(b"x" * (MESSAGE_MAX_BYTES + 10))
    assert MESSAGE_MAX_BYTES < len(batch) < REQUEST_MAX_BYTES - 200
    response = client.produce(seeded, 0, batch)
    assert response.error_code == ErrorCode.message_too_large
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


def test_topic_max_message_bytes_applies(broker: RunningBroker, client: KafkaConnection) -> None:
    topic = unique_topic()
    client.create_topic(topic, **{"max.message.bytes": "200"})
    assert client.produce(topic, 0, batch_of(b"y" * 300)).error_code == ErrorCode.message_too_large
    assert client.produce(topic, 0, batch_of(b"y" * 50)).error_code == ErrorCode.none
    assert client.latest_offset(topic, 0) == 1


def test_inconsistent_record_count_is_invalid_record(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    batch = bytearray(batch_of(b"d", b"e"))
    struct.pack_into(">i", batch, 57, 5)  # recordCount 5, lastOffsetDelta still 1
    response = client.produce(seeded, 0, rewrite_crc(batch))
    assert response.error_code == ErrorCode.invalid_record
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


def test_magic_1_batch_is_invalid_record(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    batch = bytearray(batch_of(b"d"))
    batch[16] = 1
    response = client.produce(seeded, 0, rewrite_crc(batch))
    assert response.error_code == ErrorCode.invalid_record
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


def test_one_bad_batch_refuses_the_whole_record_set(
    broker: RunningBroker, client: KafkaConnection, seeded: str
) -> None:
    bad = bytearray(batch_of(b"e"))
    bad[-1] ^= 1
    response = client.produce(seeded, 0, batch_of(b"d") + bytes(bad))
    assert response.error_code == ErrorCode.corrupt_message
    assert_log_intact(client, seeded)


def test_batch_cut_short_is_corrupt_message(
    broker: RunningBroker, client: KafkaConnection, seeded: str
) -> None:
    batch = batch_of(b"d", b"e")
    response = client.produce(seeded, 0, batch[:-3])
    assert response.error_code == ErrorCode.corrupt_message
    assert_log_intact(client, seeded)


def test_acks_2_is_invalid_required_acks(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    response = client.produce(seeded, 0, batch_of(b"d"), acks=2)
    assert response.error_code == ErrorCode.invalid_required_acks
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


# -- fetch -----------------------------------------------------------------------------------------


def test_fetch_past_the_end_is_offset_out_of_range(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    response = client.fetch(seeded, 0, 4, max_wait_ms=5000, min_bytes=1)
    assert response.error_code == ErrorCode.offset_out_of_range
    assert response.high_watermark == 3
    assert not response.records
    # Fetching exactly at the end is not out of range: it is an empty read.
    at_end = client.fetch(seeded, 0, 3)
    assert at_end.error_code == ErrorCode.none
    assert not at_end.records
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


def test_fetch_negative_offset_is_offset_out_of_range(
    broker: RunningBroker, client: KafkaConnection, seeded: str
) -> None:
    response = client.fetch(seeded, 0, -5)
    assert response.error_code == ErrorCode.offset_out_of_range
    assert response.high_watermark == 3


# -- unknown topics and partitions -----------------------------------------------------------------


def test_produce_to_unknown_topic(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection
) -> None:
    topic = unique_topic("nowhere")
    response = client.produce(topic, 0, batch_of(b"lost"))
    assert response.error_code == ErrorCode.unknown_topic_or_partition
    metadata = client.request(
        METADATA, 9, topics=[{"name": topic}], allow_auto_topic_creation=False
    )
    assert metadata.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert_broker_serves(broker, bystander)


def test_produce_to_unknown_partition(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    response = client.produce(seeded, 1, batch_of(b"lost"))
    assert response.error_code == ErrorCode.unknown_topic_or_partition
    response = client.produce(seeded, -1, batch_of(b"lost"))
    assert response.error_code == ErrorCode.unknown_topic_or_partition
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


def test_fetch_from_unknown_topic_and_partition(
    broker: RunningBroker, bystander: KafkaConnection, client: KafkaConnection, seeded: str
) -> None:
    unknown_topic = client.fetch(unique_topic("nowhere"), 0, 0, max_wait_ms=5000, min_bytes=1)
    assert unknown_topic.error_code == ErrorCode.unknown_topic_or_partition
    unknown_partition = client.fetch(seeded, 7, 0, max_wait_ms=5000, min_bytes=1)
    assert unknown_partition.error_code == ErrorCode.unknown_topic_or_partition
    assert_log_intact(client, seeded)
    assert_broker_serves(broker, bystander)


def test_fetch_mixing_known_and_unknown_partitions(
    broker: RunningBroker, client: KafkaConnection, seeded: str
) -> None:
    response = client.request(
        FETCH,
        FETCH_VERSION,
        **client.fetch_request_fields([(seeded, 0, 0), (seeded, 3, 0)]),
    )
    (topic,) = response.responses
    by_index = {p.partition_index: p for p in topic.partitions}
    assert by_index[0].error_code == ErrorCode.none
    assert values_of(by_index[0].records) == [b"a", b"b", b"c"]
    assert by_index[3].error_code == ErrorCode.unknown_topic_or_partition


def test_error_codes_are_kafkas_numbers() -> None:
    expected = {
        ErrorCode.offset_out_of_range: 1,
        ErrorCode.corrupt_message: 2,
        ErrorCode.unknown_topic_or_partition: 3,
        ErrorCode.message_too_large: 10,
        ErrorCode.invalid_required_acks: 21,
        ErrorCode.unsupported_version: 35,
        ErrorCode.invalid_record: 87,
    }
    assert {code: int(code) for code in expected} == expected
