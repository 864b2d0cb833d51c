"""The coordinator inside a cluster broker: offsets partitions loaded and unloaded as leadership
moves, and answers held until the high watermark covers them — on real logs, no sockets."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.runtime import CoordinatorContext
from odradek.coordinator.group import records as rec
from odradek.coordinator.group.messages import (
    CommitRequest,
    JoinRequest,
    JoinResult,
    OffsetCommit,
    Protocol,
    SyncRequest,
    SyncResult,
)
from odradek.coordinator.group.runtime import OFFSETS_TOPIC, GroupCoordinatorRuntime
from odradek.protocol.errors import ErrorCode
from odradek.server.purgatory import Purgatory
from odradek.storage import LogManager

LOCAL, FOLLOWER = 1, 2
PARTITIONS = 2
GROUP = "g"  # in partition 1 of 2
OTHER = "h"  # in partition 0 of 2


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[GroupCoordinatorRuntime]:
    """A cluster broker's runtime (it leads nothing by itself) with ``__consumer_offsets``
    hosted here, not yet led."""
    clock = ManualClock(1_700_000_000_000)
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path),
            "node.id": str(LOCAL),
            "offsets.topic.num.partitions": str(PARTITIONS),
        }
    )
    logs = LogManager(config.log_dirs, clock)
    store = LocalMetadataStore(config.log_dirs[0], node_id=LOCAL)
    topics = TopicManager(config, store, logs, clock, leads_alone=False)
    topics.open()
    runtime = GroupCoordinatorRuntime(
        CoordinatorContext(config, topics, clock, Purgatory().replicated)
    )
    asyncio.run(runtime.offsets_topic.ensure())
    yield runtime
    runtime.shard.shutdown()
    logs.close()


def offsets_partition(runtime: GroupCoordinatorRuntime, index: int) -> Partition:
    partition = runtime.offsets_topic.partition(index)
    assert partition is not None
    return partition


def commit(runtime: GroupCoordinatorRuntime, group: str, offset: int) -> ErrorCode:
    request = CommitRequest(group, -1, "", None, (OffsetCommit("t", 0, offset),))
    results = runtime.perform(
        lambda coordinator: coordinator.offsets.commit_offsets(request)
    ).response
    return results[("t", 0)]


def committed_offset(runtime: GroupCoordinatorRuntime, group: str) -> int | None:
    fetched = runtime.shard.offsets.fetch_offsets(group, [("t", 0)])
    assert fetched.error == ErrorCode.none, fetched
    ((_, found),) = fetched.offsets
    return None if found is None else found.offset


def lead(runtime: GroupCoordinatorRuntime, partition: Partition, epoch: int) -> None:
    partition.make_leader(epoch, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER), epoch)
    runtime.leadership_changed(partition, True)


async def loaded(runtime: GroupCoordinatorRuntime) -> None:
    for _ in range(100):
        if not runtime.shard.loading_in_progress:
            return
        await asyncio.sleep(0)
    raise AssertionError("the load did not finish")


def test_groups_follow_the_leadership_of_their_partition(
    runtime: GroupCoordinatorRuntime,
) -> None:
    assert rec.partition_for(GROUP, PARTITIONS) == 1
    assert rec.partition_for(OTHER, PARTITIONS) == 0
    p1 = offsets_partition(runtime, 1)

    async def scenario() -> None:
        # Nothing is led yet: every group belongs to another coordinator.
        assert commit(runtime, GROUP, 1) == ErrorCode.not_coordinator
        lead(runtime, p1, 1)
        assert commit(runtime, GROUP, 1) == ErrorCode.coordinator_load_in_progress
        await loaded(runtime)
        assert commit(runtime, GROUP, 5) == ErrorCode.none
        assert commit(runtime, OTHER, 5) == ErrorCode.not_coordinator

        # The answer waits for the follower to have the commit.
        point = runtime.commit_point(GROUP)
        assert point.partition is p1 and point.offset == p1.log.log_end_offset == 1
        assert point.outcome() is None
        p1.follower_fetched(FOLLOWER, 1)
        assert p1.high_watermark == 1
        assert point.outcome() == ErrorCode.none

        # A commit not replicated when leadership moves: its answer is NOT_COORDINATOR, and
        # the group is no longer served here.
        assert commit(runtime, GROUP, 9) == ErrorCode.none
        waiting = runtime.commit_point(GROUP)
        lead_again_epoch = 3
        p1.make_follower(FOLLOWER, 2, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER))
        runtime.leadership_changed(p1, False)
        assert waiting.outcome() == ErrorCode.not_coordinator
        assert commit(runtime, GROUP, 10) == ErrorCode.not_coordinator
        assert runtime.commit_point(GROUP).partition is None

        # Leading again: loaded up to the log end, past the high watermark (as Kafka).
        assert p1.high_watermark == 1 < p1.log.log_end_offset == 2
        lead(runtime, p1, lead_again_epoch)
        runtime.leadership_changed(p1, True)  # told twice: loaded once
        await loaded(runtime)
        assert committed_offset(runtime, GROUP) == 9

    asyncio.run(scenario())


def test_partitions_led_at_start_are_loaded_at_once(runtime: GroupCoordinatorRuntime) -> None:
    p0, p1 = offsets_partition(runtime, 0), offsets_partition(runtime, 1)

    async def scenario() -> None:
        lead(runtime, p0, 1)
        await loaded(runtime)
        assert commit(runtime, OTHER, 4) == ErrorCode.none
        runtime.leadership_changed(p0, False)
        p0.make_leader(2, (LOCAL,), (LOCAL,), 2)
        listeners: list[object] = []
        runtime.follow(listeners)  # type: ignore[arg-type]
        assert listeners == [runtime.leadership_changed]
        # No wait: the broker is not serving yet.
        assert not runtime.shard.loading_in_progress
        assert committed_offset(runtime, OTHER) == 4
        assert runtime.shard.owned == {0}
        assert p1.is_leader is False
        assert commit(runtime, GROUP, 1) == ErrorCode.not_coordinator

    asyncio.run(scenario())


def test_a_lone_broker_serves_every_group_without_waiting(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": str(LOCAL)})
    logs = LogManager(config.log_dirs, clock)
    store = LocalMetadataStore(config.log_dirs[0], node_id=LOCAL)
    topics = TopicManager(config, store, logs, clock)
    topics.open()
    runtime = GroupCoordinatorRuntime(
        CoordinatorContext(config, topics, clock, Purgatory().replicated)
    )
    runtime.load()
    try:
        # The topic does not exist yet: the first write creates it.
        assert topics.topic(OFFSETS_TOPIC) is None
        assert commit(runtime, GROUP, 3) == ErrorCode.none
        assert topics.topic(OFFSETS_TOPIC) is not None
        # The high watermark follows the append: nothing to wait for.
        point = runtime.commit_point(GROUP)
        assert point.partition is None and point.offset == 1
        assert point.outcome() == ErrorCode.none
    finally:
        runtime.shard.shutdown()
        logs.close()


def test_deleting_the_offsets_topic_unloads_its_groups(runtime: GroupCoordinatorRuntime) -> None:
    p1 = offsets_partition(runtime, 1)

    async def scenario() -> None:
        lead(runtime, p1, 1)
        await loaded(runtime)
        assert commit(runtime, GROUP, 2) == ErrorCode.none
        await runtime.offsets_topic.topics.delete_topic(OFFSETS_TOPIC)
        runtime.on_topic_deleted(OFFSETS_TOPIC)
        assert runtime.shard.owned == set()
        assert runtime.shard.groups == {}
        assert commit(runtime, GROUP, 3) == ErrorCode.not_coordinator

    asyncio.run(scenario())


def test_a_commit_is_answered_once_committed_and_a_refused_one_at_once(
    runtime: GroupCoordinatorRuntime,
) -> None:
    p1 = offsets_partition(runtime, 1)

    async def scenario() -> None:
        lead(runtime, p1, 1)
        await loaded(runtime)
        assert commit(runtime, GROUP, 5) == ErrorCode.none
        # In the leader's log, seen by the operations after it, but not answered yet.
        assert p1.log.log_end_offset == 1 and p1.high_watermark == 0
        assert committed_offset(runtime, GROUP) == 5
        answer = asyncio.ensure_future(runtime.committed([runtime.commit_point(GROUP)]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not answer.done()
        # The follower fetches past it: the high watermark moves and the answer leaves.
        p1.follower_fetched(FOLLOWER, 1)
        assert await answer == [ErrorCode.none]

        # With min.insync.replicas=2 and the follower out of the ISR, the append is refused
        # before it is made (as an acks=all produce): nothing in the log, nothing changed.
        p1.min_insync_replicas = 2
        p1.make_leader(2, (LOCAL, FOLLOWER), (LOCAL,), 2)
        request = CommitRequest(GROUP, -1, "", None, (OffsetCommit("t", 0, 9),))
        result = runtime.perform(lambda c: c.offsets.commit_offsets(request))
        assert result.error == ErrorCode.not_enough_replicas
        assert result.response == {("t", 0): ErrorCode.coordinator_not_available}
        assert p1.log.log_end_offset == 1
        assert committed_offset(runtime, GROUP) == 5
        assert await runtime.committed([runtime.commit_point(GROUP)]) == [ErrorCode.none]

    asyncio.run(scenario())


def test_a_generation_is_answered_once_its_assignment_is_committed(
    runtime: GroupCoordinatorRuntime,
) -> None:
    p1 = offsets_partition(runtime, 1)
    runtime.shard.config = dataclasses.replace(runtime.shard.config, initial_rebalance_delay_ms=0)

    async def scenario() -> None:
        lead(runtime, p1, 1)
        await loaded(runtime)
        join = JoinRequest(
            GROUP, "", None, 10_000, 10_000, "consumer", (Protocol("range", b""),),
            require_known_member_id=False,
        )  # fmt: skip
        joined: list[JoinResult] = []
        runtime.perform(lambda c: c.join_group(join, joined.append))
        (member,) = joined
        assert member.error == ErrorCode.none
        synced: list[SyncResult] = []
        sync = SyncRequest(
            GROUP, member.generation_id, member.member_id, None, ((member.member_id, b"a"),)
        )
        assert runtime.perform(lambda c: c.sync_group(sync, synced.append)).error == ErrorCode.none
        # The state machine answered once the group's record was in the leader's log ...
        assert [s.assignment for s in synced] == [b"a"]
        assert p1.log.log_end_offset == 1 and p1.high_watermark == 0
        # ... and the answer leaves once the follower has the record.
        answer = asyncio.ensure_future(runtime.committed([runtime.commit_point(GROUP)]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not answer.done()
        p1.follower_fetched(FOLLOWER, 1)
        assert await answer == [ErrorCode.none]

    asyncio.run(scenario())
