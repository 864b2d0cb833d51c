"""Produce v0-v2 and Fetch v0-v3 against a real broker: Kafka 3.9's answers to old clients,
and KIP-110's compression rules.

Old requests are built with kafka-python's protocol classes and legacy record builder (its own
implementation of Kafka's definitions), sent as raw frames and read back with those classes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_headers
from odradek.protocol.records import encode_batch, iter_records
from odradek.testing import RunningBroker, running_broker
from tests.server.conftest import KafkaConnection, now_ms, unique_topic

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("old-versions")) as b:
        yield b


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[KafkaConnection]:
    with KafkaConnection(broker.bootstrap) as connection:
        yield connection


def message_set(magic: int, codec: str, values: list[bytes]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic, CODECS[codec], 1 << 20)
    for i, value in enumerate(values):
        builder.append(i, now_ms() if magic else None, b"k%d" % i, value)
    return bytes(builder.build())


def produce_old(
    client: KafkaConnection, version: int, topic: str, records: bytes, partition: int = 0
) -> Any:
    """The partition's answer to a Produce v0-v2 (kafka-python's classes) of ``records``."""
    topic_data = ProduceRequest[version].TopicProduceData
    request = ProduceRequest[version](
        acks=1,
        timeout_ms=5000,
        topic_data=[
            topic_data(
                name=topic,
                partition_data=[topic_data.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )
    request.with_header(correlation_id=5, client_id="old-producer")
    client.send_raw(request.encode(header=True, framed=True))
    response = ProduceResponse[version].decode(bytes(client.read_frame()), header=True)
    [partition_response] = response.responses[0].partition_responses
    return partition_response


def fetch_old(client: KafkaConnection, version: int, topic: str, offset: int = 0) -> Any:
    """The partition's answer to a Fetch v0-v3 (kafka-python's classes)."""
    topic_data = FetchRequest[version].FetchTopic
    fields: dict[str, Any] = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "topics": [
            topic_data(
                topic=topic,
                partitions=[
                    topic_data.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
    }
    if version >= 3:
        fields["max_bytes"] = 1 << 20
    request = FetchRequest[version](**fields)
    request.with_header(correlation_id=6, client_id="old-consumer")
    client.send_raw(request.encode(header=True, framed=True))
    response = FetchResponse[version].decode(bytes(client.read_frame()), header=True)
    [partition] = response.responses[0].partitions
    return partition


def messages(records: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(magic, offset, key, value) of each message, as kafka-python's consumer reads them."""
    out = []
    memory = MemoryRecords(records)
    while memory.has_next():
        batch = memory.next_batch()
        out.extend((batch.magic, r.offset, r.key, r.value) for r in batch)
    return out


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(("produce_version", "magic"), [(0, 0), (1, 0), (2, 1)])
def test_old_produce_then_old_and_new_fetch(client, produce_version, magic, codec):
    topic = unique_topic("old")
    client.create_topic(topic)
    values = [b"value %d " % i * 20 for i in range(12)]
    for round_ in range(2):
        answer = produce_old(client, produce_version, topic, message_set(magic, codec, values))
        assert answer.error_code == 0
        assert answer.base_offset == 12 * round_

    # kafka-python reads magic 0 LZ4 only with xxhash (test_legacy covers it)
    for fetch_version in range(2 if codec == "lz4" else 0, 4):
        partition = fetch_old(client, fetch_version, topic, offset=5)
        assert partition.error_code == 0
        assert partition.high_watermark == 24
        got = messages(bytes(partition.records))
        want_magic = 0 if fetch_version <= 1 else 1
        keys = [b"k%d" % (i % 12) for i in range(24)]
        # a compressed batch comes whole (its first records too), as Kafka sends it
        start = 0 if codec != "none" else 5
        assert [(m, o, k) for m, o, k, _ in got] == [
            (want_magic, o, keys[o]) for o in range(start, 24)
        ]

    # a current client reads the RecordBatch v2 stored, in the producer's codec
    response = client.request(1, 12, **client.fetch_request_fields([(topic, 0, 0)]))
    [partition] = response.responses[0].partitions
    batches = list(iter_headers(partition.records))
    assert {b.compression for b in batches} == {CODECS[codec]}
    records = [r for _, batch in iter_records(partition.records) for r in batch]
    assert [(r.offset, r.value) for r in records] == list(enumerate(values * 2))
    assert {r.timestamp == -1 for r in records} == {magic == 0}


def test_wrong_crc_in_a_v0_message_set_is_corrupt_message(client):
    topic = unique_topic("crc")
    client.create_topic(topic)
    records = bytearray(message_set(0, "none", [b"a", b"b"]))
    records[-1] ^= 0x55
    answer = produce_old(client, 0, topic, bytes(records))
    assert answer.error_code == ErrorCode.corrupt_message
    assert answer.base_offset == -1
    assert fetch_old(client, 0, topic).high_watermark == 0


def zstd_batch() -> bytes:
    return encode_batch(
        [(b"k", b"v" * 50, (), None)], compression=compression.ZSTD, now_ms=now_ms()
    )


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_below_produce_v7_is_unsupported_compression_type(client, version):
    topic = unique_topic("zstd")
    client.create_topic(topic)
    answer = client.produce(topic, 0, zstd_batch(), version=version)
    assert answer.error_code == ErrorCode.unsupported_compression_type
    assert client.produce(topic, 0, zstd_batch(), version=7).error_code == ErrorCode.none


def test_zstd_topic_below_fetch_v10_is_unsupported_compression_type(client):
    topic = unique_topic("zstd-topic")
    client.create_topic(topic, **{"compression.type": "zstd"})
    assert client.produce(topic, 0, zstd_batch()).error_code == ErrorCode.none
    for version in (4, 9):
        response = client.request(1, version, **client.fetch_request_fields([(topic, 0, 0)]))
        [partition] = response.responses[0].partitions
        assert partition.error_code == ErrorCode.unsupported_compression_type, version
        assert not partition.records
    assert fetch_old(client, 2, topic).error_code == ErrorCode.unsupported_compression_type
    response = client.request(1, 10, **client.fetch_request_fields([(topic, 0, 0)]))
    [partition] = response.responses[0].partitions
    assert partition.error_code == ErrorCode.none
    assert partition.records


def test_zstd_batch_of_a_producer_topic_cannot_be_down_converted(client):
    topic = unique_topic("zstd-batch")
    client.create_topic(topic)
    assert client.produce(topic, 0, zstd_batch(), version=7).error_code == ErrorCode.none
    partition = fetch_old(client, 3, topic)
    assert partition.error_code == ErrorCode.unsupported_compression_type
