"""Produce then Fetch, called directly: what is appended is what is read back."""

from __future__ import annotations

import asyncio

from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices
from tests.server.conftest import (
    FETCH,
    FETCH_VERSION,
    PRODUCE,
    PRODUCE_VERSION,
    batch_of,
    values_of,
)

from .conftest import HandlerCaller


def _produce(handlers: HandlerCaller, topic: str, records: bytes, acks: int = 1) -> object:
    return handlers.call(
        PRODUCE,
        PRODUCE_VERSION,
        acks=acks,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    )


def _fetch(handlers: HandlerCaller, topic: str, offset: int) -> object:
    response = handlers.call(
        FETCH,
        FETCH_VERSION,
        replica_id=-1,
        max_bytes=1 << 20,
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
    assert response.error_code == ErrorCode.none
    (topic_response,) = response.responses
    (partition,) = topic_response.partitions
    return partition


def test_produced_records_are_fetched(handlers: HandlerCaller, services: BrokerServices) -> None:
    asyncio.run(services.topics.create_topic("log", 1))
    first = _produce(handlers, "log", batch_of(b"a", b"b"))
    (topic,) = first.responses
    (partition,) = topic.partition_responses
    assert (partition.error_code, partition.base_offset) == (ErrorCode.none, 0)
    assert _produce(handlers, "log", batch_of(b"c"), acks=0) is None

    fetched = _fetch(handlers, "log", 0)
    assert fetched.error_code == ErrorCode.none
    assert fetched.high_watermark == 3
    assert values_of(fetched.records) == [b"a", b"b", b"c"]
    assert values_of(_fetch(handlers, "log", 2).records)[-1:] == [b"c"]


def test_unknown_partitions(handlers: HandlerCaller) -> None:
    (topic,) = _produce(handlers, "nowhere", batch_of(b"x")).responses
    assert topic.partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
    assert _fetch(handlers, "nowhere", 0).error_code == ErrorCode.unknown_topic_or_partition
