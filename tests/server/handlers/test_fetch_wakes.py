"""A parked Fetch on its wakes, called through the handler: a wake compares offsets (Kafka's
DelayedFetch), the segments are read once when it completes, and the answer holds what came."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from odradek.cluster.replication.partition import Partition
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build, request_schema
from odradek.server.registry import HANDLERS
from odradek.server.services import BrokerServices
from tests.server.conftest import FETCH, FETCH_VERSION, batch_of, values_of

from .conftest import HandlerCaller


def fetch_request(topic: str, min_bytes: int, partitions: int = 3) -> Any:
    return build(
        request_schema(FETCH, FETCH_VERSION),
        replica_id=-1,
        max_wait=datetime.timedelta(seconds=30),
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": index,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                    for index in range(partitions)
                ],
            }
        ],
    )


def test_a_wake_compares_offsets_and_the_segments_are_read_once_at_completion(
    handlers: HandlerCaller, services: BrokerServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(services.topics.create_topic("waits", 3))
    p0, p2 = services.topics.partition("waits", 0), services.topics.partition("waits", 2)
    assert p0 is not None and p2 is not None
    now = services.clock.time_ms()
    p0.append_as_leader(batch_of(b"small"), 1, now)
    reads: list[int] = []
    read = Partition.read

    def counted(self: Partition, *args: Any, **kwargs: Any) -> Any:
        reads.append(self.index)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(Partition, "read", counted)
    big = b"x" * 4000

    async def scenario() -> Any:
        ctx = handlers.context(FETCH, FETCH_VERSION)
        answer = asyncio.ensure_future(HANDLERS[FETCH].fn(ctx, fetch_request("waits", 3000)))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not answer.done()  # 'small' is below min_bytes: parked
        assert reads == [0]  # 1 and 2 are at their end: nothing to read there
        p2.wake_all()  # a wake that moved nothing
        for _ in range(5):
            await asyncio.sleep(0)
        assert not answer.done()
        assert reads == [0]  # compared, not read again
        p2.append_as_leader(batch_of(big), 1, now)  # counted from its append's size
        return handlers.decode(ctx, await asyncio.wait_for(answer, 10))

    response = handlers._loop.run_until_complete(scenario())
    assert reads == [0, 0, 2]  # the answer's reads, once each
    (topic,) = response.responses
    by_index = {p.partition_index: p for p in topic.partitions}
    assert values_of(by_index[0].records) == [b"small"]
    assert values_of(by_index[2].records) == [big]
    assert all(p.error_code == ErrorCode.none for p in topic.partitions)
    assert not by_index[1].records


def test_the_answer_after_a_wake_holds_what_came(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("arrivals", 2))
    p1 = services.topics.partition("arrivals", 1)
    assert p1 is not None
    now = services.clock.time_ms()

    async def produce_soon() -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        p1.append_as_leader(batch_of(b"late"), 1, now)

    loop = handlers._loop
    task = loop.create_task(produce_soon())
    response = handlers.call_request(FETCH, FETCH_VERSION, fetch_request("arrivals", 1, 2))
    assert task.done()
    (topic,) = response.responses
    by_index = {p.partition_index: p for p in topic.partitions}
    assert values_of(by_index[1].records) == [b"late"]
    assert by_index[1].high_watermark == 1
    assert not by_index[0].records
