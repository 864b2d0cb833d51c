"""The transactional producer's control plane against a real broker: commit, abort, offsets in
the transaction, fencing, and what read_committed and read_uncommitted readers see."""

from __future__ import annotations

import time
import uuid

import pytest

from odradek.client.data import (
    READ_COMMITTED,
    DataClient,
    KafkaClientError,
    ProduceError,
    TopicPartition,
    data_batches,
)
from odradek.client.transactions import TransactionalProducer
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, decode_batch, encode_batch

T0 = 1_700_000_000_000
FENCED = {ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch}


def produce(
    client: DataClient, txn: TransactionalProducer, tp: TopicPartition, values: list[bytes]
) -> None:
    txn.add_partitions([tp])
    batch = encode_batch(
        [NewRecord(None, v, (), T0) for v in values],
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch,
        base_sequence=txn.next_sequence(tp, len(values)),
        transactional=True,
        now_ms=T0,
    )
    client.produce({tp: batch}, transactional_id=txn.transactional_id)


def stable(client: DataClient, tp: TopicPartition, deadline_s: float = 20.0) -> int:
    """The partition's end once every transaction on it is ended (markers are written after
    EndTxn answers): the last stable offset, once it reaches the high watermark."""
    committed = DataClient(client.bootstrap[0], isolation_level=READ_COMMITTED)
    try:
        until = time.monotonic() + deadline_s
        while True:
            lso = committed.latest([tp])[tp]
            if lso == client.latest([tp])[tp] or time.monotonic() > until:
                return lso
            time.sleep(0.02)
    finally:
        committed.close()


def read_values(bootstrap: str, tp: TopicPartition, isolation_level: int) -> list[bytes | None]:
    with DataClient(bootstrap, isolation_level=isolation_level) as reader:
        end = reader.latest([tp])[tp]
        return [
            r.value
            for fetched in reader.fetch_range(tp, 0, end)
            for batch in data_batches(fetched)
            for r in decode_batch(batch)
        ]


def new_producer(client: DataClient, transactional_id: str) -> TransactionalProducer:
    txn = TransactionalProducer(client, transactional_id, transaction_timeout_ms=20_000)
    txn.init()
    return txn


def test_committed_rows_and_offsets_appear_together(client: DataClient, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    txn = new_producer(client, f"t-{uuid.uuid4().hex[:8]}")
    assert txn.producer_id >= 0
    txn.begin()
    produce(client, txn, tp, [b"a", b"b"])
    produce(client, txn, tp, [b"c"])
    txn.send_offsets(group, {TopicPartition(topic, 1): (41, "meta")})
    txn.commit()
    assert stable(client, tp) == client.latest([tp])[tp] == 4  # three records and the marker
    assert read_values(client.bootstrap[0], tp, READ_COMMITTED) == [b"a", b"b", b"c"]
    committed = txn.committed(group, [TopicPartition(topic, 1), tp])
    assert {k: (v.offset, v.metadata) for k, v in committed.items()} == {
        TopicPartition(topic, 1): (41, "meta")
    }


def test_aborted_rows_and_offsets_are_invisible_to_read_committed(
    client: DataClient, topic: str
) -> None:
    tp = TopicPartition(topic, 0)
    group = f"g-{uuid.uuid4().hex[:8]}"
    txn = new_producer(client, f"t-{uuid.uuid4().hex[:8]}")
    txn.begin()
    produce(client, txn, tp, [b"gone"])
    txn.send_offsets(group, {tp: (7, "")})
    txn.abort()
    txn.begin()
    produce(client, txn, tp, [b"kept"])
    txn.commit()
    stable(client, tp)
    assert read_values(client.bootstrap[0], tp, READ_COMMITTED) == [b"kept"]
    assert read_values(client.bootstrap[0], tp, 0) == [b"gone", b"kept"]
    assert txn.committed(group, [tp]) == {}


def test_a_new_producer_fences_the_old_and_aborts_its_transaction(
    client: DataClient, topic: str
) -> None:
    tp = TopicPartition(topic, 1)
    transactional_id = f"t-{uuid.uuid4().hex[:8]}"
    zombie = new_producer(client, transactional_id)
    zombie.begin()
    produce(client, zombie, tp, [b"zombie"])
    with DataClient(client.bootstrap[0]) as other:
        successor = new_producer(other, transactional_id)
        assert successor.producer_epoch > zombie.producer_epoch
        successor.begin()
        produce(other, successor, tp, [b"successor"])
        with pytest.raises(ProduceError) as produced:
            produce(client, zombie, tp, [b"late"])
        assert produced.value.code in FENCED
        with pytest.raises(KafkaClientError) as ended:
            zombie.commit()
        assert ended.value.code in FENCED
        successor.commit()
    stable(client, tp)
    assert read_values(client.bootstrap[0], tp, READ_COMMITTED) == [b"successor"]


def test_calls_out_of_order_are_refused_before_any_request(client: DataClient) -> None:
    txn = TransactionalProducer(client, "never-initialised")
    with pytest.raises(RuntimeError, match="init"):
        txn.begin()
    txn.producer_id = 1
    with pytest.raises(RuntimeError, match="begin"):
        txn.commit()
