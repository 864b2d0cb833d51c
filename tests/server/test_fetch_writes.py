"""How a Fetch response leaves the connection: file slices too big for one socket buffer go by
sendfile in several steps, small ones are copied into one buffer with the frame around them, and
pipelined Fetches of either kind are answered whole and in request order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.server.connection import SENDFILE_MIN_BYTES
from odradek.testing import RunningBroker, running_broker

from .conftest import FETCH, FETCH_VERSION, KafkaConnection, batch_of, unique_topic, values_of

# Bigger than a loopback socket's send buffer can take at once (net.ipv4.tcp_wmem's maximum is a
# few MB), so the response's one slice cannot go in a single sendfile call.
BIG_BYTES = 12 * 1024 * 1024
VALUE_BYTES = 10_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("fetch-writes")) as b:
        yield b


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap, timeout=60) as connection:
        yield connection


def values(prefix: bytes, count: int) -> list[bytes]:
    """``count`` distinct values of :data:`VALUE_BYTES` each."""
    return [(prefix + b"-%06d-" % i).ljust(VALUE_BYTES, b"x") for i in range(count)]


def load(client: KafkaConnection, topic: str, partition: int, wanted: list[bytes]) -> None:
    for start in range(0, len(wanted), 50):
        p = client.produce(topic, partition, batch_of(*wanted[start : start + 50]))
        assert p.error_code == ErrorCode.none, p


def fetch_fields(client: KafkaConnection, topic: str, partitions: int) -> dict[str, Any]:
    return client.fetch_request_fields(
        [(topic, p, 0) for p in range(partitions)],
        max_bytes=64 * 1024 * 1024,
        partition_max_bytes=32 * 1024 * 1024,
    )


def fetched_values(response: Any, partitions: int) -> dict[int, list[bytes | None]]:
    assert response.error_code == ErrorCode.none
    (topic_response,) = response.responses
    got = {p.partition_index: values_of(p.records) for p in topic_response.partitions}
    assert sorted(got) == list(range(partitions))
    return got


def test_a_response_larger_than_the_socket_buffer_arrives_whole(client: KafkaConnection) -> None:
    topic = unique_topic("big")
    client.create_topic(topic, partitions=2)
    wanted = {p: values(b"p%d" % p, BIG_BYTES // VALUE_BYTES // 2) for p in range(2)}
    for partition, partition_values in wanted.items():
        load(client, topic, partition, partition_values)
    response = client.request(FETCH, FETCH_VERSION, **fetch_fields(client, topic, 2))
    assert fetched_values(response, 2) == wanted


def test_small_slices_and_a_big_one_pipelined_answer_in_order(client: KafkaConnection) -> None:
    small, big = unique_topic("small"), unique_topic("big")
    client.create_topic(small, partitions=3)
    client.create_topic(big, partitions=1)
    few = {p: [b"s%d-%d" % (p, i) for i in range(5)] for p in range(3)}
    for partition, partition_values in few.items():
        assert client.produce(small, partition, batch_of(*partition_values)).error_code == 0
    many = values(b"big", 4 * SENDFILE_MIN_BYTES // VALUE_BYTES)
    load(client, big, 0, many)
    # Sent before any answer is read: the broker has the later requests at hand while it
    # answers the first ones, and the big slice may find earlier answers still unsent.
    order = [small, big, small, big, small]
    sent = [
        client.send(FETCH, FETCH_VERSION, **fetch_fields(client, t, 3 if t == small else 1))
        for t in order
    ]
    for topic, correlation_id in zip(order, sent, strict=True):
        response = client.receive(FETCH, FETCH_VERSION, correlation_id)
        if topic == small:
            assert fetched_values(response, 3) == few
        else:
            assert fetched_values(response, 1) == {0: many}
