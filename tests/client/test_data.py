"""The data client, against a real broker."""

from __future__ import annotations

import pytest

from odradek.client.data import (
    DataClient,
    KafkaClientError,
    OffsetOutOfRange,
    ProduceError,
    TopicPartition,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch, iter_records
from odradek.testing import RunningBroker

T0 = 1_700_000_000_000


def batch(count: int, first: int = 0, ts: int = T0) -> bytes:
    return encode_batch(
        [NewRecord(None, b"v%d" % (first + i), (), ts + first + i) for i in range(count)],
        now_ms=ts,
    )


def offsets_in(records: bytes) -> list[int]:
    return [r.offset for _, rs in iter_records(records) for r in rs]


def test_partitions_and_offsets(client: DataClient, topic: str) -> None:
    assert client.describe([topic])[topic].partitions == 2
    assert topic in client.topics()
    assert client.describe(["no-such-topic-" + topic]) == {}
    tp = TopicPartition(topic, 1)
    assert client.produce({tp: batch(5)}) == {tp: 0}
    assert client.produce({tp: batch(5, first=5)}) == {tp: 5}
    assert client.earliest([tp]) == {tp: 0}
    assert client.latest([tp, TopicPartition(topic, 0)]) == {tp: 10, TopicPartition(topic, 0): 0}
    # By timestamp: the first offset whose timestamp is at least the one asked for.
    assert client.list_offsets([tp], T0 + 7) == {tp: 7}
    assert client.list_offsets([tp], T0 + 10**6) == {tp: -1}


def test_fetch_range_covers_exactly_the_range(client: DataClient, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    for first in range(0, 100, 10):
        client.produce({tp: batch(10, first)})
    seen: list[int] = []
    for fetched in client.fetch_range(tp, 15, 72, max_bytes=300):
        assert fetched.high_watermark == 100
        seen += [o for o in offsets_in(fetched.records) if 15 <= o < 72]
    assert seen == list(range(15, 72))
    # The connection is still usable after the caller stops early.
    for _ in client.fetch_range(tp, 0, 100, max_bytes=300):
        break
    assert client.fetch(tp, 90).next_offset == 100


def test_deleted_records_are_out_of_range(
    broker: RunningBroker, client: DataClient, topic: str
) -> None:
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka.admin import AdminClient

    tp = TopicPartition(topic, 0)
    client.produce({tp: batch(10)})
    client.produce({tp: batch(10, first=10)})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.delete_records([KafkaTopicPartition(topic, 0, 12)]).values():
        future.result(timeout=10)
    assert client.earliest([tp]) == {tp: 12}
    with pytest.raises(OffsetOutOfRange) as caught:
        list(client.fetch_range(tp, 3, 20))
    assert (caught.value.offset, caught.value.log_start_offset) == (3, 12)
    assert caught.value.high_watermark == 20


def test_produce_errors_name_partition_and_code(client: DataClient, topic: str) -> None:
    with pytest.raises(ProduceError) as caught:
        client.produce({TopicPartition(topic, 7): batch(1)})
    assert caught.value.code == ErrorCode.unknown_topic_or_partition
    assert f"{topic}-7" in str(caught.value)
    corrupt = bytearray(batch(2))
    corrupt[-1] ^= 0xFF
    with pytest.raises(ProduceError) as caught:
        client.produce({TopicPartition(topic, 0): bytes(corrupt)})
    assert caught.value.code == ErrorCode.corrupt_message
    assert isinstance(caught.value, KafkaClientError)
    # acks=0 gets no answer and returns nothing; the record is there all the same.
    assert client.produce({TopicPartition(topic, 1): batch(1)}, acks=0) == {}
    assert client.latest([TopicPartition(topic, 1)])[TopicPartition(topic, 1)] == 1


def test_a_client_survives_a_broker_restart(broker: RunningBroker, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    with DataClient(broker.bootstrap) as client:
        client.produce({tp: batch(3)})
        broker.restart()
        # The old connection is dead; safe requests go again on a new one.
        assert client.latest([tp]) == {tp: 3}
        assert offsets_in(client.fetch(tp, 0).records) == [0, 1, 2]


@pytest.mark.parametrize(
    ("records", "error"),
    [(batch(3), 0), (b"", 0), (None, 1), (batch(40) + batch(2)[:-7], 0)],
)
def test_fetch_responses_read_in_place_match_kio(records: bytes | None, error: int) -> None:
    from odradek.client.data import _parse_fetch_v12
    from odradek.protocol import fetch_response
    from odradek.protocol.messages import decode_response, response_schema

    partition = fetch_response.PartitionData(
        3, error, 120, 120, 7, records, len(records) if records else 0
    )
    parts, _ = fetch_response.encode(12, 99, [fetch_response.TopicData("some-topic", [partition])])
    frame = memoryview(b"".join(bytes(p) for p in parts)[4:])
    parsed = _parse_fetch_v12(frame)
    assert parsed is not None
    correlation_id, response = decode_response(response_schema(1, 12), bytes(frame))
    (p,) = response.responses[0].partitions
    assert (parsed.correlation_id, parsed.error, parsed.high_watermark) == (
        correlation_id,
        int(p.error_code),
        int(p.high_watermark),
    )
    assert parsed.log_start_offset == int(p.log_start_offset) == 7
    assert bytes(parsed.records or b"") == bytes(p.records or b"")
    # Two partitions are not the single-partition fetch this path reads: kio takes those.
    two, _ = fetch_response.encode(12, 1, [fetch_response.TopicData("t", [partition, partition])])
    assert _parse_fetch_v12(memoryview(b"".join(bytes(p) for p in two)[4:])) is None


def test_fetch_responses_read_in_place_name_aborted_transactions() -> None:
    from odradek.client.data import AbortedTransaction, _parse_fetch_v12
    from odradek.protocol.messages import build, encode_response, response_schema

    schema = response_schema(1, 12)
    response = build(
        schema,
        {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": 0,
                            "high_watermark": 50,
                            "last_stable_offset": 40,
                            "log_start_offset": 0,
                            "aborted_transactions": [
                                {"producer_id": 7, "first_offset": 3},
                                {"producer_id": 9, "first_offset": 12},
                            ],
                            "preferred_read_replica": -1,
                            "records": batch(4),
                        }
                    ],
                }
            ],
        },
    )
    frame = memoryview(encode_response(5, response)[4:])
    parsed = _parse_fetch_v12(frame)
    assert parsed is not None
    assert (parsed.high_watermark, parsed.last_stable_offset) == (50, 40)
    assert parsed.aborted == (AbortedTransaction(7, 3), AbortedTransaction(9, 12))
    assert bytes(parsed.records or b"") == batch(4)


