"""Batches whose CRC is right but whose records are not, sent by hand over Kafka's protocol to a
real broker: each gets Kafka's error code, the log holds none of it (Fetch, ListOffsets by time,
the segment files), and the connection, the batches after it and other clients carry on."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import batch_around, encode_batch, iter_records
from odradek.testing import RunningBroker
from tests.server.conftest import (
    LIST_OFFSETS,
    KafkaConnection,
    assert_broker_serves,
    now_ms,
    values_of,
)

TIMEOUT_S = 15


def garbage_batch(codec: str) -> bytes:
    """A batch with a valid CRC whose compressed payload is not ``codec``'s."""
    return batch_around(b"\xde\xad\xbe\xef" * 16, 3, now_ms(), now_ms(), attributes=_id(codec))


def miscounted_batch(codec: str) -> bytes:
    """A batch of two records claiming three (lastOffsetDelta agreeing with the claim)."""
    good = encode_batch([(None, b"a", (), None), (None, b"b", (), None)], now_ms=now_ms())
    section = good[61:]
    return batch_around(
        compression.compress(_id(codec), section), 3, now_ms(), now_ms(), attributes=_id(codec)
    )


def good_batch(codec: str, *values: bytes) -> bytes:
    return encode_batch(
        [(None, v, (), None) for v in values], now_ms=now_ms(), compression=_id(codec)
    )


def _id(codec: str) -> int:
    return compression.codec_id(codec)


def offset_for_time(connection: KafkaConnection, topic: str, timestamp: int) -> int:
    response = connection.request(
        LIST_OFFSETS,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": topic,
                "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                ],
            }
        ],
    )
    (p,) = response.topics[0].partitions
    assert p.error_code == ErrorCode.none, p
    return int(p.offset)


def segment_values(broker: RunningBroker, topic: str) -> list[bytes | None]:
    """Every record value in the partition's segment files, each batch decoded (CRC checked)."""
    values: list[bytes | None] = []
    for segment in sorted((Path(broker.data_dir) / f"{topic}-0").glob("*.log")):
        for _, records in iter_records(segment.read_bytes()):
            values += [r.value for r in records]
    return values


def confluent_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "odradek-e2e-unused", "fetch.wait.max.ms": 50}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                values.append(message.value())
        return values
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_a_corrupt_batch_is_refused_and_leaves_nothing_behind(
    broker: RunningBroker,
    make_topic: Callable[..., str],
    topic_name: str,
    codec: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = make_topic(topic_name)
    other = make_topic(f"{topic_name}-other")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    with (
        KafkaConnection(broker.bootstrap) as connection,
        KafkaConnection(broker.bootstrap) as bystander,
    ):
        caplog.set_level(logging.INFO)
        assert connection.produce(topic, 0, good_batch(codec, b"first")).error_code == 0
        refused = []
        if codec != "none":
            refused.append(connection.produce(topic, 0, garbage_batch(codec)))
        refused.append(connection.produce(topic, 0, miscounted_batch(codec)))
        # another client, mid-way, on another topic
        producer.produce(other, b"elsewhere")
        assert producer.flush(TIMEOUT_S) == 0
        # the same connection goes on, and the next good batch takes the next offset
        after = connection.produce(topic, 0, good_batch(codec, b"second", b"third"))

        codes = [r.error_code for r in refused]
        assert codes == ([ErrorCode.corrupt_message] if codec != "none" else []) + [
            ErrorCode.invalid_record
        ]
        assert all(r.error_message and topic in r.error_message for r in refused)
        assert after.error_code == ErrorCode.none
        assert after.base_offset == 1

        assert connection.latest_offset(topic, 0) == 3
        assert offset_for_time(connection, topic, 0) == 0  # a time lookup reads every batch
        assert values_of(connection.fetch(topic, 0, 0).records) == [b"first", b"second", b"third"]
        assert segment_values(broker, topic) == [b"first", b"second", b"third"]
        assert confluent_values(broker.bootstrap, topic, 3) == [b"first", b"second", b"third"]
        assert confluent_values(broker.bootstrap, other, 1) == [b"elsewhere"]
        assert_broker_serves(broker, bystander)
    # refused with one line, no traceback
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
