"""The group coordinator inside a broker: the classic and KIP-848 groups of
``__consumer_offsets`` as a shard of the coordinator runtime
(:mod:`odradek.coordinator.common.runtime`: loading as leadership moves, writes answered
once committed, timers).

:class:`OffsetsTopic` is where the coordinator's writes go (one RecordBatch v2 each, through the
broker's own append path), read back in order when a partition is loaded. A TxnOffsetCommit's
batch is transactional (the producer's id and epoch); the transaction's COMMIT/ABORT control
batch, appended by WriteTxnMarkers, is read back as a :class:`TransactionMarker`. The topic is
created on first need (FindCoordinator or a first write), compacted, as Kafka creates it.

Ownership is Kafka's ``GroupMetadataManager``'s: a lone broker owns every partition and replays
the whole topic at start; in a cluster the coordinator of a group is the leader of its
partition, and a partition loaded once stays loaded across leader epochs. A write the log
refuses leaves the state as it was before the operation: the classic groups' changes are made
only once the log took their records (``applied``, as Kafka's ``appendFuture`` callbacks), the
consumer groups' are put back from a snapshot (``failed``, as Kafka's timeline snapshots). An
answer not committed within ``offsets.commit.timeout.ms`` becomes COORDINATOR_NOT_AVAILABLE, one
whose partition lost its leadership NOT_COORDINATOR, as Kafka's.

Everything runs on the broker's event loop thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.cluster.replication.partition import Partition
from odradek.cluster.share.manager import GroupShareConfig, ShareSettings
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig, ConfigError
from odradek.coordinator.common.internal_topic import InternalTopic
from odradek.coordinator.common.log_reader import read_batches
from odradek.coordinator.common.runtime import CoordinatorContext, CoordinatorRuntime
from odradek.coordinator.group.assignors import ASSIGNORS, TopicInfo, assignor_names
from odradek.coordinator.group.consumer_group import ConsumerGroupSettings
from odradek.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.group.group_configs import STREAMS_DEFAULTS, GroupConfigs
from odradek.coordinator.group.messages import NO_PRODUCER_ID
from odradek.coordinator.group.share_group import ShareGroupSettings
from odradek.coordinator.group.streams_group import StreamsGroupSettings
from odradek.protocol.control import marker_commits
from odradek.protocol.record_batch import BatchHeader
from odradek.protocol.records import Record

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


def consumer_group_settings(config: BrokerConfig) -> ConsumerGroupSettings:
    listed = config.get("group.consumer.assignors")
    names = assignor_names(listed if isinstance(listed, list) else [])
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown or not names:
        raise ConfigError(
            f"group.consumer.assignors: {', '.join(unknown) or 'none'} "
            f"(known: {', '.join(ASSIGNORS)})"
        )
    return ConsumerGroupSettings(
        heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        assignors=tuple(names),
        max_size=config.get_int("group.consumer.max.size"),
        migration_policy=str(config.get("group.consumer.migration.policy")),
    )


def group_config(config: BrokerConfig, partitions: int) -> GroupConfig:
    return GroupConfig(
        offsets_partitions=partitions,
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        max_group_size=config.get_int("group.max.size"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        consumer=consumer_group_settings(config),
        share=share_group_settings(config),
        streams=streams_group_settings(config),
    )


def streams_group_settings(config: BrokerConfig) -> StreamsGroupSettings:
    return StreamsGroupSettings(
        heartbeat_interval_ms=config.get_int("group.streams.heartbeat.interval.ms"),
        session_timeout_ms=config.get_int("group.streams.session.timeout.ms"),
        max_size=config.get_int("group.streams.max.size"),
        num_standby_replicas=config.get_int("group.streams.num.standby.replicas"),
        num_warmup_replicas=config.get_int("group.streams.num.warmup.replicas"),
        acceptable_recovery_lag=config.get_int("group.streams.acceptable.recovery.lag"),
        task_offset_interval_ms=config.get_int("group.streams.task.offset.interval.ms"),
    )


def share_settings(config: BrokerConfig) -> ShareSettings:
    """The ``group.share.*`` settings the partition leaders' share-partitions use."""
    return ShareSettings(
        record_lock_duration_ms=config.get_int("group.share.record.lock.duration.ms"),
        delivery_count_limit=config.get_int("group.share.delivery.count.limit"),
        partition_max_record_locks=config.get_int("group.share.partition.max.record.locks"),
    )


def share_group_settings(config: BrokerConfig) -> ShareGroupSettings:
    return ShareGroupSettings(
        heartbeat_interval_ms=config.get_int("group.share.heartbeat.interval.ms"),
        session_timeout_ms=config.get_int("group.share.session.timeout.ms"),
        max_size=config.get_int("group.share.max.size"),
        record_lock_duration_ms=config.get_int("group.share.record.lock.duration.ms"),
        delivery_count_limit=config.get_int("group.share.delivery.count.limit"),
        partition_max_record_locks=config.get_int("group.share.partition.max.record.locks"),
    )


class TopicsCatalog:
    """The broker's topics as the consumer groups' assignors see them."""

    def __init__(self, topics: TopicManager) -> None:
        self.topics = topics

    def topic_info(self, name: str) -> TopicInfo | None:
        """The topic's id, partition count and the racks of each partition's replicas (among
        the brokers registered now)."""
        topic = self.topics.topic(name)
        if topic is None:
            return None
        rack_of = self.topics.broker_racks()
        racks: tuple[tuple[str, ...], ...] = ()
        if rack_of:
            own = self.topics.config.node_id
            racks = tuple(
                tuple(sorted({r for b in topic.replicas_of(p) or (own,) if (r := rack_of.get(b))}))
                for p in range(topic.partitions)
            )
        return TopicInfo(topic.topic_id, topic.partitions, racks)

    def topic_names(self) -> list[str]:
        return [t.name for t in self.topics.topics()]


