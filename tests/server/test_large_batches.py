"""A big compressed produce does not hold up the broker's other clients: its records (a million in
each of two zstd batches) are read while the broker keeps answering others, and a client's round
trip sent once the broker has the whole produce is answered before the produce is. What the
produce gets is what it always got: its records appended, or a corrupt batch refused.

The broker runs as a process of its own, so that the test sees it from the outside only; the
kernel's socket tables say when it has read every byte of the produce."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import batch_around, zigzag_varint
from odradek.testing import BrokerProcess, wait_until

from .conftest import (
    API_VERSIONS,
    PRODUCE,
    PRODUCE_VERSION,
    KafkaConnection,
    now_ms,
    unique_topic,
    unread_bytes,
)

RECORDS = 1_000_000  # of each batch: some 0.8 MB of zstd, 9 MB of records


def empty_records(count: int, first: int = 0) -> bytes:
    """Records ``first`` to ``count`` - 1 of a batch, without key, value or headers: the most
    records a batch's bytes can hold, so the costliest to read."""
    return b"".join(
        zigzag_varint(5 + len(delta)) + b"\x00\x00" + delta + b"\x01\x00\x00"
        for delta in map(zigzag_varint, range(first, count))
    )


@pytest.fixture(scope="module")
def section() -> bytes:
    return empty_records(RECORDS)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("large-batches")).start()
    try:
        yield process
    finally:
        process.terminate()


def zstd_batch(section: bytes, count: int) -> bytes:
    packed = compression.compress(compression.ZSTD, section)
    return batch_around(packed, count, now_ms(), now_ms(), attributes=compression.ZSTD)


def produce_request(topic: str, batches: list[bytes]) -> dict[str, object]:
    partitions = [{"index": i, "records": batch} for i, batch in enumerate(batches)]
    return {
        "acks": 1,
        "timeout": 30_000,
        "topic_data": [{"name": topic, "partition_data": partitions}],
    }


def answered_while_the_produce_is_read(
    broker: BrokerProcess, batches: list[bytes]
) -> tuple[KafkaConnection, int, bool]:
    """Send a Produce of ``batches`` (one per partition of a new topic) and, once the broker has
    read all of it, an ApiVersions on another connection: the producer's connection, its
    request's correlation id, and whether the ApiVersions answer came while the producer's had
    not."""
    producer = KafkaConnection(broker.bootstrap, timeout=120)
    with KafkaConnection(broker.bootstrap) as bystander:
        topic = unique_topic("large")
        bystander.create_topic(topic, partitions=len(batches))
        sent = producer.send(PRODUCE, PRODUCE_VERSION, **produce_request(topic, batches))
        peers = {producer.connection.local_port}
        wait_until(
            lambda: unread_bytes(broker.port, peers) == 0,
            interval_s=0.005,
            what="the broker read the whole produce",
        )
        versions = bystander.request(
            API_VERSIONS, 3, client_software_name="t", client_software_version="1"
        )
        assert versions.error_code == ErrorCode.none
        return producer, sent, not producer.has_data(0)


def test_a_round_trip_is_answered_while_a_big_compressed_produce_is_read(
    broker: BrokerProcess, section: bytes
) -> None:
    batches = [zstd_batch(section, RECORDS) for _ in range(2)]
    producer, sent, first = answered_while_the_produce_is_read(broker, batches)
    with producer:
        response = producer.receive(PRODUCE, PRODUCE_VERSION, sent)
    assert first, "the bystander's round trip waited for the big produce's validation"
    answers = response.responses[0].partition_responses
    assert [(p.error_code, p.base_offset) for p in answers] == [(ErrorCode.none, 0)] * 2


def test_a_big_batch_that_is_one_record_short_is_still_refused(
    broker: BrokerProcess, section: bytes
) -> None:
    """The last record cut off, while the count still claims it: INVALID_RECORD, as ever, for
    that partition alone."""
    short = zstd_batch(section[: -len(empty_records(RECORDS, RECORDS - 1))], RECORDS)
    producer, sent, first = answered_while_the_produce_is_read(
        broker, [short, zstd_batch(section, RECORDS)]
    )
    with producer:
        response = producer.receive(PRODUCE, PRODUCE_VERSION, sent)
    assert first
    refused, taken = response.responses[0].partition_responses
    assert refused.error_code == ErrorCode.invalid_record, refused
    assert (taken.error_code, taken.base_offset) == (ErrorCode.none, 0)


def one_record(value_size: int) -> bytes:
    """A record without key or headers whose value is ``value_size`` zero bytes."""
    body = b"\x00\x00\x00\x01" + zigzag_varint(value_size) + bytes(value_size) + b"\x00"
    return zigzag_varint(len(body)) + body


def test_small_batches_that_inflate_hugely_are_read_while_others_are_answered(
    broker: BrokerProcess,
) -> None:
    """Batches whose headers look harmless (a few kilobytes of zstd, one record each) but whose
    record inflates to 60 MiB, inside the decompression limit: read off the loop as big ones
    are, so a round trip sent meanwhile is answered first, and each is appended whole."""
    inflating = zstd_batch(one_record(60 << 20), 1)
    assert len(inflating) < 64 * 1024
    producer, sent, first = answered_while_the_produce_is_read(broker, [inflating] * 4)
    with producer:
        response = producer.receive(PRODUCE, PRODUCE_VERSION, sent)
    assert first, "the bystander's round trip waited for the inflating batches"
    answers = response.responses[0].partition_responses
    assert [(p.error_code, p.base_offset) for p in answers] == [(ErrorCode.none, 0)] * 4
