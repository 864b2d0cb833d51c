"""The coordinator runtime with a toy shard on real logs, an injected clock and no sockets:
writes answered once their records are committed, Kafka's mapping of what goes wrong, reads,
deferred answers, timers, and loading as leadership moves."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.internal_topic import InternalTopic, WaitReplicated
from odradek.coordinator.common.log_reader import read_batches
from odradek.coordinator.common.runtime import (
    CoordinatorError,
    CoordinatorRuntime,
    CoordinatorWrite,
)
from odradek.coordinator.common.timers import Timers
from odradek.protocol.errors import ErrorCode
from odradek.server.purgatory import Purgatory
from odradek.storage import LogManager

LOCAL, FOLLOWER = 1, 2
TOPIC = "__tally"
KEY = "k"  # every key is in partition 0


@dataclass
class Tally:
    """A toy state machine: how many times each key was added, a record per add."""

    timers: Timers = field(default_factory=Timers)
    counts: dict[str, int] = field(default_factory=dict)
    active: set[int] = field(default_factory=set)
    loading: set[int] = field(default_factory=set)
    outcomes: list[ErrorCode] = field(default_factory=list)
    waiting: list[Callable[[int], None]] = field(default_factory=list)
    _writes: list[CoordinatorWrite] = field(default_factory=list)

    def partition_for(self, key: str) -> int:
        return 0

    def take_writes(self) -> list[CoordinatorWrite]:
        writes, self._writes = self._writes, []
        return writes

    def is_active(self, partition: int) -> bool:
        return partition in self.active

    def add(self, key: str) -> int:
        """Ask for a record of ``key``; the count is changed once the log took it."""

        def applied(_: int) -> None:
            self.counts[key] = self.counts.get(key, 0) + 1
            for reply in self.waiting:
                reply(self.counts[key])
            self.waiting.clear()

        self._writes.append(
            CoordinatorWrite(
                0,
                ((key.encode(), b"+"),),
                applied=applied,
                failed=self.outcomes.append,
                committed=self.outcomes.append,
            )
        )
        return self.counts.get(key, 0) + 1


class TallyLoading:
    """Loads a partition of the toy topic by counting its records again."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.loads = 0

    def is_loaded(self, index: int, epoch: int) -> bool:
        return index in self.tally.active or index in self.tally.loading

    def begin_loading(self, index: int, epoch: int) -> None:
        self.loads += 1
        self.tally.loading.add(index)
        self.tally.counts.clear()

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        batches, next_offset = read_batches(partition, offset)
        count = 0
        for _, records in batches:
            for record in records:
                assert record.key is not None
                key = record.key.decode()
                self.tally.counts[key] = self.tally.counts.get(key, 0) + 1
                count += 1
        return count, next_offset

    def finish_loading(self, index: int) -> None:
        self.tally.loading.discard(index)
        self.tally.active.add(index)

    def unload(self, index: int) -> None:
        self.tally.loading.discard(index)
        self.tally.active.discard(index)


@dataclass
class Setup:
    runtime: CoordinatorRuntime[Tally]
    loading: TallyLoading
    partition: Partition
    clock: ManualClock


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[[WaitReplicated | None], Setup]]:
    """A cluster broker's runtime of the toy shard, its one partition led here with a follower
    in the ISR (``wait``: the purgatory's wait, or one the test gives)."""
    clock = ManualClock()
    config = BrokerConfig(
        {"log.dirs": str(tmp_path), "node.id": str(LOCAL), "offsets.topic.num.partitions": "1"}
    )
    logs = LogManager(config.log_dirs, clock)
    store = LocalMetadataStore(config.log_dirs[0], node_id=LOCAL)
    topics = TopicManager(config, store, logs, clock, leads_alone=False)
    topics.open()

    def build(wait: WaitReplicated | None) -> Setup:
        topic = InternalTopic(
            TOPIC, "offsets.topic", topics, config, clock, {}, "min.insync.replicas"
        )
        asyncio.run(topic.ensure())
        tally = Tally()
        loading = TallyLoading(tally)
        runtime = CoordinatorRuntime(
            topic, tally, loading, wait or Purgatory().replicated, 5_000, "tallies"
        )
        partition = topic.partition(0)
        assert partition is not None
        partition.make_leader(1, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER), 1)
        runtime.follow([])
        return Setup(runtime, loading, partition, clock)

    yield build
    logs.close()


