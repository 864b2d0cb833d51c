"""The group coordinator inside a broker: its records in ``__consumer_offsets``, its timers on the
event loop, the partitions it owns, and when its answers may be sent.

:class:`OffsetsTopic` is where the coordinator's writes go: each
:class:`~odradek.coordinator.coordinator.GroupWrite` becomes one RecordBatch v2, appended
through the broker's own append path (:class:`~odradek.coordinator.internal_topic.InternalTopic`:
``Partition.append`` on the leader, checked as acks=all), and the records are read back in order
when a partition is loaded. A TxnOffsetCommit's batch is transactional (the producer's id and
epoch); the transaction's COMMIT/ABORT control batch, appended by WriteTxnMarkers, is read back
as a :class:`TransactionMarker`. The topic is created on first need (FindCoordinator or a first
write), compacted, as Kafka creates it.

:class:`GroupCoordinatorRuntime` owns partitions as Kafka's ``GroupMetadataManager`` does: a lone
broker owns them all and replays the whole topic at start. In a cluster the coordinator of a
group is the leader of its partition: :meth:`~GroupCoordinatorRuntime.follow` loads what this
broker leads when it starts, and the replica manager's leadership listeners load a partition
whose leadership arrives (from its log start to its log end — a new leader's high watermark may
lag behind records it already has) and unload one whose leadership leaves.

Operations run as Kafka's ``CoordinatorRuntime`` runs them
(:meth:`~GroupCoordinatorRuntime.perform`): the state machine's operation (a request, or its
timers' tick) asks for writes — records, and what follows once they are in the log or refused —
and the runtime appends them to the leader's log in the same event-loop turn
(:func:`append_writes`), synchronously as Kafka's ``CoordinatorPartitionWriter``. A write the log
refuses (NOT_ENOUGH_REPLICAS while the ISR is below ``min.insync.replicas``, NOT_LEADER, too
large, a storage error) leaves the state as it was before the operation: the classic groups'
changes are made only once the log took their records (``applied``, as Kafka's ``appendFuture``
callbacks), the consumer groups' are put back from a snapshot (``failed``, as Kafka's timeline
snapshots), and since nothing else runs between the operation and its append, no other operation
sees the state in between. The request is then answered with the write's error (mapped by
:func:`~odradek.coordinator.internal_topic.write_error`).

An answer is sent only once the records it may depend on are committed: the high watermark of
the group's partition must reach that partition's log end offset as of the answer
(:meth:`~GroupCoordinatorRuntime.commit_point`; the wait is the purgatory's, as an acks=all
produce's, :meth:`~GroupCoordinatorRuntime.committed`). The coordinator's state is always the
replay of the leader's log, so an answer depends only on records below that log end — the rule
of Kafka's deferred event queue, where even an answer that wrote nothing waits for the writes
before it; answers sent from callbacks (JoinGroup and SyncGroup completing for the whole group,
from a request or a timer) wait the same way. An answer not committed within
``offsets.commit.timeout.ms`` becomes COORDINATOR_NOT_AVAILABLE, one whose partition lost its
leadership NOT_COORDINATOR, as Kafka's. Its records stay in the log then, and the state with
them: Kafka does not take back an append whose commit timed out either (they are committed when
the followers catch up, or truncated by a new leader, which reloads the groups from its log). A
lone broker's high watermark follows every append, so nothing waits there.

Everything runs on the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from odradek.clock import Clock
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig, ConfigError
from odradek.coordinator.assignors import ASSIGNORS, TopicInfo, assignor_names
from odradek.coordinator.consumer_group import ConsumerGroupSettings
from odradek.coordinator.coordinator import GroupConfig, GroupCoordinator, GroupWrite
from odradek.coordinator.internal_topic import (
    CommitPoint,
    InternalTopic,
    WaitReplicated,
    committed,
)
from odradek.coordinator.loader import ShardLoader
from odradek.coordinator.log_reader import read_batches
from odradek.coordinator.messages import NO_PRODUCER_ID
from odradek.protocol.control import marker_commits
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader
from odradek.protocol.records import Record

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

T = TypeVar("T")


def append_writes(coordinator: GroupCoordinator, append: Callable[[GroupWrite], int]) -> ErrorCode:
    """Append the writes ``coordinator`` asked for, in order, through ``append`` (the
    leader's log: the offset of the batch's first record, or :class:`KafkaError`), and tell
    each its outcome — which may ask for more writes, appended in turn. The error of the first
    write refused, or NONE.

    Called in the same event-loop turn as the operation that asked for them, so no other
    operation sees the state between the two: the state a refused write would have made is
    never seen (the classic groups' changes wait for ``applied``), or is put back by
    ``failed`` before anything else runs (the consumer groups')."""
    error = ErrorCode.none
    while writes := coordinator.take_writes():
        refused = ErrorCode.none
        for write in writes:
            if refused != ErrorCode.none:
                # As Kafka appends an operation's records in one batch: nothing of it goes
                # into the log after a part was refused.
                write.failed(refused)
                continue
            try:
                first = append(write)
            except KafkaError as e:
                refused = e.code
                if error == ErrorCode.none:
                    error = e.code
                write.failed(e.code)
                continue
            write.applied(first)
    return error


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
    )


class TopicsCatalog:
    """The broker's topics as the consumer groups' assignors see them."""

    def __init__(self, topics: TopicManager) -> None:
        self.topics = topics

    def topic_info(self, name: str) -> TopicInfo | None:
        topic = self.topics.topic(name)
        return None if topic is None else TopicInfo(topic.topic_id, topic.partitions)

    def topic_names(self) -> list[str]:
        return [t.name for t in self.topics.topics()]


class OffsetsTopic(InternalTopic):
    """``__consumer_offsets`` as the coordinator writes and replays it."""

    def __init__(self, topics: TopicManager, config: BrokerConfig, clock: Clock) -> None:
        super().__init__(
            OFFSETS_TOPIC, "offsets.topic", topics, config, clock, {"compression.type": "producer"}
        )

    def topic_configs(self) -> dict[str, str]:
        # Its writes are acks=all ones: a topic made with fewer replicas than the broker's
        # min.insync.replicas (a cluster smaller than offsets.topic.replication.factor) would
        # refuse every one of them, so its minimum is at most its replication factor.
        return super().topic_configs() | {
            "min.insync.replicas": str(
                min(self.config.get_int("min.insync.replicas"), self.replication())
            )
        }

    def write(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
    ) -> int:
        """Append ``records`` (a transactional commit's as the producer's batch); the offset
        of the first."""
        _, info = self.append(
            partition,
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=producer_id != NO_PRODUCER_ID,
        )
        return info.first_offset

    def read_from(self, partition: Partition, offset: int) -> tuple[list[LogEntry], int | None]:
        """The entries of one read from ``offset`` on, and the offset of the next read (as
        :func:`~odradek.coordinator.log_reader.read_batches`)."""
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


def _log_end(partition: Partition) -> CommitPoint:
    """The point of an answer made now: the log end, or nothing to wait for when everything in
    the log is committed already (an answer that wrote nothing is not refused because the ISR
    is smaller now than ``min.insync.replicas``: what it depends on was committed before)."""
    log_end = partition.log.log_end_offset
    if partition.high_watermark >= log_end:
        return CommitPoint(None, log_end)
    return CommitPoint(partition, log_end)


class GroupCoordinatorRuntime:
    """The broker's group coordinator, loaded and ticking."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicManager,
        clock: Clock,
        wait_replicated: WaitReplicated,
    ) -> None:
        self.clock = clock
        self._wait_replicated = wait_replicated
        self.offsets_topic = OffsetsTopic(topics, config, clock)
        self.coordinator = GroupCoordinator(
            group_config(config, self.offsets_topic.partitions), clock
        )
        self.coordinator.consumer.topics = TopicsCatalog(topics)
        # offsets.commit.timeout.ms: how long an answer waits for its records' replication.
        self.commit_timeout_ms = config.get_int("offsets.commit.timeout.ms")
        self._loader = ShardLoader(self.offsets_topic, _GroupShard(self), "groups")
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def load(self) -> None:
        """A lone broker: replay all of ``__consumer_offsets`` (synchronously: the broker is not
        serving yet) and own every partition, those of a topic still to be created too."""
        count = 0
        for index in range(self.offsets_topic.partitions):
            partition = self.offsets_topic.partition(index)
            if partition is not None:
                count += self._loader.replay_all(partition)
        self.coordinator.finish_loading()
        if count:
            log.info("replayed %d records of %s", count, OFFSETS_TOPIC)

    def start(self) -> None:
        """Start the timers; a lone broker loads everything first. In a cluster nothing is
        owned until :meth:`follow`."""
        if self.offsets_topic.topics.leads_alone:
            self.load()
        self._wake = asyncio.Event()
        self.coordinator.timers.on_earlier_deadline = self._wake.set
        self._task = asyncio.create_task(self._run_timers(), name="group-coordinator-timers")

    # -- ownership -----------------------------------------------------------------------------

    def follow(self, leadership_listeners: list[Callable[[Partition, bool], None]]) -> None:
        """In a cluster: serve the groups of the ``__consumer_offsets`` partitions this broker
        leads, loading those it leads now at once (before the broker serves), and the others
        as leadership moves here (``leadership_listeners``: the replica manager's)."""
        leadership_listeners.append(self.leadership_changed)
        self._loader.load_led()

    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        """A partition state was applied (called again for the same role: idempotent): a new
        leadership of an offsets partition loads its groups (their requests get
        COORDINATOR_LOAD_IN_PROGRESS meanwhile); a lost one unloads them."""
        self._loader.leadership_changed(partition, leader)

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        """Replay one read's records; how many, and where the next read starts (None: done)."""
        entries, next_offset = self.offsets_topic.read_from(partition, offset)
        for entry in entries:
            if isinstance(entry, TransactionMarker):
                self.coordinator.complete_transaction(
                    partition.index, entry.producer_id, entry.commit
                )
            else:
                self.coordinator.replay(
                    entry.key, entry.value, offset=entry.offset, producer_id=entry.producer_id
                )
        return len(entries), next_offset

    # -- transactions --------------------------------------------------------------------------

    def transaction_completed(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was appended to ``__consumer_offsets-<offsets_partition>`` for
        ``producer_id``: its pending transactional offset commits there become committed
        (``commit``) or are dropped. Called by the WriteTxnMarkers handler after the append.

        A partition still loading needs nothing: its load reads on to the log end, so meets
        the marker after the commits it applies to."""
        if offsets_partition in self.coordinator.owned:
            self.coordinator.complete_transaction(offsets_partition, producer_id, commit)

    # -- operations ----------------------------------------------------------------------------

    def perform(self, operation: Callable[[GroupCoordinator], T]) -> tuple[T, ErrorCode]:
        """Run one operation of the state machine, then append the writes it asked for; its
        value, and the error of the first write the log refused (NONE: every one taken). The
        answer made of it waits for :meth:`commit_point` (the caller's wait)."""
        value = operation(self.coordinator)
        return value, append_writes(self.coordinator, self._append)

    def tick(self) -> int:
        """Act on the coordinator's deadlines that passed (and append what they wrote)."""
        fired, _ = self.perform(lambda coordinator: coordinator.tick())
        return fired

    def _append(self, write: GroupWrite) -> int:
        return self.offsets_topic.write(
            write.partition,
            write.records,
            producer_id=write.producer_id,
            producer_epoch=write.producer_epoch,
        )

    # -- answers -------------------------------------------------------------------------------

    def commit_point(self, group_id: str) -> CommitPoint:
        """Where an answer about ``group_id`` made now must wait until: its partition's log end
        (every record the coordinator's state of the group may come from)."""
        index = self.coordinator.partition_for(group_id)
        partition = self.offsets_topic.partition(index)
        if partition is None or not self.coordinator.is_active(index):
            return CommitPoint(None, 0)
        return _log_end(partition)

    async def committed(self, points: Sequence[CommitPoint], api_key: int = -1) -> list[ErrorCode]:
        """Wait until the answers at ``points`` may be sent, at most
        ``offsets.commit.timeout.ms``; each one's outcome, NONE or the error to answer with
        instead."""
        return await committed(
            points, self._wait_replicated, self.commit_timeout_ms / 1000, api_key
        )

    def commit_points(self) -> list[CommitPoint]:
        """The points of every partition served here (for an answer about all groups)."""
        points = []
        for index in sorted(self.coordinator.owned):
            partition = self.offsets_topic.partition(index)
            if partition is not None:
                points.append(_log_end(partition))
        return points

    async def _run_timers(self) -> None:
        """Sleep until the next deadline (or an earlier one appears), then tick."""
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while not self._stopping:
            deadline = self.coordinator.next_deadline()
            self._wake.clear()
            now = self.clock.monotonic_ms()
            if deadline is None or deadline > now:
                alarm = (
                    None
                    if deadline is None
                    else loop.call_later((deadline - now) / 1000, self._wake.set)
                )
                try:
                    await self._wake.wait()
                finally:
                    if alarm is not None:
                        alarm.cancel()
            if self._stopping:
                return
            try:
                self.tick()
            except Exception:
                log.exception("group coordinator timers failed")

    def on_topic_deleted(self, topic: str) -> None:
        if topic != OFFSETS_TOPIC:
            self.perform(lambda coordinator: coordinator.remove_offsets_of_topics({topic}))
        elif not self.offsets_topic.topics.leads_alone:
            # Its partitions are no longer led here (a lone broker keeps serving and creates
            # the topic again on the next write, as before).
            self._loader.unload_all(self.coordinator.owned | self.coordinator.loading)

    async def stop(self) -> None:
        """Answer waiting JoinGroup/SyncGroup requests and stop the timers and loads."""
        self.coordinator.shutdown()
        self._stopping = True
        self._loader.stop()
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


class _GroupShard:
    """The group coordinator as its loader sees it: a partition loaded once stays loaded
    across leader epochs."""

    def __init__(self, runtime: GroupCoordinatorRuntime) -> None:
        self._runtime = runtime

    def is_loaded(self, index: int, epoch: int) -> bool:
        coordinator = self._runtime.coordinator
        return index in coordinator.owned or index in coordinator.loading

    def begin_loading(self, index: int, epoch: int) -> None:
        self._runtime.coordinator.begin_loading(index)

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        return self._runtime.replay_from(partition, offset)

    def finish_loading(self, index: int) -> None:
        self._runtime.coordinator.finish_loading([index])

    def unload(self, index: int) -> None:
        if self.is_loaded(index, -1):
            self._runtime.coordinator.unload(index)
