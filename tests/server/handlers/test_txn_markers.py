"""WriteTxnMarkers, read_committed Fetch and ListOffsets, DescribeProducers, called directly:
transactional batches are produced by hand (the transaction coordinator is not involved)."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch
from odradek.server.services import BrokerServices
from tests.server.conftest import (
    FETCH,
    FETCH_VERSION,
    LIST_OFFSETS,
    PRODUCE,
    PRODUCE_VERSION,
    now_ms,
    values_of,
)

from .conftest import HandlerCaller

WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = 27, 61
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def _txn_batch(producer_id: int, sequence: int, *values: bytes, epoch: int = 0) -> bytes:
    return encode_batch(
        [(None, v, (), None) for v in values],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=True,
        now_ms=now_ms(),
    )


def _produce(handlers: HandlerCaller, topic: str, records: bytes) -> Any:
    response = handlers.call(
        PRODUCE,
        PRODUCE_VERSION,
        acks=1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )
    (answer,) = response.responses
    (partition,) = answer.partition_responses
    return partition


def _markers(
    handlers: HandlerCaller,
    producer_id: int,
    commit: bool,
    partitions: dict[str, list[int]],
    *,
    epoch: int = 0,
    coordinator_epoch: int = 0,
    version: int = 1,
) -> dict[tuple[str, int], int]:
    response = handlers.call(
        WRITE_TXN_MARKERS,
        version,
        markers=[
            {
                "producer_id": producer_id,
                "producer_epoch": epoch,
                "transaction_result": commit,
                "topics": [
                    {"name": name, "partition_indexes": indexes}
                    for name, indexes in partitions.items()
                ],
                "coordinator_epoch": coordinator_epoch,
            }
        ],
    )
    (marker,) = response.markers
    assert marker.producer_id == producer_id
    return {
        (topic.name, int(p.partition_index)): int(p.error_code)
        for topic in marker.topics
        for p in topic.partitions
    }


def _fetch(
    handlers: HandlerCaller, topic: str, offset: int, isolation: int, version: int = FETCH_VERSION
) -> Any:
    response = handlers.call(
        FETCH,
        version,
        replica_id=-1,
        max_bytes=1 << 20,
        isolation_level=isolation,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    )
    (topic_response,) = response.responses
    (partition,) = topic_response.partitions
    return partition


def _latest(handlers: HandlerCaller, topic: str, isolation: int) -> int:
    response = handlers.call(
        LIST_OFFSETS,
        8,
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            {
                "name": topic,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
    )
    (partition,) = response.topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return int(partition.offset)


def test_read_committed_stops_at_an_open_transaction_and_skips_an_aborted_one(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("txn", 1))
    assert _produce(handlers, "txn", _txn_batch(7, 0, b"a1", b"a2")).base_offset == 0
    assert _produce(handlers, "txn", _txn_batch(8, 0, b"c1")).base_offset == 2

    open_fetch = _fetch(handlers, "txn", 0, READ_COMMITTED)
    assert (open_fetch.high_watermark, open_fetch.last_stable_offset) == (3, 0)
    assert values_of(open_fetch.records) == []
    assert _latest(handlers, "txn", READ_COMMITTED) == 0
    assert _latest(handlers, "txn", READ_UNCOMMITTED) == 3

    assert _markers(handlers, 7, False, {"txn": [0]}) == {("txn", 0): ErrorCode.none}
    assert _markers(handlers, 8, True, {"txn": [0]}) == {("txn", 0): ErrorCode.none}

    committed = _fetch(handlers, "txn", 0, READ_COMMITTED)
    assert committed.last_stable_offset == committed.high_watermark == 5
    # Every batch comes, the client drops the aborted one by the list, the markers by type.
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(7, 0)]
    assert values_of(committed.records)[:3] == [b"a1", b"a2", b"c1"]
    assert _latest(handlers, "txn", READ_COMMITTED) == 5
    for version in (4, 11):  # not flexible: the aborted list as a classic array
        older = _fetch(handlers, "txn", 0, READ_COMMITTED, version)
        assert [(a.producer_id, a.first_offset) for a in older.aborted_transactions] == [(7, 0)]
        assert values_of(older.records)[:3] == [b"a1", b"a2", b"c1"]
    uncommitted = _fetch(handlers, "txn", 0, READ_UNCOMMITTED)
    assert uncommitted.last_stable_offset == 5
    assert not uncommitted.aborted_transactions


def test_markers_with_stale_epochs_or_for_unknown_partitions_fail_alone(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("txn", 2))
    _produce(handlers, "txn", _txn_batch(7, 0, b"x", epoch=3))
    codes = _markers(
        handlers, 7, True, {"txn": [0, 1, 5], "missing": [0]}, epoch=3, coordinator_epoch=2
    )
    assert codes == {
        ("txn", 0): ErrorCode.none,
        ("txn", 1): ErrorCode.none,  # no transaction there: appended anyway, as Kafka does
        ("txn", 5): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    stale_epoch = _markers(handlers, 7, False, {"txn": [0]}, epoch=2, coordinator_epoch=2)
    assert stale_epoch == {("txn", 0): ErrorCode.invalid_producer_epoch}
    stale_coordinator = _markers(handlers, 7, False, {"txn": [0]}, epoch=3, coordinator_epoch=1)
    assert stale_coordinator == {("txn", 0): ErrorCode.transaction_coordinator_fenced}
    assert _markers(handlers, 7, False, {"txn": [0]}, epoch=3, coordinator_epoch=2, version=2) == {
        ("txn", 0): ErrorCode.none
    }


def test_a_plain_batch_in_a_transaction_is_invalid_txn_state(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("txn", 1))
    _produce(handlers, "txn", _txn_batch(7, 0, b"x"))
    plain = encode_batch(
        [(None, b"y", (), None)], producer_id=7, producer_epoch=0, base_sequence=1, now_ms=now_ms()
    )
    assert _produce(handlers, "txn", plain).error_code == ErrorCode.invalid_txn_state
    partition = services.topics.partition("txn", 0)
    assert partition is not None and partition.has_ongoing_transaction(7, 0)


def test_clients_may_not_produce_control_batches(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    from odradek.protocol.control import encode_end_txn_marker

    asyncio.run(services.topics.create_topic("txn", 1))
    forged = encode_end_txn_marker(7, 0, 0, commit=True, now_ms=now_ms())
    assert _produce(handlers, "txn", forged).error_code == ErrorCode.invalid_record


def test_describe_producers(handlers: HandlerCaller, services: BrokerServices) -> None:
    asyncio.run(services.topics.create_topic("txn", 1))
    _produce(handlers, "txn", _txn_batch(7, 0, b"x", b"y", epoch=2))
    response = handlers.call(
        DESCRIBE_PRODUCERS,
        0,
        topics=[
            {"name": "txn", "partition_indexes": [0, 3]},
            {"name": "nope", "partition_indexes": [0]},
        ],
    )
    by_topic = {t.name: t.partitions for t in response.topics}
    known, unknown = by_topic["txn"]
    assert known.error_code == ErrorCode.none
    (producer,) = known.active_producers
    assert (producer.producer_id, producer.producer_epoch, producer.last_sequence) == (7, 2, 1)
    assert (producer.coordinator_epoch, producer.current_txn_start_offset) == (-1, 0)
    assert producer.last_timestamp > 0
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert by_topic["nope"][0].error_code == ErrorCode.unknown_topic_or_partition