def test_a_write_is_answered_once_its_records_are_committed(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    s = make(None)

    async def scenario() -> None:
        answer = asyncio.ensure_future(s.runtime.write(KEY, lambda t: t.add(KEY)))
        for _ in range(5):
            await asyncio.sleep(0)
        # Applied once in the leader's log, answered only once the follower has it.
        assert s.runtime.shard.counts == {KEY: 1}
        assert s.partition.log.log_end_offset == 1 and not answer.done()
        s.partition.follower_fetched(FOLLOWER, 1)
        assert await answer == 1
        assert s.runtime.shard.outcomes == [ErrorCode.none]

    asyncio.run(scenario())


def test_an_answer_that_wrote_nothing_waits_for_the_writes_before_it(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    s = make(None)

    async def scenario() -> None:
        s.runtime.perform(lambda t: t.add(KEY))
        read = asyncio.ensure_future(s.runtime.read(KEY, lambda t: t.counts.get(KEY, 0)))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not read.done()
        s.partition.follower_fetched(FOLLOWER, 1)
        assert await read == 1

    asyncio.run(scenario())


def test_a_refused_write_is_coordinator_not_available_and_changes_nothing(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    s = make(None)
    s.partition.min_insync_replicas = 2
    s.partition.make_leader(2, (LOCAL, FOLLOWER), (LOCAL,), 2)

    async def scenario() -> None:
        with pytest.raises(CoordinatorError) as refused:
            await s.runtime.write(KEY, lambda t: t.add(KEY))
        assert refused.value.code == ErrorCode.coordinator_not_available
        assert refused.value.refused == ErrorCode.not_enough_replicas
        assert s.runtime.shard.counts == {}
        assert s.runtime.shard.outcomes == [ErrorCode.not_enough_replicas]
        assert s.partition.log.log_end_offset == 0

    asyncio.run(scenario())


def test_a_commit_that_does_not_come_in_time_is_coordinator_not_available(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    async def timed_out(
        partition: Partition, required_offset: int, timeout_s: float, api_key: int = -1
    ) -> ErrorCode:
        assert timeout_s == 5.0  # the runtime's commit timeout
        return ErrorCode.request_timed_out

    s = make(timed_out)

    async def scenario() -> None:
        with pytest.raises(CoordinatorError) as failed:
            await s.runtime.write(KEY, lambda t: t.add(KEY))
        assert failed.value.code == ErrorCode.coordinator_not_available
        assert failed.value.refused == ErrorCode.none
        # The record stays in the log, and the state with it, as Kafka's.
        assert s.runtime.shard.counts == {KEY: 1}
        assert s.runtime.shard.outcomes == [ErrorCode.coordinator_not_available]

    asyncio.run(scenario())


def test_a_leadership_lost_while_waiting_is_not_coordinator(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    s = make(None)

    async def scenario() -> None:
        answer = asyncio.ensure_future(s.runtime.write(KEY, lambda t: t.add(KEY)))
        await asyncio.sleep(0)
        s.partition.make_follower(FOLLOWER, 2, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER))
        s.runtime.leadership_changed(s.partition, False)
        with pytest.raises(CoordinatorError) as moved:
            await answer
        assert moved.value.code == ErrorCode.not_coordinator
        assert not s.runtime.shard.is_active(0)

    asyncio.run(scenario())


def test_a_deferred_answer_waits_for_its_reply_then_for_the_commit(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    s = make(None)

    async def scenario() -> None:
        def wait(tally: Tally, reply: Callable[[int], None]) -> None:
            tally.waiting.append(reply)

        answer: asyncio.Future[int] = asyncio.ensure_future(s.runtime.write_deferred(KEY, wait))
        await asyncio.sleep(0)
        assert not answer.done()
        # Another operation replies (its record applied), the answer then waits for it.
        s.runtime.perform(lambda t: t.add(KEY))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not answer.done()
        s.partition.follower_fetched(FOLLOWER, 1)
        assert await answer == 1

    asyncio.run(scenario())


def test_timers_fire_on_the_injected_clock_and_their_writes_are_appended(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    s = make(None)
    tally = s.runtime.shard

    def fire() -> None:
        tally.add("timer")

    tally.timers.schedule("add", s.clock.monotonic_ms() + 100, fire)
    assert s.runtime.tick() == 0
    s.clock.advance(100)
    assert s.runtime.tick() == 1
    assert tally.counts == {"timer": 1}
    assert s.partition.log.log_end_offset == 1


def test_a_partition_is_loaded_once_per_leadership_and_replayed_to_its_log_end(
    make: Callable[[WaitReplicated | None], Setup],
) -> None:
    s = make(None)
    assert s.loading.loads == 1  # led at start: loaded at once

    async def scenario() -> None:
        s.runtime.perform(lambda t: t.add(KEY))
        s.runtime.perform(lambda t: t.add(KEY))
        s.runtime.leadership_changed(s.partition, True)  # told again: nothing to do
        assert s.loading.loads == 1
        s.partition.make_follower(FOLLOWER, 2, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER))
        s.runtime.leadership_changed(s.partition, False)
        assert not s.runtime.shard.is_active(0)
        # Not served here: answered at once, nothing to wait for.
        assert await s.runtime.read(KEY, lambda t: t.is_active(0)) is False
        s.partition.make_leader(3, (LOCAL, FOLLOWER), (LOCAL, FOLLOWER), 3)
        s.runtime.leadership_changed(s.partition, True)
        assert s.runtime.shard.loading == {0}
        for _ in range(100):
            if not s.runtime.shard.loading:
                break
            await asyncio.sleep(0)
        assert s.loading.loads == 2
        # Both records, though the high watermark is still below them.
        assert s.partition.high_watermark == 0
        assert s.runtime.shard.counts == {KEY: 2}
        await s.runtime.stop()

    asyncio.run(scenario())
