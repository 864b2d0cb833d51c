"""The share state APIs (InitializeShareGroupState 83, ReadShareGroupState 84,
WriteShareGroupState 85, DeleteShareGroupState 86, ReadShareGroupStateSummary 87) and
FindCoordinator's share key type: bytes a broker would receive, decoded."""

from __future__ import annotations

import uuid
from typing import Any

from odradek.coordinator.share.records import StateKey
from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices

from .conftest import HandlerCaller

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
FIND_COORDINATOR = 10
TOPIC = uuid.UUID(int=99)


def one(handlers: HandlerCaller, api_key: int, **partition: Any) -> Any:
    response = handlers.call(
        api_key,
        0,
        group_id="g",
        topics=[{"topic_id": TOPIC, "partitions": [{"partition": 0, **partition}]}],
    )
    ((result,),) = [r.partitions for r in response.results]
    return result


def test_initialize_write_read_summary_delete(handlers: HandlerCaller) -> None:
    assert one(handlers, READ, leader_epoch=0).start_offset == -1
    assert one(handlers, INITIALIZE, state_epoch=1, start_offset=5).error_code == ErrorCode.none
    written = one(
        handlers,
        WRITE,
        state_epoch=1,
        leader_epoch=3,
        start_offset=7,
        state_batches=[
            {"first_offset": 7, "last_offset": 8, "delivery_state": 0, "delivery_count": 2}
        ],
    )
    assert written.error_code == ErrorCode.none
    read = one(handlers, READ, leader_epoch=3)
    assert (read.error_code, read.state_epoch, read.start_offset) == (ErrorCode.none, 1, 7)
    assert [(b.first_offset, b.last_offset, b.delivery_count) for b in read.state_batches] == [
        (7, 8, 2)
    ]
    assert one(handlers, READ, leader_epoch=2).error_code == ErrorCode.fenced_leader_epoch
    summary = one(handlers, SUMMARY, leader_epoch=0)
    assert (summary.leader_epoch, summary.start_offset) == (3, 7)
    assert one(handlers, DELETE).error_code == ErrorCode.none
    assert one(handlers, READ, leader_epoch=0).start_offset == -1


def test_a_bad_state_batch_is_invalid_request(handlers: HandlerCaller) -> None:
    written = one(
        handlers,
        WRITE,
        state_epoch=0,
        leader_epoch=0,
        start_offset=0,
        state_batches=[
            {"first_offset": 9, "last_offset": 2, "delivery_state": 0, "delivery_count": 1}
        ],
    )
    assert written.error_code == ErrorCode.invalid_request


def test_find_coordinator_for_a_share_partition_key(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    key = StateKey("g", TOPIC, 0).coordinator_key()
    response = handlers.call(
        FIND_COORDINATOR, 6, key_type=2, coordinator_keys=[key, "not-a-share-key"]
    )
    found, bad = response.coordinators
    assert found.error_code == ErrorCode.none
    assert found.node_id == services.config.node_id
    assert bad.error_code == ErrorCode.invalid_request
    assert services.topics.topic("__share_group_state") is not None
