"""The share coordinator inside a broker (KIP-932, Kafka's ``ShareCoordinatorService``): the
persisted share-partition states of ``__share_group_state`` as a shard of the coordinator runtime
(:mod:`odradek.coordinator.common.runtime`: loading as leadership moves, answers once their
records are committed).

A share-partition's state lives in the partition of ``__share_group_state`` that its key
(``group:topicId:partition``) hashes to, and is served by that partition's leader: a lone broker
loads every partition at start, a cluster's brokers load and unload them as leadership moves (a
partition is loaded again in each new leader epoch). The topic is created on first need
(FindCoordinator with key type 2, or the first write), compacted, as Kafka creates it.

Crash: nothing of its own; the state is the log's. Everything runs on the broker's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from odradek.clock import Clock
from odradek.cluster.replication.partition import Partition
from odradek.cluster.share.persister import StateBatch
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.internal_topic import InternalTopic
from odradek.coordinator.common.log_reader import replay_data_records
from odradek.coordinator.common.runtime import (
    CoordinatorContext,
    CoordinatorError,
    CoordinatorRuntime,
)
from odradek.coordinator.group.records import RecordFormatError
from odradek.coordinator.share.coordinator import ShareCoordinatorShard, StateAnswer
from odradek.coordinator.share.records import StateKey

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"
_COMMIT_TIMEOUT_MS = 5_000


class ShareStateTopic(InternalTopic):
    """``__share_group_state`` as the share coordinator writes and replays it."""

    def __init__(self, topics: TopicManager, config: BrokerConfig, clock: Clock) -> None:
        super().__init__(
            SHARE_STATE_TOPIC,
            "share.coordinator.state.topic",
            topics,
            config,
            clock,
            {"compression.type": "uncompressed", "unclean.leader.election.enable": "false"},
            "share.coordinator.state.topic.min.isr",
        )


class ShareCoordinatorRuntime(CoordinatorRuntime[ShareCoordinatorShard]):
    """The broker's share coordinator (see the module doc)."""

    def __init__(self, context: CoordinatorContext) -> None:
        config, topics, clock = context.config, context.topics, context.clock
        self.state_topic = ShareStateTopic(topics, config, clock)
        shard = ShareCoordinatorShard(
            self.state_topic.partitions,
            config.get_int("share.coordinator.snapshot.update.records.per.snapshot"),
            clock,
        )
        super().__init__(
            self.state_topic,
            shard,
            _ShareLoading(self),
            context.wait_replicated,
            _COMMIT_TIMEOUT_MS,
            "share-states",
        )

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        """Replay one read of ``partition`` from ``offset``: how many records, and where the
        next read starts (None: done)."""
        return replay_data_records(partition, offset, self.shard.replay, RecordFormatError)

    def on_topic_deleted(self, topic: str) -> None:
        if topic == SHARE_STATE_TOPIC and not self.state_topic.topics.leads_alone:
            self.unload_all(self.shard.owned)

    def serves(self, key: StateKey) -> bool:
        """Whether this broker is the share coordinator of ``key`` now."""
        return self.shard.is_active(self.shard.partition_of(key))

    # -- the share state APIs ------------------------------------------------------------------

    async def _run(
        self, key: StateKey, op: Callable[[ShareCoordinatorShard], StateAnswer], api_key: int
    ) -> StateAnswer:
        try:
            return await self.write(key.coordinator_key(), op, api_key=api_key)
        except CoordinatorError as e:
            return StateAnswer(e.code, message=e.message or None)

    async def initialize_state(
        self, key: StateKey, state_epoch: int, start_offset: int, *, api_key: int = -1
    ) -> StateAnswer:
        return await self._run(key, lambda s: s.initialize(key, state_epoch, start_offset), api_key)

    async def write_state(
        self,
        key: StateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
        *,
        api_key: int = -1,
    ) -> StateAnswer:
        return await self._run(
            key,
            lambda s: s.write(key, state_epoch, leader_epoch, start_offset, batches),
            api_key,
        )

    async def read_state(
        self, key: StateKey, leader_epoch: int, *, api_key: int = -1
    ) -> StateAnswer:
        return await self._run(key, lambda s: s.read(key, leader_epoch), api_key)

    async def read_summary(self, key: StateKey, *, api_key: int = -1) -> StateAnswer:
        return await self._run(key, lambda s: s.summary(key), api_key)

    async def delete_state(self, key: StateKey, *, api_key: int = -1) -> StateAnswer:
        return await self._run(key, lambda s: s.delete(key), api_key)


class _ShareLoading:
    """The share coordinator as its loader sees it: loaded again in each new leader epoch (a
    follower's copy of the state may have moved on meanwhile)."""

    def __init__(self, runtime: ShareCoordinatorRuntime) -> None:
        self._runtime = runtime
        self._epochs: dict[int, int] = {}

    def is_loaded(self, index: int, epoch: int) -> bool:
        return self._runtime.shard.is_loaded(index, epoch) and self._epochs.get(index) == epoch

    def begin_loading(self, index: int, epoch: int) -> None:
        self._epochs[index] = epoch
        self._runtime.shard.begin_loading(index, epoch)

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        return self._runtime.replay_from(partition, offset)

    def finish_loading(self, index: int) -> None:
        self._runtime.shard.finish_loading(index)

    def unload(self, index: int) -> None:
        self._epochs.pop(index, None)
        self._runtime.shard.unload(index)
