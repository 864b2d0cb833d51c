"""The leader's side of replication throttling, called directly: a follower outside the ISR of
a throttled partition gets no records while the leader quota is exceeded (its offsets still), an
in-sync one always does, and what is sent for throttled partitions counts against the quota."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import TopicMetadata
from odradek.cluster.replication.fetcher import FetcherConfig
from odradek.cluster.replication.replica_manager import ReplicaManager
from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices
from tests.server.conftest import FETCH, FETCH_VERSION, batch_of, values_of

from .conftest import NODE_ID, HandlerCaller

FOLLOWER = 2


@pytest.fixture
def leader(
    services: BrokerServices, clock: ManualClock
) -> Iterator[tuple[HandlerCaller, ReplicaManager]]:
    """``t-0`` led here with broker 2 as a follower outside the ISR, holding two records."""
    topics = services.topics
    asyncio.run(topics.store.put(TopicMetadata("t", uuid.uuid4(), 1, {}, ((NODE_ID, FOLLOWER),))))
    topics.sync()
    partition = topics.partition("t", 0)
    assert partition is not None
    partition.make_leader(1, (NODE_ID, FOLLOWER), (NODE_ID,), 0)
    partition.append_as_leader(batch_of(b"a", b"b"), 1, clock.time_ms())
    replicas = ReplicaManager(
        NODE_ID,
        topics.store,
        topics.partition,
        lambda *_: None,
        lambda *_: None,
        lambda _: None,
        lambda: None,
        FetcherConfig(NODE_ID),
        clock,
        30_000,
    )
    caller = HandlerCaller(dataclasses.replace(services, replicas=replicas))
    yield caller, replicas
    caller.close()


def _replica_fetch(handlers: HandlerCaller) -> Any:
    response = handlers.call(
        FETCH,
        FETCH_VERSION,
        replica_id=FOLLOWER,
        max_bytes=1 << 20,
        topics=[
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": 1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    )
    assert response.error_code == ErrorCode.none
    ((partition,),) = (t.partitions for t in response.responses)
    assert partition.error_code == ErrorCode.none
    return partition


def test_an_out_of_sync_follower_gets_nothing_past_the_quota(
    leader: tuple[HandlerCaller, ReplicaManager], services: BrokerServices
) -> None:
    handlers, replicas = leader
    quotas = replicas.quotas
    # Two records' batch (77 bytes) over the window's 10 s is more than 5 B/s.
    quotas.set_rates({"leader.replication.throttled.rate": "5"})
    quotas.set_topics({"t": {"leader.replication.throttled.replicas": f"0:{NODE_ID}"}})

    first = _replica_fetch(handlers)
    assert values_of(first.records) == [b"a", b"b"]  # the quota is not exceeded yet
    assert quotas.leader.rate() > 5  # what was sent is recorded

    held = _replica_fetch(handlers)
    assert not held.records  # no records, the offsets still
    assert (held.high_watermark, held.log_start_offset) == (2, 0)

    # In sync, the follower is never held back.
    partition = services.topics.partition("t", 0)
    assert partition is not None
    partition.isr_written((NODE_ID, FOLLOWER), 1, 1)
    assert values_of(_replica_fetch(handlers).records) == [b"a", b"b"]


def test_an_unthrottled_partition_or_rate_is_not_held_back(
    leader: tuple[HandlerCaller, ReplicaManager],
) -> None:
    handlers, replicas = leader
    quotas = replicas.quotas
    quotas.set_rates({"leader.replication.throttled.rate": "100"})
    quotas.leader.record(1_000_000)
    assert values_of(_replica_fetch(handlers).records) == [b"a", b"b"]  # t-0 not throttled
    quotas.set_topics({"t": {"leader.replication.throttled.replicas": "*"}})
    assert not _replica_fetch(handlers).records
    quotas.set_rates({})
    assert values_of(_replica_fetch(handlers).records) == [b"a", b"b"]
