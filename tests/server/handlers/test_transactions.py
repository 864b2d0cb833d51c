"""The transaction handlers called directly on a lone broker's services: InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, Describe/ListTransactions, and
Kafka's answers to bad requests, which leave other transactions as they were."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import encode_batch
from odradek.server.services import BrokerServices
from tests.server.conftest import PRODUCE, PRODUCE_VERSION, now_ms

from .conftest import HandlerCaller

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 22, 24, 25, 26
DESCRIBE_TXNS, LIST_TXNS = 65, 66


def _init(handlers: HandlerCaller, tid: str, version: int = 5) -> Any:
    return handlers.call(
        INIT_PRODUCER_ID,
        version,
        transactional_id=tid,
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )


def _add(
    handlers: HandlerCaller,
    tid: str,
    pid: int,
    epoch: int,
    topics: dict[str, list[int]],
    version: int = 3,
) -> dict[tuple[str, int], ErrorCode]:
    response = handlers.call(
        ADD_PARTITIONS,
        version,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
    )
    return {
        (t.name, int(p.partition_index)): p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def _end(
    handlers: HandlerCaller, tid: str, pid: int, epoch: int, commit: bool, version: int = 4
) -> ErrorCode:
    response = handlers.call(
        END_TXN,
        version,
        transactional_id=tid,
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )
    return ErrorCode(response.error_code)


def test_init_producer_id_fences_by_epoch(handlers: HandlerCaller) -> None:
    first = _init(handlers, "tx")
    second = _init(handlers, "tx")
    assert (first.error_code, second.error_code) == (ErrorCode.none, ErrorCode.none)
    assert second.producer_id == first.producer_id
    assert second.producer_epoch == first.producer_epoch + 1
    assert _init(handlers, "other").producer_id != first.producer_id


def test_partitions_join_and_describe_shows_them(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("orders", 2))
    init = _init(handlers, "tx")
    added = _add(handlers, "tx", init.producer_id, init.producer_epoch, {"orders": [0, 1]})
    assert added == {("orders", 0): ErrorCode.none, ("orders", 1): ErrorCode.none}
    offsets = handlers.call(
        ADD_OFFSETS,
        4,
        transactional_id="tx",
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        group_id="g",
    )
    assert offsets.error_code == ErrorCode.none
    (state,) = handlers.call(DESCRIBE_TXNS, 0, transactional_ids=["tx"]).transaction_states
    assert (state.error_code, state.transaction_state, state.producer_id) == (
        ErrorCode.none,
        "Ongoing",
        init.producer_id,
    )
    described = {(t.topic, int(p)) for t in state.topics for p in t.partitions}
    group_partition = services.groups.shard.partition_for("g")
    assert described == {("orders", 0), ("orders", 1), ("__consumer_offsets", group_partition)}
    listed = handlers.call(
        LIST_TXNS, 1, state_filters=["Ongoing", "Bogus"], producer_id_filters=[], duration_filter=-1
    )
    assert [t.transactional_id for t in listed.transaction_states] == ["tx"]
    assert list(listed.unknown_state_filters) == ["Bogus"]
    (missing,) = handlers.call(DESCRIBE_TXNS, 0, transactional_ids=["nope"]).transaction_states
    assert missing.error_code == ErrorCode.transactional_id_not_found


def test_bad_requests_get_kafkas_errors_and_change_nothing(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("orders", 1))
    init = _init(handlers, "tx")
    pid, epoch = init.producer_id, init.producer_epoch
    bystander = _init(handlers, "bystander")
    assert _add(
        handlers, "bystander", bystander.producer_id, bystander.producer_epoch, {"orders": [0]}
    ) == {("orders", 0): ErrorCode.none}

    # EndTxn for a transactional id nobody initialised, or with another producer id.
    assert _end(handlers, "unknown", pid, epoch, True) == ErrorCode.invalid_producer_id_mapping
    assert _end(handlers, "tx", pid + 100, epoch, True) == ErrorCode.invalid_producer_id_mapping
    # A stale epoch: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions before KIP-588.
    _init(handlers, "tx")
    assert _end(handlers, "tx", pid, epoch, True) == ErrorCode.producer_fenced
    assert _end(handlers, "tx", pid, epoch, True, version=1) == ErrorCode.invalid_producer_epoch
    assert _add(handlers, "tx", pid, epoch, {"orders": [0]}) == {
        ("orders", 0): ErrorCode.producer_fenced
    }
    # No transaction is running: nothing to end.
    assert _end(handlers, "tx", pid, epoch + 1, False) == ErrorCode.invalid_txn_state
    # Unknown topics and partitions: those refused, the others of the request not attempted.
    assert _add(handlers, "tx", pid, epoch + 1, {"orders": [0, 7], "nosuch": [0]}) == {
        ("orders", 0): ErrorCode.operation_not_attempted,
        ("orders", 7): ErrorCode.unknown_topic_or_partition,
        ("nosuch", 0): ErrorCode.unknown_topic_or_partition,
    }
    # A transaction timeout above transaction.max.timeout.ms.
    too_long = handlers.call(
        INIT_PRODUCER_ID,
        5,
        transactional_id="tx",
        transaction_timeout=900_001,
        producer_id=-1,
        producer_epoch=-1,
    )
    assert too_long.error_code == ErrorCode.invalid_transaction_timeout

    # The other transaction is untouched, and the fenced one works with its new epoch.
    (state,) = handlers.call(DESCRIBE_TXNS, 0, transactional_ids=["bystander"]).transaction_states
    assert (state.transaction_state, state.producer_epoch) == ("Ongoing", bystander.producer_epoch)
    assert _add(handlers, "tx", pid, epoch + 1, {"orders": [0]}) == {("orders", 0): ErrorCode.none}


def _txn_produce(
    handlers: HandlerCaller,
    tid: str,
    pid: int,
    epoch: int,
    partitions: list[int],
    version: int = PRODUCE_VERSION,
) -> dict[int, ErrorCode]:
    batch = encode_batch(
        [(None, b"v", (), None)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
        now_ms=now_ms(),
    )
    response = handlers.call(
        PRODUCE,
        version,
        transactional_id=tid,
        acks=1,
        timeout=5_000,
        topic_data=[
            {
                "name": "orders",
                "partition_data": [{"index": p, "records": batch} for p in partitions],
            }
        ],
    )
    return {int(p.index): p.error_code for p in response.responses[0].partition_responses}


def test_transactional_produce_only_to_partitions_of_the_transaction(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    # KIP-890: a partition the producer never added is refused before anything is written.
    asyncio.run(services.topics.create_topic("orders", 2))
    init = _init(handlers, "tx")
    pid, epoch = init.producer_id, init.producer_epoch
    assert _txn_produce(handlers, "tx", pid, epoch, [0]) == {0: ErrorCode.invalid_txn_state}
    _add(handlers, "tx", pid, epoch, {"orders": [0]})
    assert _txn_produce(handlers, "tx", pid, epoch, [0, 1]) == {
        0: ErrorCode.none,
        1: ErrorCode.invalid_txn_state,
    }
    partition = services.topics.partition("orders", 1)
    assert partition is not None and partition.log.log_end_offset == 0
    # The transaction goes on in the partition it added.
    assert services.topics.partition("orders", 0).has_ongoing_transaction(pid, epoch)  # type: ignore[union-attr]


def test_transaction_version_2_adds_by_producing_and_bumps_the_epoch_at_the_end(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    # Produce v12 (a transaction version 2 producer) adds the partition itself: no
    # AddPartitionsToTxn, and no refusal whatever transaction.partition.verification.enable says.
    asyncio.run(services.topics.create_topic("orders", 2))
    init = _init(handlers, "tx")
    pid, epoch = init.producer_id, init.producer_epoch
    assert _txn_produce(handlers, "tx", pid, epoch, [1], version=12) == {1: ErrorCode.none}
    metadata = services.transactions.coordinator.metadata("tx")
    assert metadata is not None and metadata.partitions == {("orders", 1)}
    response = handlers.call(
        END_TXN, 5, transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True
    )
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.none,
        pid,
        epoch + 1,
    )
    handlers.run(services.transactions.stop())  # the markers it sent meanwhile
