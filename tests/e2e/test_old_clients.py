"""Clients of Kafka's old protocol versions against a real odradek broker over real sockets.

kafka-python pinned to an old ``api_version`` speaks what a client of that Kafka release spoke:
(0, 9) Produce v1 and Fetch v1 with message format v0 (LZ4 with Kafka's broken frame checksum),
(0, 10, 0) Produce v2 and Fetch v2 and (0, 10, 1) Fetch v3 with message format v1, (0, 11) and
later RecordBatch v2 (Produce v3, v5, v6). Whatever a client sends, the broker stores
RecordBatch v2 in the producer's codec, and whatever it stores, each client reads in its format.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from .conftest import COMPRESSIBLE, stored_codecs

TIMEOUT_S = 15

# The message formats and request versions they bring (kafka-python's api_version table).
OLD_API_VERSIONS = [(0, 9), (0, 10, 0), (0, 10, 1), (0, 11), (1, 0), (2, 0)]
CODECS = ["none", "gzip", "snappy", "lz4"]


def produce(bootstrap: str, topic: str, values: list[bytes], **config: Any) -> list[int]:
    """Send ``values`` with keys k0, k1, ... and timestamps; the offsets the broker answered."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=20,
        request_timeout_ms=TIMEOUT_S * 1000,
        max_block_ms=TIMEOUT_S * 1000,
        enable_idempotence=False,
        **config,
    )
    try:
        futures = [
            producer.send(topic, key=f"k{i}".encode(), value=v, timestamp_ms=1_700_000_000_000 + i)
            for i, v in enumerate(values)
        ]
        producer.flush(TIMEOUT_S)
        return [f.get(timeout=TIMEOUT_S).offset for f in futures]
    finally:
        producer.close(timeout=TIMEOUT_S)


def consume(bootstrap: str, topic: str, count: int, offset: int = 0, **config: Any) -> list[Any]:
    """Exactly ``count`` records of partition 0 from ``offset``, then nothing more."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
        request_timeout_ms=TIMEOUT_S * 1000,
        **config,
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
        assert len(got) == count, f"consumed {len(got)} of {count} records"
        assert not any(consumer.poll(timeout_ms=300).values()), "more records than produced"
        return got
    finally:
        consumer.close()


def values(n: int) -> list[bytes]:
    return [COMPRESSIBLE + str(i).encode() for i in range(n)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("api_version", OLD_API_VERSIONS, ids=lambda v: ".".join(map(str, v)))
def test_old_producer_and_consumer_round_trip(
    broker, bootstrap, make_topic, topic_name, api_version, codec
):
    if api_version < (0, 10) and codec == "lz4":
        # kafka-python writes and reads magic 0's broken LZ4 checksum with xxhash only;
        # tests/protocol/test_legacy.py checks the broker's side of it.
        pytest.importorskip("xxhash")
    topic = make_topic(topic_name)
    extra = {} if codec == "none" else {"compression_type": codec}
    sent = values(30)
    offsets = produce(bootstrap, topic, sent, api_version=api_version, **extra)
    assert offsets == list(range(30))
    assert stored_codecs(broker, topic) == {codec}

    got = consume(bootstrap, topic, 30, api_version=api_version)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, f"k{i}".encode(), v) for i, v in enumerate(sent)
    ]
    if api_version >= (0, 10):
        assert [r.timestamp for r in got] == [1_700_000_000_000 + i for i in range(30)]


@pytest.mark.parametrize(
    "api_version", [(0, 8, 1), (0, 8, 2), (0, 9)], ids=lambda v: ".".join(map(str, v))
)
def test_old_consumer_commits_and_reads_back_its_offset(
    bootstrap, make_topic, topic_name, api_version
):
    """Offsets committed with OffsetCommit v0 (0.8.1), v1 (0.8.2) and v2 (0.9) outside group
    management, read back with OffsetFetch v0/v1 and listed with ListOffsets v0."""
    topic = make_topic(topic_name)
    produce(bootstrap, topic, values(10), api_version=(0, 10, 1))
    group = f"{topic_name}-group"
    tp = TopicPartition(topic, 0)

    def consumer() -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            api_version=api_version,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=TIMEOUT_S * 1000,
        )

    first = consumer()
    try:
        first.assign([tp])
        assert first.end_offsets([tp]) == {tp: 10}  # ListOffsets (v0 before 0.10.1)
        assert first.beginning_offsets([tp]) == {tp: 0}
        first.commit({tp: OffsetAndMetadata(7, "", -1)})
    finally:
        first.close()
    second = consumer()
    try:
        second.assign([tp])
        assert second.committed(tp) == 7
    finally:
        second.close()
