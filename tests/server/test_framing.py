"""Request framing over real sockets, however the bytes are cut: a request split across many
reads, many requests in one read, requests larger than a receive buffer, a bad size prefix after
good requests, a client that pipelines far more than the broker reads ahead, and the broker's
queued.max.request.bytes holding reads back."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import RequestHeader, build, encode_request, request_schema
from odradek.protocol.records import encode_batch
from odradek.server import connection_core
from odradek.testing import RunningBroker, running_broker

from .conftest import (
    API_VERSIONS,
    FETCH,
    FETCH_VERSION,
    METADATA,
    PRODUCE,
    PRODUCE_VERSION,
    KafkaConnection,
    assert_broker_serves,
    batch_of,
    decode_exactly,
    now_ms,
    unique_topic,
    values_of,
)

VERSIONS_REQUEST = {"client_software_name": "t", "client_software_version": "1"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("framing"), message_max_bytes=str(4 * 1024 * 1024)
    ) as b:
        yield b


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as connection:
        yield connection


def produce_frame(correlation_id: int, topic: str, records: bytes, acks: int = 1) -> bytes:
    request = build(
        request_schema(PRODUCE, PRODUCE_VERSION),
        acks=acks,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )
    return encode_request(RequestHeader(PRODUCE, PRODUCE_VERSION, correlation_id, "t"), request)


def read_produce_response(client: KafkaConnection, correlation_id: int) -> object:
    response = client.receive(PRODUCE, PRODUCE_VERSION, correlation_id)
    (topic_response,) = response.responses
    (partition_response,) = topic_response.partition_responses
    return partition_response


def big_values(count: int, size: int, seed: int) -> list[bytes]:
    """Values whose every byte depends on its place, so a shifted or overwritten byte shows."""
    return [bytes((seed + i * 7 + j) % 251 for j in range(size)) for i in range(count)]


def test_a_request_split_into_single_bytes(broker: RunningBroker, client: KafkaConnection) -> None:
    topic = unique_topic("split")
    client.create_topic(topic)
    frame = produce_frame(5001, topic, batch_of(b"one", b"byte", b"at a time"))
    for i in range(len(frame)):
        client.send_raw(frame[i : i + 1])
    response = read_produce_response(client, 5001)
    assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
    assert values_of(client.fetch(topic, 0, 0).records) == [b"one", b"byte", b"at a time"]


def test_many_requests_in_one_send_are_answered_in_order(
    broker: RunningBroker, client: KafkaConnection
) -> None:
    topic = unique_topic("burst")
    client.create_topic(topic)
    frames = []
    for i in range(200):
        if i % 3 == 0:
            request = build(request_schema(API_VERSIONS, 3), VERSIONS_REQUEST)
            frames.append(encode_request(RequestHeader(API_VERSIONS, 3, 6000 + i, "t"), request))
        else:
            frames.append(produce_frame(6000 + i, topic, batch_of(f"v{i}".encode())))
    client.send_raw(b"".join(frames))
    expected_offset = 0
    for i in range(200):
        if i % 3 == 0:
            versions = client.receive(API_VERSIONS, 3, 6000 + i)
            assert versions.error_code == ErrorCode.none
        else:
            response = read_produce_response(client, 6000 + i)
            assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
            assert response.base_offset == expected_offset  # type: ignore[attr-defined]
            expected_offset += 1
    values = [r.value for r in client.read_all(topic, 0)]
    assert values == [f"v{i}".encode() for i in range(200) if i % 3]


def test_requests_larger_than_a_receive_buffer_keep_their_bytes(
    broker: RunningBroker, client: KafkaConnection
) -> None:
    topic = unique_topic("large")
    client.create_topic(topic)
    sizes = [3 * connection_core.MAX_BUFFER, 100, connection_core.MIN_BUFFER + 1]
    frames, expected = [], []
    for n, size in enumerate(sizes * 2):
        values = big_values(max(1, size // 50_000), min(size, 50_000), seed=n)
        expected.extend(values)
        records = encode_batch([(None, v, (), None) for v in values], now_ms=now_ms())
        frames.append(produce_frame(7000 + n, topic, records))
    # Sent in odd-sized pieces so that request boundaries fall anywhere in a read.
    data = b"".join(frames)
    for start in range(0, len(data), 777_777):
        client.send_raw(data[start : start + 777_777])
    for n in range(len(frames)):
        response = read_produce_response(client, 7000 + n)
        assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
    assert [r.value for r in client.read_all(topic, 0)] == expected


def test_a_bad_size_after_good_requests_closes_only_that_connection(
    broker: RunningBroker, client: KafkaConnection
) -> None:
    with KafkaConnection(broker.bootstrap) as bystander:
        bystander.request(METADATA, 9, topics=[], allow_auto_topic_creation=False)
        request = build(request_schema(API_VERSIONS, 3), VERSIONS_REQUEST)
        good = [encode_request(RequestHeader(API_VERSIONS, 3, i, "t"), request) for i in (1, 2)]
        client.send_raw(b"".join(good) + struct.pack(">i", -5) + b"ignored after the bad size")
        assert client.receive(API_VERSIONS, 3, 1).error_code == ErrorCode.none
        assert client.receive(API_VERSIONS, 3, 2).error_code == ErrorCode.none
        client.assert_closed_by_broker()
        assert_broker_serves(broker, bystander)


async def _paused_connections(broker: RunningBroker) -> list[tuple[bool, int]]:
    assert broker.broker is not None
    return [(c._reading_paused, c.core.queued_bytes) for c in broker.broker._open]


def test_a_client_pipelining_more_than_the_read_ahead_is_paused_then_served(
    broker: RunningBroker,
) -> None:
    watched, other = unique_topic("watched"), unique_topic("piped")
    with KafkaConnection(broker.bootstrap) as admin, KafkaConnection(broker.bootstrap) as piper:
        admin.create_topic(watched)
        admin.create_topic(other)
        # A long-polling Fetch holds the connection's one request slot, so whatever is
        # pipelined behind it waits unread.
        fetch_id = piper.send(
            FETCH,
            FETCH_VERSION,
            **piper.fetch_request_fields([(watched, 0, 0)], max_wait_ms=30_000, min_bytes=1),
        )
        value = bytes(range(256)) * 1024  # 256 KiB
        count = 4 * connection_core.READ_AHEAD_BYTES // len(value)
        frames = [
            produce_frame(9000 + i, other, batch_of(value + i.to_bytes(4, "big")))
            for i in range(count)
        ]
        sender = threading.Thread(target=piper.send_raw, args=(b"".join(frames),))
        sender.start()
        try:
            deadline = time.monotonic() + 20
            while True:
                states = broker.call(_paused_connections(broker))
                if any(paused for paused, _ in states):
                    break
                assert time.monotonic() < deadline, f"reading never paused: {states}"
                piper.has_data(0.01)  # a bounded wait for the broker to read more
            # Reading stops within one receive of the read-ahead limit.
            bound = connection_core.READ_AHEAD_BYTES + 2 * connection_core.MAX_BUFFER
            assert all(queued <= bound for _, queued in states), states
            assert not piper.has_data(0), "the pipelined requests overtook the fetch"

            admin.produce(watched, 0, batch_of(b"wake up"))
            fetched = decode_exactly(FETCH, FETCH_VERSION, piper.read_frame(), fetch_id)
            assert values_of(fetched.responses[0].partitions[0].records) == [b"wake up"]
            for i in range(count):
                response = read_produce_response(piper, 9000 + i)
                assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
                assert response.base_offset == i  # type: ignore[attr-defined]
        finally:
            sender.join(timeout=30)
        values = [r.value for r in admin.read_all(other, 0)]
        assert values == [value + i.to_bytes(4, "big") for i in range(count)]


def test_a_response_is_not_held_back_by_a_later_pipelined_request(
    broker: RunningBroker, client: KafkaConnection
) -> None:
    produced, watched = unique_topic("first"), unique_topic("watched")
    client.create_topic(produced)
    client.create_topic(watched)
    fetch = build(
        request_schema(FETCH, FETCH_VERSION),
        client.fetch_request_fields([(watched, 0, 0)], max_wait_ms=30_000, min_bytes=1),
    )
    # Both arrive in one read; the Produce's response must not wait for the Fetch to end.
    client.send_raw(
        produce_frame(10_001, produced, batch_of(b"early"))
        + encode_request(RequestHeader(FETCH, FETCH_VERSION, 10_002, "t"), fetch)
    )
    response = read_produce_response(client, 10_001)
    assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
    with KafkaConnection(broker.bootstrap) as other:
        other.produce(watched, 0, batch_of(b"late"))
    fetched = decode_exactly(FETCH, FETCH_VERSION, client.read_frame(), 10_002)
    assert values_of(fetched.responses[0].partitions[0].records) == [b"late"]


async def _pool_state(broker: RunningBroker) -> tuple[bool, list[tuple[bool, int]]]:
    assert broker.broker is not None
    return broker.broker.request_memory.exhausted, [
        (c._reading_paused, c.core.queued_bytes) for c in broker.broker._open
    ]


def test_queued_max_request_bytes_holds_back_reads_and_loses_no_request(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With the broker's pool smaller than one connection's read-ahead, the pool is what stops
    reading; once memory is released every request is read and answered, in order."""
    pool_bytes = 1024 * 1024
    with (
        running_broker(
            tmp_path_factory.mktemp("pool"),
            message_max_bytes=str(4 * 1024 * 1024),
            queued_max_request_bytes=str(pool_bytes),
        ) as broker,
        KafkaConnection(broker.bootstrap) as admin,
        KafkaConnection(broker.bootstrap) as piper,
    ):
        watched, other = unique_topic("watched"), unique_topic("piped")
        admin.create_topic(watched)
        admin.create_topic(other)
        # A long-polling Fetch holds the connection's one request slot; what is pipelined
        # behind it waits, charged to the pool.
        fetch_id = piper.send(
            FETCH,
            FETCH_VERSION,
            **piper.fetch_request_fields([(watched, 0, 0)], max_wait_ms=30_000, min_bytes=1),
        )
        value = bytes(range(256)) * 256  # 64 KiB
        count = 3 * pool_bytes // len(value)
        frames = [
            produce_frame(11_000 + i, other, batch_of(value + i.to_bytes(4, "big")))
            for i in range(count)
        ]
        sender = threading.Thread(target=piper.send_raw, args=(b"".join(frames),))
        sender.start()
        try:
            exhausted, states = broker.call(_pool_state(broker))
            deadline = time.monotonic() + 20
            while not (exhausted and any(paused for paused, _ in states)):
                assert time.monotonic() < deadline, f"reading never paused: {states}"
                piper.has_data(0.01)  # a bounded wait for the broker to read more
                exhausted, states = broker.call(_pool_state(broker))
            # Far below the 4 MiB read-ahead: the pool stopped the reading.
            assert all(queued <= 2 * pool_bytes for _, queued in states), states

            # A small request on another connection is still read and served.
            admin.produce(watched, 0, batch_of(b"wake up"))
            fetched = decode_exactly(FETCH, FETCH_VERSION, piper.read_frame(), fetch_id)
            assert values_of(fetched.responses[0].partitions[0].records) == [b"wake up"]
            for i in range(count):
                response = read_produce_response(piper, 11_000 + i)
                assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
                assert response.base_offset == i  # type: ignore[attr-defined]
        finally:
            sender.join(timeout=30)
        values = [r.value for r in admin.read_all(other, 0)]
        assert values == [value + i.to_bytes(4, "big") for i in range(count)]
        exhausted, _ = broker.call(_pool_state(broker))
        assert not exhausted


def test_a_request_larger_than_queued_max_request_bytes_is_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A pool smaller than one request cannot wedge the broker: the request is read whole."""
    with (
        running_broker(
            tmp_path_factory.mktemp("small-pool"),
            message_max_bytes=str(8 * 1024 * 1024),
            queued_max_request_bytes=str(1024 * 1024),
        ) as broker,
        KafkaConnection(broker.bootstrap) as client,
    ):
        topic = unique_topic("big")
        client.create_topic(topic)
        values = big_values(60, 50_000, seed=3)  # 3 MB in one request
        client.send_raw(produce_frame(12_001, topic, batch_of(*values)))
        response = read_produce_response(client, 12_001)
        assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
        assert [r.value for r in client.read_all(topic, 0)] == values
        exhausted, _ = broker.call(_pool_state(broker))
        assert not exhausted