class OffsetsTopic(InternalTopic):
    """``__consumer_offsets`` as the coordinator writes and replays it."""

    def __init__(self, topics: TopicManager, config: BrokerConfig, clock: Clock) -> None:
        super().__init__(
            OFFSETS_TOPIC,
            "offsets.topic",
            topics,
            config,
            clock,
            {"compression.type": "producer"},
            "min.insync.replicas",
        )

    def read_from(self, partition: Partition, offset: int) -> tuple[list[LogEntry], int | None]:
        """The entries of one read from ``offset`` on, and the offset of the next read (as
        :func:`~odradek.coordinator.common.log_reader.read_batches`)."""
        batches, next_offset = read_batches(partition, offset)
        entries: list[LogEntry] = []
        for header, records in batches:
            if header.is_control:
                entries.extend(_markers(header, records))
                continue
            producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
            entries.extend(
                StoredRecord(record.offset, producer_id, record.key, record.value)
                for record in records
            )
        return entries, next_offset


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record of ``__consumer_offsets`` as read back: ``producer_id`` is its batch's when
    the batch is transactional, else -1."""

    offset: int
    producer_id: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TransactionMarker:
    """A COMMIT (``commit``) or ABORT control record of ``producer_id``."""

    producer_id: int
    commit: bool


LogEntry = StoredRecord | TransactionMarker


def _markers(header: BatchHeader, records: Sequence[Record]) -> list[TransactionMarker]:
    markers = []
    for record in records:
        commit = marker_commits(record.key)
        if commit is not None:
            markers.append(TransactionMarker(header.producer_id, commit))
    return markers


class GroupCoordinatorRuntime(CoordinatorRuntime[GroupCoordinator]):
    """The broker's group coordinator: the classic and KIP-848 groups of
    ``__consumer_offsets`` as a shard of the coordinator runtime."""

    def __init__(self, context: CoordinatorContext) -> None:
        config, topics, clock = context.config, context.topics, context.clock
        self.offsets_topic = OffsetsTopic(topics, config, clock)
        coordinator = GroupCoordinator(group_config(config, self.offsets_topic.partitions), clock)
        coordinator.consumer.topics = TopicsCatalog(topics)
        # The groups' own configs (share.*, streams.*), as this broker last read them.
        self.group_configs = GroupConfigs(
            topics.store,
            config.get_int("group.share.record.lock.duration.ms"),
            {name: config.get_int(broker) for name, broker in STREAMS_DEFAULTS.items()},
        )
        coordinator.streams.group_configs = self.group_configs.configs
        super().__init__(
            self.offsets_topic,
            coordinator,
            _GroupLoading(self),
            context.wait_replicated,
            # offsets.commit.timeout.ms: how long an answer waits for its records' replication.
            config.get_int("offsets.commit.timeout.ms"),
            "groups",
        )

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        """Replay one read's records; how many, and where the next read starts (None: done)."""
        entries, next_offset = self.offsets_topic.read_from(partition, offset)
        for entry in entries:
            if isinstance(entry, TransactionMarker):
                self.shard.offsets.complete_transaction(
                    partition.index, entry.producer_id, entry.commit
                )
            else:
                self.shard.replay(
                    entry.key, entry.value, offset=entry.offset, producer_id=entry.producer_id
                )
        return len(entries), next_offset

    def transaction_completed(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was appended to ``__consumer_offsets-<offsets_partition>`` for
        ``producer_id``: its pending transactional offset commits there become committed
        (``commit``) or are dropped. Called by the WriteTxnMarkers handler after the append.

        A partition still loading needs nothing: its load reads on to the log end, so meets
        the marker after the commits it applies to."""
        if offsets_partition in self.shard.owned:
            self.shard.offsets.complete_transaction(offsets_partition, producer_id, commit)

    def on_topic_deleted(self, topic: str) -> None:
        if topic != OFFSETS_TOPIC:
            self.perform(lambda coordinator: coordinator.offsets.remove_offsets_of_topics({topic}))
        elif not self.offsets_topic.topics.leads_alone:
            # Its partitions are no longer led here (a lone broker keeps serving and creates
            # the topic again on the next write, as before).
            self.unload_all(self.shard.owned | self.shard.loading)

    def share_group_config(self, group_id: str) -> GroupShareConfig:
        """A share group's own settings (its group configs), the broker's where unset."""
        return self.group_configs.share_config(group_id)

    def start(self) -> None:
        super().start()
        self.group_configs.follow()

    async def stop(self) -> None:
        """Answer waiting JoinGroup/SyncGroup requests and stop the timers and loads."""
        self.shard.shutdown()
        await super().stop()


class _GroupLoading:
    """The group coordinator as its loader sees it: a partition loaded once stays loaded
    across leader epochs."""

    def __init__(self, runtime: GroupCoordinatorRuntime) -> None:
        self._runtime = runtime

    def is_loaded(self, index: int, epoch: int) -> bool:
        coordinator = self._runtime.shard
        return index in coordinator.owned or index in coordinator.loading

    def begin_loading(self, index: int, epoch: int) -> None:
        self._runtime.shard.begin_loading(index)

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        return self._runtime.replay_from(partition, offset)

    def finish_loading(self, index: int) -> None:
        self._runtime.shard.finish_loading([index])

    def unload(self, index: int) -> None:
        if self.is_loaded(index, -1):
            self._runtime.shard.unload(index)
