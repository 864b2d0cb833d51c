"""Fetch's long poll (min_bytes / max_wait) and its byte limits (partition_max_bytes, max_bytes).

Waiting here is always on the broker's own timer or on another connection's produce; the tests
only measure how long the broker took.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_headers
from odradek.testing import RunningBroker, running_broker

from .conftest import (
    FETCH,
    FETCH_VERSION,
    KafkaConnection,
    batch_of,
    records_of,
    unique_topic,
    values_of,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("long-poll")) as b:
        yield b


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as connection:
        yield connection


@pytest.fixture
def producer(broker: RunningBroker) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as connection:
        yield connection


@pytest.fixture
def topic(client: KafkaConnection) -> str:
    name = unique_topic("poll")
    client.create_topic(name, partitions=2)
    return name


def batch_sizes(data: bytes | None) -> list[int]:
    """Sizes of the whole batches in ``data`` (a cut-off batch at the end is not one)."""
    return [h.size for h in iter_headers(data or b"")]


def test_waiting_fetch_returns_when_another_connection_produces(
    client: KafkaConnection, producer: KafkaConnection, topic: str
) -> None:
    fields = client.fetch_request_fields([(topic, 0, 0)], max_wait_ms=5000, min_bytes=1)
    started = time.monotonic()
    correlation_id = client.send(FETCH, FETCH_VERSION, **fields)
    # A broker that does not wait would have answered the empty fetch by now.
    assert not client.has_data(0.2), "the fetch returned without waiting for data"
    assert producer.produce(topic, 0, batch_of(b"wake up")).error_code == ErrorCode.none
    response = client.receive(FETCH, FETCH_VERSION, correlation_id)
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"the fetch took {elapsed:.2f}s though data came after ~0.2s"
    (partition,) = response.responses[0].partitions
    assert partition.error_code == ErrorCode.none
    assert partition.high_watermark == 1
    assert values_of(partition.records) == [b"wake up"]


@pytest.mark.parametrize("acks", [1, -1])
def test_a_woken_long_poll_is_answered_before_the_produce_that_woke_it(
    client: KafkaConnection, producer: KafkaConnection, topic: str, acks: int
) -> None:
    """As Kafka completes delayed fetches in the thread that appended: the consumer's answer
    is on its socket by the time the producer reads its own (loopback delivers a send to the
    peer's socket at once)."""
    fields = client.fetch_request_fields([(topic, 0, 0)], max_wait_ms=5000, min_bytes=1)
    correlation_id = client.send(FETCH, FETCH_VERSION, **fields)
    assert not client.has_data(0.2), "the fetch returned without waiting for data"
    answer = producer.produce(topic, 0, batch_of(b"first to the consumer"), acks=acks)
    assert answer.error_code == ErrorCode.none
    assert client.has_data(0), "the producer was answered before the waiting consumer"
    response = client.receive(FETCH, FETCH_VERSION, correlation_id)
    (partition,) = response.responses[0].partitions
    assert values_of(partition.records) == [b"first to the consumer"]


def test_produce_to_another_partition_does_not_end_the_wait_early(
    client: KafkaConnection, producer: KafkaConnection, topic: str
) -> None:
    fields = client.fetch_request_fields([(topic, 0, 0)], max_wait_ms=400, min_bytes=1)
    started = time.monotonic()
    correlation_id = client.send(FETCH, FETCH_VERSION, **fields)
    assert producer.produce(topic, 1, batch_of(b"elsewhere")).error_code == ErrorCode.none
    response = client.receive(FETCH, FETCH_VERSION, correlation_id)
    elapsed = time.monotonic() - started
    assert elapsed >= 0.35
    (partition,) = response.responses[0].partitions
    assert partition.error_code == ErrorCode.none
    assert not partition.records


def test_min_bytes_not_reached_waits_for_max_wait_then_returns_what_there_is(
    client: KafkaConnection, producer: KafkaConnection, topic: str
) -> None:
    assert producer.produce(topic, 0, batch_of(b"small")).error_code == ErrorCode.none
    started = time.monotonic()
    partition = client.fetch(topic, 0, 0, max_wait_ms=300, min_bytes=1_000_000)
    elapsed = time.monotonic() - started
    assert 0.28 <= elapsed < 2.0, f"max_wait 300 ms took {elapsed:.3f}s"
    assert partition.error_code == ErrorCode.none
    assert values_of(partition.records) == [b"small"]


def test_min_bytes_reached_by_a_later_produce(
    client: KafkaConnection, producer: KafkaConnection, topic: str
) -> None:
    first = batch_of(b"x" * 100)
    assert producer.produce(topic, 0, first).error_code == ErrorCode.none
    fields = client.fetch_request_fields(
        [(topic, 0, 0)], max_wait_ms=5000, min_bytes=len(first) + 1
    )
    started = time.monotonic()
    correlation_id = client.send(FETCH, FETCH_VERSION, **fields)
    assert not client.has_data(0.2), "the fetch returned before min_bytes were there"
    assert producer.produce(topic, 0, batch_of(b"y" * 100)).error_code == ErrorCode.none
    response = client.receive(FETCH, FETCH_VERSION, correlation_id)
    assert time.monotonic() - started < 2.5
    (partition,) = response.responses[0].partitions
    assert values_of(partition.records) == [b"x" * 100, b"y" * 100]


def test_zero_max_wait_answers_at_once(client: KafkaConnection, topic: str) -> None:
    started = time.monotonic()
    partition = client.fetch(topic, 0, 0, max_wait_ms=0, min_bytes=1_000_000)
    assert time.monotonic() - started < 1.0
    assert partition.error_code == ErrorCode.none
    assert not partition.records


def test_partition_max_bytes_returns_whole_batches_up_to_the_limit(
    client: KafkaConnection, topic: str
) -> None:
    batches = [batch_of(bytes([65 + i]) * 150) for i in range(5)]
    for batch in batches:
        assert client.produce(topic, 0, batch).error_code == ErrorCode.none
    size = len(batches[0])
    partition = client.fetch(topic, 0, 0, partition_max_bytes=2 * size + size // 2)
    assert partition.high_watermark == 5
    assert batch_sizes(partition.records) == [size, size]
    assert len(partition.records) == 2 * size
    assert values_of(partition.records) == [b"A" * 150, b"B" * 150]
    # The next fetch goes on from where the previous one stopped.
    rest = client.fetch(topic, 0, 2, partition_max_bytes=10 * size)
    assert values_of(rest.records) == [bytes([65 + i]) * 150 for i in range(2, 5)]


def test_response_max_bytes_limits_all_partitions_together(
    client: KafkaConnection, topic: str
) -> None:
    size = 0
    for index in (0, 1):
        for i in range(3):
            batch = batch_of(f"{index}-{i}".encode() * 40)
            size = len(batch)
            assert client.produce(topic, index, batch).error_code == ErrorCode.none
    fields = client.fetch_request_fields(
        [(topic, 0, 0), (topic, 1, 0)], max_bytes=4 * size, partition_max_bytes=10 * size
    )
    response = client.request(FETCH, FETCH_VERSION, **fields)
    (topic_response,) = response.responses
    by_index = {p.partition_index: p for p in topic_response.partitions}
    total = sum(len(p.records or b"") for p in by_index.values())
    assert total <= 4 * size
    # The first partition is read in full; the second gets what is left of the budget.
    assert len(records_of(by_index[0].records)) == 3
    assert len(records_of(by_index[1].records)) == 1
    assert records_of(by_index[1].records)[0].value == b"1-0" * 40


def test_first_batch_larger_than_partition_max_bytes_comes_whole(
    client: KafkaConnection, topic: str
) -> None:
    """KIP-74: the first batch of the response is returned whole, so consumers make progress."""
    big = batch_of(*[bytes([i]) * 1000 for i in range(5)])
    assert client.produce(topic, 0, big).error_code == ErrorCode.none
    assert client.produce(topic, 0, batch_of(b"after")).error_code == ErrorCode.none
    partition = client.fetch(topic, 0, 0, partition_max_bytes=1000, max_bytes=1000)
    assert partition.error_code == ErrorCode.none
    assert batch_sizes(partition.records) == [len(big)]
    # Stored as sent, from the magic byte on (offset and leader epoch are the broker's to set).
    assert bytes(partition.records)[16:] == big[16:]
    assert [r.value for r in records_of(partition.records)] == [bytes([i]) * 1000 for i in range(5)]


def test_fetch_from_the_middle_of_a_batch_starts_at_that_batch(
    client: KafkaConnection, topic: str
) -> None:
    assert client.produce(topic, 0, batch_of(b"0", b"1", b"2")).error_code == ErrorCode.none
    assert client.produce(topic, 0, batch_of(b"3")).error_code == ErrorCode.none
    partition = client.fetch(topic, 0, 1)
    records = records_of(partition.records)
    # The whole batch holding offset 1 comes back; clients skip the offsets before theirs.
    assert [r.offset for r in records] == [0, 1, 2, 3]
    assert [r.value for r in records if r.offset >= 1] == [b"1", b"2", b"3"]
