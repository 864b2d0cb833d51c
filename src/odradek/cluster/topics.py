"""Topics and partitions of this broker: creation, deletion, growth and configs.

The facts live in the metadata store; the data in the log manager. Every change is validated the
way Kafka's controller validates it and refused with the error code a Kafka client expects.

Threads: the broker's event loop. A change is a coroutine that returns once the store holds it
(the store's wait, for ZooKeeper or a disk, happens off the loop) and, on a single broker, once
the new partitions' logs are made, on worker threads in batches (:meth:`LogManager.prepare`):
creating thousands of directories and files must not hold the loop. Callers bound it by their
request's timeout; the logs are made to the end regardless, since the store holds the topic.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from odradek.clock import Clock
from odradek.cluster import features
from odradek.cluster.controller.assignment import (
    BrokerMetadata,
    assign_added_partitions,
    assign_replicas,
    check_added_assignment,
    check_assignment,
)
from odradek.cluster.metadata.store import (
    MetadataStore,
    MetadataStoreError,
    TopicExistsError,
    TopicMetadata,
)
from odradek.cluster.replication.partition import Partition
from odradek.config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    TopicConfig,
    validate_topic_configs,
)
from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage import KafkaStorageError, LogConfig, LogManager, PartitionLog
from odradek.storage.log import TOPIC_NAME_STRATEGY, subject_name_strategy

log = logging.getLogger(__name__)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
# Partitions whose logs one thread call makes: large enough that handing work to a thread costs
# little beside it, small enough that a big topic's first partitions serve before its last.
_CREATE_BATCH = 256


def check_topic_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.invalid_topic_exception, "topic name is empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name is longer than {MAX_TOPIC_NAME} characters",
        )
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'",
        )


def log_config_of(topic: TopicConfig) -> LogConfig:
    policy = topic.get("cleanup.policy")
    assert isinstance(policy, list)
    retention_ms = topic.get_int("retention.ms")
    retention_bytes = topic.get_int("retention.bytes")
    dirty_ratio = topic.get("min.cleanable.dirty.ratio")
    assert isinstance(dirty_ratio, float)
    codec = str(topic.values["compression.type"])
    return LogConfig(
        segment_bytes=topic.get_int("segment.bytes"),
        segment_ms=topic.get_int("segment.ms"),
        index_interval_bytes=topic.get_int("index.interval.bytes"),
        segment_index_bytes=topic.get_int("segment.index.bytes"),
        flush_messages=topic.optional_long("flush.messages"),
        flush_ms=topic.optional_long("flush.ms"),
        delete="delete" in policy,
        retention_ms=retention_ms if retention_ms >= 0 else None,
        retention_bytes=retention_bytes if retention_bytes >= 0 else None,
        compact="compact" in policy,
        delete_retention_ms=topic.get_int("delete.retention.ms"),
        min_cleanable_dirty_ratio=dirty_ratio,
        min_compaction_lag_ms=topic.get_int("min.compaction.lag.ms"),
        max_compaction_lag_ms=topic.optional_long("max.compaction.lag.ms"),
        compression=(
            None
            if codec == "producer"
            else compression.NONE
            if codec == "uncompressed"
            else compression.codec_id(codec)
        ),
        file_delete_delay_ms=topic.get_int("file.delete.delay.ms"),
        max_message_bytes=topic.get_int("max.message.bytes"),
        log_append_time=topic.values["message.timestamp.type"] == "LogAppendTime",
        timestamp_after_max_ms=topic.get_int("message.timestamp.after.max.ms"),
        timestamp_before_max_ms=topic.get_int("message.timestamp.before.max.ms"),
        key_schema_validation=topic.get("confluent.key.schema.validation") is True,
        value_schema_validation=topic.get("confluent.value.schema.validation") is True,
        key_subject_name_strategy=_strategy(topic.get("confluent.key.subject.name.strategy")),
        value_subject_name_strategy=_strategy(topic.get("confluent.value.subject.name.strategy")),
    )


def _strategy(value: object) -> str:
    """A subject name strategy's class name (the config checked it is one of Confluent's)."""
    return subject_name_strategy(str(value)) or TOPIC_NAME_STRATEGY


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """A metadata store that cannot write (ZooKeeper unreachable past
    ``zookeeper.connection.timeout.ms``, a session lost mid-write) fails the request with
    UNKNOWN_SERVER_ERROR, as Kafka answers a ZooKeeper client error, and nothing else."""
    try:
        yield
    except MetadataStoreError as e:
        raise KafkaError(ErrorCode.unknown_server_error, f"metadata store: {e}") from e


class TopicManager:
    """Owns the set of topics and the :class:`Partition` objects the handlers use."""

    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        logs: LogManager,
        clock: Clock,
        live_brokers: Callable[[], Sequence[BrokerMetadata]] | None = None,
        *,
        leads_alone: bool = True,
    ) -> None:
        self.config = config
        # One broker leads every partition it has (epoch 0, itself the ISR); in a cluster the
        # replica manager gives each partition the role its state names.
        self.leads_alone = leads_alone
        self.store = store
        self.logs = logs
        self.clock = clock
        # The live brokers that replication factors and assignments are checked against: in a
        # cluster the membership's (asked at each creation), alone this broker only.
        self._live = live_brokers or (
            lambda: [BrokerMetadata(config.node_id, config.raw("broker.rack") or None)]
        )
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._topic_configs: dict[str, TopicConfig] = {}
        self._log_configs: dict[str, tuple[TopicConfig, LogConfig]] = {}
        # Called with a topic's name after it is deleted (the group coordinator drops its
        # committed offsets).
        self.deletion_listeners: list[Callable[[str], None]] = []
        self._random = random.Random()
        self._creating: set[str] = set()
        # Partitions whose logs a creation is making on a thread: sync() leaves them to it.
        self._opening: set[tuple[str, int]] = set()

    def open(self) -> None:
        self.logs.open(self.log_config)
        for topic in self.store.topics.values():
            self._open_partitions(topic, range(topic.partitions))
        self._remove_unassigned_logs()

    def _remove_unassigned_logs(self) -> list[tuple[str, int]]:
        """Delete the logs of partitions this broker no longer hosts: of topics deleted (while
        this broker was down, or before a crash), or assigned to other brokers."""
        node = self.config.node_id
        leftovers = [
            (p.topic, p.partition)
            for p in self.logs.all_logs()
            if p.topic not in self.store.topics
            or node not in self._replicas_of(self.store.topics[p.topic], p.partition)
        ]
        for topic, index in leftovers:
            log.warning("removing log of %s-%d, not hosted here", topic, index)
            partition = self.partitions.pop((topic, index), None)
            if partition is not None:
                partition.wake_all()
            self.logs.delete(topic, index)
        if leftovers:
            self.logs.checkpoint()  # as delete_topic does
        return leftovers

    def _replicas_of(self, topic: TopicMetadata, index: int) -> tuple[int, ...]:
        # A topic of a version 1 local store names no replicas: this broker has them all.
        return topic.replicas_of(index) or (self.config.node_id,)

    def sync(self) -> tuple[list[Partition], list[tuple[str, int]]]:
        """Bring the hosted partitions in line with the metadata store after another broker
        changed it (a cluster): open the partitions newly assigned here, drop those of deleted
        topics, take config changes. Returns (opened, removed)."""
        node = self.config.node_id
        before = set(self.partitions)
        for topic in self.store.topics.values():
            self._topic_configs.pop(topic.name, None)
            self._log_configs.pop(topic.name, None)
            missing = [
                i
                for i in range(topic.partitions)
                if (topic.name, i) not in self.partitions and node in self._replicas_of(topic, i)
            ]
            if missing:
                self._open_partitions(topic, missing)
        deleted = {t for t, _ in before} - set(self.store.topics)
        removed = self._remove_unassigned_logs()
        for topic_name in self.store.topics:
            self._apply_config(topic_name)
        for name in sorted(deleted):
            log.info("topic %s was deleted", name)
            for listener in self.deletion_listeners:
                listener(name)
        opened = [p for key, p in self.partitions.items() if key not in before]
        return opened, removed

    def _open_partitions(self, topic: TopicMetadata, indexes: Iterable[int]) -> None:
        config = self.log_config(topic.name)
        min_insync = self.topic_config(topic.name).get_int("min.insync.replicas")
        node = self.config.node_id
        for index in indexes:
            # Already open when the store's notification of this change came first (a change
            # is awaited, and the watch may answer before the write does).
            if (
                node not in self._replicas_of(topic, index)
                or (topic.name, index) in self.partitions
                or (topic.name, index) in self._opening
            ):
                continue
            try:
                partition_log = self.logs.get(topic.name, index) or self.logs.create(
                    topic.name, index, config
                )
            except KafkaStorageError as e:
                # Its log may be in a dir that failed as the broker started: the partition is
                # hosted offline, answering KAFKA_STORAGE_ERROR (Kafka's offline partition).
                offline = self.logs.hold_offline(topic.name, index, config)
                if offline is None:
                    log.error("%s-%d is not served: %s", topic.name, index, e.message)
                    continue
                partition_log = offline
            self._host(topic.name, index, partition_log, min_insync)

    def _host(self, name: str, index: int, partition_log: PartitionLog, min_insync: int) -> None:
        node = self.config.node_id
        partition = Partition(
            name,
            index,
            partition_log,
            local_id=node,
            clock=self.clock,
            replica_lag_time_max_ms=self.config.get_int("replica.lag.time.max.ms"),
            min_insync_replicas=min_insync,
            eligible_leader_replicas=features.finalized(self.store.finalized_features).level(
                features.ELIGIBLE_LEADER_REPLICAS_VERSION
            )
            >= 1,
        )
        self.partitions[(name, index)] = partition
        if self.leads_alone:
            partition.make_leader(0, (node,), (node,), 0)

    async def _open_created(
        self, topic: TopicMetadata, indexes: range, *, inline: bool = False
    ) -> None:
        """Open the partitions a creation or growth made. On a single broker their logs are made
        on threads; in a cluster (for now) here, as the store's notification opens them: the
        replica manager gives a partition its role when sync() opens it or its state changes,
        and a partition still in the making would miss both."""
        if inline or not self.leads_alone:
            self._open_partitions(topic, indexes)
        else:
            # To its end even if the request's wait is cancelled: the store holds the topic.
            await asyncio.shield(self._open_new_partitions(topic, indexes))

    async def _open_new_partitions(self, topic: TopicMetadata, indexes: Iterable[int]) -> None:
        """Open the partitions of a topic just created or grown, their logs made on threads in
        batches (the directories and segment files; on a single broker, epoch 0 is assigned
        there too, and written by each log's first flush), each batch hosted on the loop as it
        is ready."""
        node = self.config.node_id
        name = topic.name
        wanted = [
            i
            for i in indexes
            if node in self._replicas_of(topic, i)
            and (name, i) not in self.partitions
            and (name, i) not in self._opening
        ]
        if not wanted:
            return
        config = self.log_config(name)
        min_insync = self.topic_config(name).get_int("min.insync.replicas")
        self._opening.update((name, i) for i in wanted)
        try:
            for first in range(0, len(wanted), _CREATE_BATCH):
                batch = wanted[first : first + _CREATE_BATCH]
                # What make_leader(0) assigns first (a single broker), assigned there too:
                # on the loop, make_leader then finds it done.
                epoch = 0 if self.leads_alone else None
                made = await asyncio.to_thread(
                    self.logs.prepare, name, batch, config, leader_epoch=epoch
                )
                for index, partition_log in zip(batch, made, strict=True):
                    self._opening.discard((name, index))
                    current = self.store.topics.get(name)
                    if current is not None and current.topic_id == topic.topic_id:
                        self._host(name, index, self.logs.add(partition_log), min_insync)
                    else:  # the topic went while its logs were made
                        partition_log.delete()
        finally:
            self._opening.difference_update((name, i) for i in wanted)

    # -- lookups -------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicMetadata | None:
        return self.store.topics.get(name)

    def topics(self) -> list[TopicMetadata]:
        return list(self.store.topics.values())

    def partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def topic_config(self, name: str) -> TopicConfig:
        cached = self._topic_configs.get(name)
        if cached is None:
            topic = self.store.topics.get(name)
            cached = TopicConfig.resolve(self.config, topic.configs if topic else {})
            self._topic_configs[name] = cached
        return cached

    def log_config(self, name: str) -> LogConfig:
        # Asked once per log as the broker opens them: built once per topic config.
        topic = self.topic_config(name)
        cached = self._log_configs.get(name)
        if cached is None or cached[0] is not topic:
            cached = (topic, log_config_of(topic))
            self._log_configs[name] = cached
        return cached[1]

    # -- changes -------------------------------------------------------------------------------

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        assignments: Mapping[int, list[int]] | None = None,
        validate_only: bool = False,
        inline: bool = False,
    ) -> TopicMetadata:
        """Create a topic and open its partitions. Their logs are made on threads unless
        ``inline`` (a caller that cannot await, on a store that ``answers_at_once``: the
        coroutine then never suspends)."""
        check_topic_name(name)
        if name in self.store.topics:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "give either replica assignments or partitions and replication factor",
                )
            checked = check_assignment(assignments, self._live_broker_ids())
            num_partitions = len(checked)
            replication_factor = len(checked[0])
        if num_partitions == -1:
            num_partitions = self.config.get_int("num.partitions")
        if num_partitions < 1:
            raise KafkaError(
                ErrorCode.invalid_partitions, "number of partitions must be at least 1"
            )
        if replication_factor == -1:
            replication_factor = self.config.get_int("default.replication.factor")
        self._check_replication_factor(replication_factor)
        try:
            valid = validate_topic_configs(configs or {})
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from e
        replicas = (
            tuple(tuple(assignments[p]) for p in sorted(assignments))
            if assignments
            else self._assign(num_partitions, replication_factor)
        )
        topic = TopicMetadata(name, uuid.uuid4(), num_partitions, valid, replicas)
        if validate_only:
            return topic
        if name in self._creating:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic {name!r} is being created")
        self._creating.add(name)
        try:
            with _store_errors():
                await self.store.put(topic)
        except KafkaError as e:
            if isinstance(e.__cause__, TopicExistsError):
                raise KafkaError(ErrorCode.topic_already_exists, str(e.__cause__)) from None
            raise
        finally:
            self._creating.discard(name)
        self._topic_configs.pop(name, None)
        self._log_configs.pop(name, None)
        await self._open_created(topic, range(num_partitions), inline=inline)
        log.info("created topic %s with %d partitions", name, num_partitions)
        return topic

    def broker_racks(self) -> dict[int, str]:
        """The rack of each live broker that names one (``broker.rack``)."""
        return {b.id: b.rack for b in self._live_brokers() if b.rack}

    def _live_brokers(self) -> Sequence[BrokerMetadata]:
        return self._live()

    def _assign(self, partitions: int, replication_factor: int) -> tuple[tuple[int, ...], ...]:
        """Kafka's replica placement over the live brokers (round robin from a random start,
        rack-aware when every broker has a rack)."""
        placed = assign_replicas(self._live_brokers(), partitions, replication_factor, self._random)
        return tuple(tuple(placed[p]) for p in range(partitions))

    def live_broker_count(self) -> int:
        return len(self._live_broker_ids())

    def _live_broker_ids(self) -> list[int]:
        return sorted(b.id for b in self._live())

    def _check_replication_factor(self, replication_factor: int) -> None:
        if replication_factor < 1:
            raise KafkaError(
                ErrorCode.invalid_replication_factor, "replication factor must be at least 1"
            )
        live = len(self._live_broker_ids())
        if replication_factor > live:
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"replication factor {replication_factor} is larger than the {live} "
                f"broker{'' if live == 1 else 's'} available",
            )

    async def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if not self.config.get_bool("delete.topic.enable"):
            raise KafkaError(ErrorCode.topic_deletion_disabled, "delete.topic.enable is false")
        with _store_errors():
            await self.store.remove(name)
        self._topic_configs.pop(name, None)
        self._log_configs.pop(name, None)
        for index in range(topic.partitions):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.wake_all()
            self.logs.delete(name, index)
        # Now, not at the next periodic checkpoint: a topic created again under this name must
        # not inherit these recovery points after a crash, or its recovery would trust batches
        # that were never fsynced. (A crash before this line: opening checkpoints afresh.)
        try:
            self.logs.checkpoint()
        except OSError:
            log.exception("could not checkpoint after deleting topic %s", name)
        log.info("deleted topic %s", name)
        for listener in self.deletion_listeners:
            listener(name)
        return topic

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: list[list[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> None:
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if count < topic.partitions:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"topic has {topic.partitions} partitions; partitions can only be added",
            )
        if count == topic.partitions:
            raise KafkaError(
                ErrorCode.invalid_partitions, f"topic already has {topic.partitions} partitions"
            )
        if assignments is not None:
            if len(assignments) != count - topic.partitions:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    "assignments must name one replica list per new partition",
                )
            check_added_assignment(
                {p: topic.replicas_of(p) for p in range(topic.partitions)},
                count,
                assignments,
                self._live_broker_ids(),
            )
        if validate_only:
            return
        if assignments is None:
            placed = assign_added_partitions(
                self._live_brokers(),
                {p: topic.replicas_of(p) for p in range(topic.partitions)},
                count,
                self._random,
            )
            assignments = [list(placed[p]) for p in range(topic.partitions, count)]
        new_replicas = assignments
        with _store_errors():
            updated = await self.store.set_partitions(name, count, new_replicas)
        await self._open_created(updated, range(topic.partitions, count))

    async def set_topic_configs(
        self, name: str, configs: Mapping[str, str | None], *, validate_only: bool = False
    ) -> None:
        """Replace the topic's overrides with ``configs`` (None values are dropped)."""
        if name not in self.store.topics:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        try:
            valid = validate_topic_configs(configs)
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from e
        if validate_only:
            return
        with _store_errors():
            await self.store.set_configs(name, valid)
        self._topic_configs.pop(name, None)
        self._log_configs.pop(name, None)
        self._apply_config(name)

    def _apply_config(self, name: str) -> None:
        """Hand the topic's (possibly changed) configs to its logs and partitions."""
        self.logs.update_config(name, self.log_config(name))
        min_insync = self.topic_config(name).get_int("min.insync.replicas")
        for (topic, _), partition in self.partitions.items():
            if topic == name:
                partition.min_insync_replicas = min_insync

    def is_known_config(self, name: str) -> bool:
        return name in TOPIC_CONFIGS