def _txn_batch(producer_id: int, base_offset: int, count: int) -> bytes:
    return encode_batch(
        [NewRecord(None, b"p%d-%d" % (producer_id, base_offset + i)) for i in range(count)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=base_offset,
        transactional=True,
        now_ms=T0,
    )


def _marker(producer_id: int, offset: int, *, commit: bool) -> bytes:
    import struct

    return encode_batch(
        [NewRecord(struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0))],
        base_offset=offset,
        producer_id=producer_id,
        producer_epoch=0,
        transactional=True,
        control=True,
        now_ms=T0,
    )


def test_aborted_batches_follow_kafkas_consumer_rule() -> None:
    from odradek.client.data import (
        AbortedTransaction,
        FetchedRecords,
        aborted_batches,
        data_batches,
    )
    from odradek.protocol.record_batch import iter_headers

    # Producer 1 aborts, producer 2 commits meanwhile, a plain batch sits between them, then
    # producer 1 commits a second transaction: only producer 1's first transaction is aborted.
    parts = [
        _txn_batch(1, 0, 3),  # aborted
        _txn_batch(2, 3, 2),  # committed
        batch(2, first=5),  # not transactional
        _txn_batch(1, 7, 1),  # aborted
        _marker(1, 8, commit=False),
        _marker(2, 9, commit=True),
        _txn_batch(1, 10, 2),  # producer 1's next transaction: committed
        _marker(1, 12, commit=True),
    ]
    data = b"".join(parts)
    positions = [h.position for h in iter_headers(data)]
    skipped = aborted_batches(data, [AbortedTransaction(1, 0)])
    assert skipped == {positions[0], positions[3]}
    assert aborted_batches(data, []) == frozenset()
    # A fetch starting inside the aborted transaction is told of it all the same.
    tail = b"".join(parts[3:])
    assert aborted_batches(tail, [AbortedTransaction(1, 0)]) == {0}
    # An aborted transaction that begins later takes effect only from its first offset.
    assert aborted_batches(data, [AbortedTransaction(1, 7)]) == {positions[3]}
    # What a read_committed reader keeps: no aborted batch, no marker.
    fetched = FetchedRecords(
        TopicPartition("t", 0), 0, data, 14, 0, 14, 14, (AbortedTransaction(1, 0),)
    )
    kept = [bytes(b) for b in data_batches(fetched)]
    assert kept == [parts[1], parts[2], parts[6]]
