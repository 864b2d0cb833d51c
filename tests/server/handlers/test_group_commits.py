"""Group answers leave once their records are replicated: an OffsetCommit to a coordinator whose
``__consumer_offsets`` partition has a follower in its ISR waits for that follower, and Kafka's
mapping applies when it does not come (COORDINATOR_NOT_AVAILABLE) or leadership moves
(NOT_COORDINATOR)."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.cluster.replication.partition import Partition
from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices

from .conftest import NODE_ID, HandlerCaller

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
FOLLOWER = 2
GROUP = "replicated-group"


def replicated_offsets_partition(services: BrokerServices) -> Partition:
    """The group's offsets partition, now led with a follower in its ISR (as in a cluster)."""
    asyncio.run(services.topics.create_topic("t", 1, 1))
    asyncio.run(services.groups.offsets_topic.ensure())
    index = services.groups.shard.partition_for(GROUP)
    partition = services.groups.offsets_topic.partition(index)
    assert partition is not None
    partition.make_leader(1, (NODE_ID, FOLLOWER), (NODE_ID, FOLLOWER), 1)
    return partition


def commit(handlers: HandlerCaller, offset: int) -> Any:
    response = handlers.call(
        OFFSET_COMMIT,
        8,
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    )
    ((partition,),) = [t.partitions for t in response.topics]
    return partition.error_code


def fetched(handlers: HandlerCaller) -> tuple[Any, Any]:
    response = handlers.call(
        OFFSET_FETCH,
        7,
        group_id=GROUP,
        topics=[{"name": "t", "partition_indexes": [0]}],
        require_stable=False,
    )
    if response.error_code != ErrorCode.none:
        assert not response.topics
        return response.error_code, None
    ((partition,),) = [t.partitions for t in response.topics]
    return response.error_code, partition.committed_offset


def later(handlers: HandlerCaller, action: Any) -> None:
    """Run ``action`` on the handlers' loop once the request in flight is parked."""
    handlers._loop.call_later(0.02, action)


def test_a_commit_is_answered_once_the_follower_has_it(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    partition = replicated_offsets_partition(services)
    later(handlers, lambda: partition.follower_fetched(FOLLOWER, partition.log.log_end_offset))
    assert commit(handlers, 42) == ErrorCode.none
    assert partition.high_watermark == partition.log.log_end_offset == 1
    assert fetched(handlers) == (ErrorCode.none, 42)


def test_a_commit_not_replicated_in_time_is_coordinator_not_available(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    partition = replicated_offsets_partition(services)
    services.groups.commit_timeout_ms = 50
    assert commit(handlers, 7) == ErrorCode.coordinator_not_available
    assert services.purgatory.parked == 0
    # The record stays in the leader's log; once replicated, reads see it.
    later(handlers, lambda: partition.follower_fetched(FOLLOWER, partition.log.log_end_offset))
    assert fetched(handlers) == (ErrorCode.none, 7)


def test_a_commit_whose_partition_changes_leader_is_not_coordinator(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    partition = replicated_offsets_partition(services)

    def lose_leadership() -> None:
        partition.make_follower(FOLLOWER, 2, (NODE_ID, FOLLOWER), (NODE_ID, FOLLOWER))
        services.groups.leadership_changed(partition, False)

    later(handlers, lose_leadership)
    assert commit(handlers, 9) == ErrorCode.not_coordinator
    assert fetched(handlers) == (ErrorCode.not_coordinator, None)
