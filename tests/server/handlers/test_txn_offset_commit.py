"""TxnOffsetCommit (28) through its handler, and OffsetFetch's view of what it committed: pending
(UNSTABLE_OFFSET_COMMIT with require_stable, the last committed offset without) until the
transaction's marker, committed after."""

from __future__ import annotations

from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices

from .conftest import HandlerCaller

TXN_OFFSET_COMMIT, OFFSET_COMMIT, OFFSET_FETCH = 28, 8, 9
PID, EPOCH = 9000, 0
GROUP = "txn-group"


@pytest.fixture
def topic(services: BrokerServices) -> str:
    services.topics.create_topic("t", 2, 1)
    return "t"


def txn_commit(
    handlers: HandlerCaller, version: int, offsets: dict[tuple[str, int], int], **fields: Any
) -> dict[tuple[str, int], ErrorCode]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), offset in offsets.items():
        topics.setdefault(name, []).append(
            {"partition_index": index, "committed_offset": offset, "committed_metadata": "m"}
        )
    fields.setdefault("group_id", GROUP)
    response = handlers.call(
        TXN_OFFSET_COMMIT,
        version,
        transactional_id="txn",
        producer_id=PID,
        producer_epoch=EPOCH,
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


def complete(services: BrokerServices, commit: bool) -> None:
    """What WriteTxnMarkers does after appending the marker to the group's partition."""
    index = services.groups.coordinator.partition_for(GROUP)
    services.groups.transaction_completed(index, PID, commit)


@pytest.mark.parametrize("version", [0, 3, 5])
def test_commit_is_pending_until_the_transaction_commits(
    handlers: HandlerCaller, services: BrokerServices, topic: str, version: int
) -> None:
    assert txn_commit(handlers, version, {(topic, 0): 42}) == {(topic, 0): ErrorCode.none}
    assert fetch(handlers, 7, require_stable=True) == {
        0: (-1, ErrorCode.unstable_offset_commit),
        1: (-1, ErrorCode.none),
    }
    assert fetch(handlers, 8, require_stable=True)[0] == (-1, ErrorCode.unstable_offset_commit)
    assert fetch(handlers, 8, require_stable=False)[0] == (-1, ErrorCode.none)
    complete(services, commit=True)
    assert fetch(handlers, 7, require_stable=True)[0] == (42, ErrorCode.none)
    assert fetch(handlers, 9, require_stable=True)[0] == (42, ErrorCode.none)


def test_abort_drops_the_commit(
    handlers: HandlerCaller, services: BrokerServices, topic: str
) -> None:
    txn_commit(handlers, 4, {(topic, 1): 42})
    complete(services, commit=False)
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
