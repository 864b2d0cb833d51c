"""A full log dir, as clients see it: KAFKA_STORAGE_ERROR for its partitions, nothing else hurt."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices
from odradek.storage import segment as segment_module
from tests.server.conftest import LIST_OFFSETS, METADATA, PRODUCE, PRODUCE_VERSION, batch_of

from .conftest import HandlerCaller
from .test_produce_fetch import _fetch

OFFSET_FOR_LEADER_EPOCH, DESCRIBE_LOG_DIRS = 23, 35


def _produce_code(handlers: HandlerCaller, topic: str, acks: int = 1) -> ErrorCode:
    response = handlers.call(
        PRODUCE,
        PRODUCE_VERSION,
        acks=acks,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch_of(b"v")}]}],
    )
    (topic_response,) = response.responses
    (partition,) = topic_response.partition_responses
    return ErrorCode(partition.error_code)


def _list_offsets_code(handlers: HandlerCaller, topic: str) -> ErrorCode:
    response = handlers.call(
        LIST_OFFSETS,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=[
            {
                "name": topic,
                "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}],
            }
        ],
    )
    (p,) = response.topics[0].partitions
    return ErrorCode(p.error_code)


def test_a_full_disk_answers_kafka_storage_error_and_describe_log_dirs_shows_it(
    handlers: HandlerCaller,
    services: BrokerServices,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asyncio.run(services.topics.create_topic("filled", 1))
    assert _produce_code(handlers, "filled") == ErrorCode.none

    def disk_full(fd: int, data: object, position: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as full:
        full.setattr(segment_module, "pwrite_all", disk_full)
        assert _produce_code(handlers, "filled") == ErrorCode.kafka_storage_error
    # Space or not, the dir stays offline until a restart.
    assert _produce_code(handlers, "filled") == ErrorCode.kafka_storage_error
    assert _fetch(handlers, "filled", 0).error_code == ErrorCode.kafka_storage_error
    assert _fetch(handlers, "filled", 1).error_code == ErrorCode.kafka_storage_error
    assert _list_offsets_code(handlers, "filled") == ErrorCode.kafka_storage_error
    epoch = handlers.call(
        OFFSET_FOR_LEADER_EPOCH,
        4,
        replica_id=-1,
        topics=[
            {
                "topic": "filled",
                "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
            }
        ],
    )
    assert epoch.topics[0].partitions[0].error_code == ErrorCode.kafka_storage_error

    (described,) = handlers.call(DESCRIBE_LOG_DIRS, 4, topics=None).results
    assert described.error_code == ErrorCode.kafka_storage_error
    assert described.log_dir == str(tmp_path.absolute())
    assert list(described.topics) == []
    assert (described.total_bytes, described.usable_bytes) == (-1, -1)

    # A lone broker: no leader for it, as a ZooKeeper-era controller leaves an offline partition.
    metadata = handlers.call(METADATA, 12, topics=[{"name": "filled"}])
    (partition,) = metadata.topics[0].partitions
    assert (partition.leader_id, list(partition.offline_replicas)) == (-1, [1])
    assert partition.error_code == ErrorCode.leader_not_available


def test_describe_log_dirs_lists_a_healthy_dir_as_before(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("fine", 1))
    assert _produce_code(handlers, "fine") == ErrorCode.none
    (described,) = handlers.call(DESCRIBE_LOG_DIRS, 4, topics=None).results
    assert described.error_code == ErrorCode.none
    assert [t.name for t in described.topics] == ["fine"]
