"""The group coordinator inside a broker: its records in ``__consumer_offsets``, its timers on the
event loop.

:class:`OffsetsTopic` is the coordinator's :class:`~odradek.coordinator.coordinator.OffsetsLog`:
records become one RecordBatch v2 per write, appended through the broker's own append path
(``Partition.append``), and are read back in order at start. The topic is created on first need
(FindCoordinator or a first write), compacted, as Kafka creates it.

:class:`GroupCoordinatorRuntime` loads the coordinator from the topic, then runs a task that sleeps
until the coordinator's next deadline and calls :meth:`GroupCoordinator.tick`. Everything runs on
the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator, Sequence

from odradek.clock import Clock
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.coordinator import GroupConfig, GroupCoordinator
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import InvalidBatch, validate_batches
from odradek.protocol.records import NewRecord, RecordDecodeError, encode_batch, iter_records

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_READ_BYTES = 1 << 20


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
    )


class OffsetsTopic:
    """``__consumer_offsets`` as the coordinator writes and replays it."""

    def __init__(self, topics: TopicManager, config: BrokerConfig, clock: Clock) -> None:
        self.topics = topics
        self.config = config
        self.clock = clock

    @property
    def partitions(self) -> int:
        """The topic's partition count, or the one it will be created with."""
        existing = self.topics.topic(OFFSETS_TOPIC)
        if existing is not None:
            return existing.partitions
        return self.config.get_int("offsets.topic.num.partitions")

    def ensure(self) -> None:
        if self.topics.topic(OFFSETS_TOPIC) is not None:
            return
        # offsets.topic.replication.factor, or fewer while fewer brokers are live (as Kafka's
        # tests run it; Kafka itself refuses until enough brokers are up).
        replication = min(
            self.config.get_int("offsets.topic.replication.factor"),
            self.topics.live_broker_count(),
        )
        self.topics.create_topic(
            OFFSETS_TOPIC,
            self.config.get_int("offsets.topic.num.partitions"),
            replication,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config.get_int("offsets.topic.segment.bytes")),
                "compression.type": "producer",
            },
        )

    def write(self, partition: int, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        self.ensure()
        target = self.topics.partition(OFFSETS_TOPIC, partition)
        if target is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"{OFFSETS_TOPIC}-{partition} is missing"
            )
        batch = bytearray(
            encode_batch(
                [NewRecord(key, value) for key, value in records], now_ms=self.clock.time_ms()
            )
        )
        max_bytes = self.topics.topic_config(OFFSETS_TOPIC).get_int("max.message.bytes")
        try:
            headers = validate_batches(batch, max_bytes)
        except InvalidBatch as e:
            code = (
                ErrorCode.record_list_too_large
                if e.error == "message_too_large"
                else (ErrorCode.corrupt_message)
            )
            raise KafkaError(code, str(e)) from e
        try:
            target.append(batch, headers, None)
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, str(e)) from e

    def read_all(self) -> Iterator[tuple[bytes | None, bytes | None]]:
        """Every record of every partition, in offset order within a partition."""
        if self.topics.topic(OFFSETS_TOPIC) is None:
            return
        for index in range(self.partitions):
            partition = self.topics.partition(OFFSETS_TOPIC, index)
            if partition is None:
                continue
            partition_log = partition.log
            offset = partition_log.log_start_offset
            while offset < partition_log.log_end_offset:
                piece = partition_log.read(offset, _READ_BYTES)
                if piece is None:
                    break
                data = piece.read_bytes()
                moved = False
                try:
                    for header, batch_records in iter_records(data):
                        moved = True
                        offset = header.next_offset
                        if header.is_control:
                            continue
                        for record in batch_records:
                            yield record.key, record.value
                except RecordDecodeError as e:
                    log.error(
                        "%s-%d is unreadable at offset %d: %s", OFFSETS_TOPIC, index, offset, e
                    )
                    break
                if not moved:
                    break


class GroupCoordinatorRuntime:
    """The broker's group coordinator, loaded and ticking."""

    def __init__(self, config: BrokerConfig, topics: TopicManager, clock: Clock) -> None:
        self.clock = clock
        self.offsets_topic = OffsetsTopic(topics, config, clock)
        self.coordinator = GroupCoordinator(
            group_config(config, self.offsets_topic.partitions), self.offsets_topic, clock
        )
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def load(self) -> None:
        """Replay ``__consumer_offsets`` (synchronously: the broker is not serving yet)."""
        count = 0
        for key, value in self.offsets_topic.read_all():
            self.coordinator.replay(key, value)
            count += 1
        self.coordinator.finish_loading()
        if count:
            log.info("replayed %d records of %s", count, OFFSETS_TOPIC)

    def start(self) -> None:
        self.load()
        self._wake = asyncio.Event()
        self.coordinator.timers.on_earlier_deadline = self._wake.set
        self._task = asyncio.create_task(self._run_timers(), name="group-coordinator-timers")

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
                self.coordinator.tick()
            except Exception:
                log.exception("group coordinator timers failed")

    def on_topic_deleted(self, topic: str) -> None:
        if topic != OFFSETS_TOPIC:
            self.coordinator.remove_offsets_of_topics({topic})

    async def stop(self) -> None:
        """Answer waiting JoinGroup/SyncGroup requests and stop the timers."""
        self.coordinator.shutdown()
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
