"""TxnOffsetCommit (28) through its handler, and OffsetFetch's view of what it committed: pending
(UNSTABLE_OFFSET_COMMIT with require_stable, the last committed offset without) until the
transaction's marker, committed after."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices

from .conftest import HandlerCaller

TXN_OFFSET_COMMIT, OFFSET_COMMIT, OFFSET_FETCH = 28, 8, 9
INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN = 22, 25
GROUP = "txn-group"


@pytest.fixture
def topic(services: BrokerServices) -> str:
    asyncio.run(services.topics.create_topic("t", 2, 1))
    return "t"


@pytest.fixture(autouse=True)
def producer(handlers: HandlerCaller) -> tuple[int, int]:
    """Producer "txn" in a transaction that holds GROUP's offsets (InitProducerId and
    AddOffsetsToTxn at the transaction coordinator), as a client's send_offsets_to_transaction
    begins."""
    init = handlers.call(
        INIT_PRODUCER_ID,
        5,
        transactional_id="txn",
        transaction_timeout=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    added = handlers.call(
        ADD_OFFSETS_TO_TXN,
        4,
        transactional_id="txn",
        producer_id=init.producer_id,
        producer_epoch=init.producer_epoch,
        group_id=GROUP,
    )
    assert (init.error_code, added.error_code) == (ErrorCode.none, ErrorCode.none)
    handlers.txn_producer = (int(init.producer_id), int(init.producer_epoch))  # type: ignore[attr-defined]
    return handlers.txn_producer  # type: ignore[attr-defined,no-any-return]


def txn_commit(
    handlers: HandlerCaller, version: int, offsets: dict[tuple[str, int], int], **fields: Any
) -> dict[tuple[str, int], ErrorCode]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), offset in offsets.items():
        topics.setdefault(name, []).append(
            {"partition_index": index, "committed_offset": offset, "committed_metadata": "m"}
        )
    fields.setdefault("group_id", GROUP)
    pid, epoch = handlers.txn_producer  # type: ignore[attr-defined]
    fields.setdefault("producer_id", pid)
    fields.setdefault("producer_epoch", epoch)
    response = handlers.call(
        TXN_OFFSET_COMMIT,
        version,
        transactional_id="txn",
        topics=[{"name": name, "partitions": parts} for name, parts in topics.items()],
        **fields,
    )
    return {
        (t.name, int(p.partition_index)): p.error_code
        for t in response.topics
        for p in t.partitions
    }


def fetch(handlers: HandlerCaller, version: int, require_stable: bool) -> dict[int, Any]:
    if version >= 8:
        response = handlers.call(
            OFFSET_FETCH,
            version,
            groups=[{"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0, 1]}]}],
            require_stable=require_stable,
        )
        ((group,),) = [response.groups]
        topics = group.topics
    else:
        response = handlers.call(
            OFFSET_FETCH,
            version,
            group_id=GROUP,
            topics=[{"name": "t", "partition_indexes": [0, 1]}],
            require_stable=require_stable,
        )
        topics = response.topics
    ((t,),) = [topics]
    return {int(p.partition_index): (int(p.committed_offset), p.error_code) for p in t.partitions}


def complete(services: BrokerServices, producer: tuple[int, int], commit: bool) -> None:
    """What WriteTxnMarkers does after appending the marker to the group's partition."""
    index = services.groups.shard.partition_for(GROUP)
    services.groups.transaction_completed(index, producer[0], commit)


@pytest.mark.parametrize("version", [0, 3, 4])
def test_commit_is_pending_until_the_transaction_commits(
    handlers: HandlerCaller,
    services: BrokerServices,
    topic: str,
    version: int,
    producer: tuple[int, int],
) -> None:
    assert txn_commit(handlers, version, {(topic, 0): 42}) == {(topic, 0): ErrorCode.none}
    assert fetch(handlers, 7, require_stable=True) == {
        0: (-1, ErrorCode.unstable_offset_commit),
        1: (-1, ErrorCode.none),
    }
    assert fetch(handlers, 8, require_stable=True)[0] == (-1, ErrorCode.unstable_offset_commit)
    assert fetch(handlers, 8, require_stable=False)[0] == (-1, ErrorCode.none)
    complete(services, producer, commit=True)
    assert fetch(handlers, 7, require_stable=True)[0] == (42, ErrorCode.none)
    assert fetch(handlers, 9, require_stable=True)[0] == (42, ErrorCode.none)


def test_abort_drops_the_commit(
    handlers: HandlerCaller, services: BrokerServices, topic: str, producer: tuple[int, int]
) -> None:
    txn_commit(handlers, 4, {(topic, 1): 42})
    complete(services, producer, commit=False)
    assert fetch(handlers, 7, require_stable=True)[1] == (-1, ErrorCode.none)


def test_unknown_partitions_and_empty_group(handlers: HandlerCaller, topic: str) -> None:
    result = txn_commit(handlers, 3, {(topic, 0): 1, (topic, 9): 1, ("nope", 0): 1})
    assert result == {
        (topic, 0): ErrorCode.none,
        (topic, 9): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }
    assert txn_commit(handlers, 3, {(topic, 0): 1}, group_id="") == {
        (topic, 0): ErrorCode.invalid_group_id
    }


def test_member_fields_of_v3(handlers: HandlerCaller, topic: str) -> None:
    # No such group, but a generation: ILLEGAL_GENERATION, as Kafka.
    result = txn_commit(handlers, 3, {(topic, 0): 1}, generation_id=4, member_id="m-1")
    assert result == {(topic, 0): ErrorCode.illegal_generation}


@pytest.mark.parametrize(
    ("version", "expected"),
    [(3, ErrorCode.invalid_txn_state), (4, ErrorCode.transaction_abortable)],
)
def test_a_group_never_added_to_the_transaction_is_refused(
    handlers: HandlerCaller, topic: str, version: int, expected: ErrorCode
) -> None:
    # KIP-890's verification: only GROUP's partition was added (AddOffsetsToTxn).
    other = next(
        f"g{i}"
        for i in range(100)
        if partition_of(handlers, f"g{i}") != partition_of(handlers, GROUP)
    )
    assert txn_commit(handlers, version, {(topic, 0): 5}, group_id=other) == {(topic, 0): expected}
    # A stale epoch is INVALID_PRODUCER_EPOCH; the added group still commits.
    _, epoch = handlers.txn_producer  # type: ignore[attr-defined]
    assert txn_commit(
        handlers, version, {(topic, 0): 5}, producer_epoch=epoch - 1 if epoch else epoch + 5
    ) == {(topic, 0): ErrorCode.invalid_producer_epoch}
    assert txn_commit(handlers, version, {(topic, 0): 5}) == {(topic, 0): ErrorCode.none}


def partition_of(handlers: HandlerCaller, group: str) -> int:
    return handlers.services.groups.shard.partition_for(group)
