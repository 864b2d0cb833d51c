"""read_committed consumers (confluent-kafka, kafka-python) against a real broker: transactional
batches and markers are written by hand over Kafka's protocol (Produce, WriteTxnMarkers), as a
transaction coordinator would, and the clients filter aborted transactions by the broker's
aborted-transactions list and last stable offset."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch
from tests.server.conftest import KafkaConnection, now_ms

TIMEOUT_S = 15
WRITE_TXN_MARKERS = 27


def txn_batch(producer_id: int, sequence: int, *values: bytes) -> bytes:
    return encode_batch(
        [(None, v, (), None) for v in values],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=True,
        now_ms=now_ms(),
    )


def end_txn(connection: KafkaConnection, topic: str, producer_id: int, commit: bool) -> None:
    response = connection.request(
        WRITE_TXN_MARKERS,
        1,
        markers=[
            {
                "producer_id": producer_id,
                "producer_epoch": 0,
                "transaction_result": commit,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ],
    )
    (marker,) = response.markers
    assert marker.topics[0].partitions[0].error_code == ErrorCode.none


def confluent_values(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "odradek-e2e-unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        # Nothing beyond what is expected turns up.
        extra = consumer.poll(0.5)
        assert extra is None or extra.error() is not None, extra.value()
        return values
    finally:
        consumer.close()


def test_read_committed_consumers_see_only_committed_transactions(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name)
    with KafkaConnection(bootstrap) as connection:
        assert (
            connection.produce(topic, 0, txn_batch(7, 0, b"aborted-1", b"aborted-2")).error_code
            == 0
        )
        assert connection.produce(topic, 0, txn_batch(8, 0, b"committed-1")).error_code == 0
        end_txn(connection, topic, 7, commit=False)
        assert connection.produce(topic, 0, txn_batch(8, 1, b"committed-2")).error_code == 0
        end_txn(connection, topic, 8, commit=True)
        assert connection.produce(topic, 0, txn_batch(9, 0, b"open")).error_code == 0

        committed = [b"committed-1", b"committed-2"]
        assert confluent_values(bootstrap, topic, "read_committed", 2) == committed
        everything = [b"aborted-1", b"aborted-2", b"committed-1", b"committed-2", b"open"]
        assert confluent_values(bootstrap, topic, "read_uncommitted", 5) == everything

        kafka_python = KafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
        )
        try:
            partition = KafkaPythonPartition(topic, 0)
            kafka_python.assign([partition])
            kafka_python.seek_to_beginning(partition)
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 2 and time.monotonic() < deadline:
                for records in kafka_python.poll(timeout_ms=200).values():
                    got += [r.value for r in records]
            assert got == committed
            # The open transaction holds the position at the last stable offset.
            assert kafka_python.end_offsets([partition])[partition] == 6

            end_txn(connection, topic, 9, commit=True)
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 3 and time.monotonic() < deadline:
                for records in kafka_python.poll(timeout_ms=200).values():
                    got += [r.value for r in records]
            assert got == [*committed, b"open"]
        finally:
            kafka_python.close()
