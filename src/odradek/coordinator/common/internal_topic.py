"""What the two coordinators share (Kafka's coordinator-common): their internal topic
(``__consumer_offsets``, ``__transaction_state``), and the "append, then answer once
committed" of their writes.

:class:`InternalTopic` is compacted, created on first need as Kafka creates it, and written one
RecordBatch v2 at a time through the broker's own append path (``Partition.append`` on the
leader, synchronously, as Kafka's ``CoordinatorPartitionWriter.append``), checked as an acks=all
produce (NOT_ENOUGH_REPLICAS while the ISR is below ``min.insync.replicas``). Reading back is
:mod:`odradek.coordinator.common.log_reader`'s.

A coordinator answers once what it wrote is committed: a :class:`CommitPoint` is where an answer
stands in a partition (the log end when it was made), and :func:`committed` waits — in the
broker's purgatory, as an acks=all produce — until the high watermark passes it, or maps the
failure as Kafka's ``CoordinatorOperationExceptionHelper`` does (:func:`write_error`).

A crash after an append leaves the batch in the log (replayed on the next load) or not at all
(the coordinator answered nothing yet). Called on the broker's event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.clock import Clock
from odradek.cluster.metadata.store import result_now
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import InvalidBatch, validate_batches
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage import AppendInfo

NO_PRODUCER_ID = -1


def write_error(code: ErrorCode) -> ErrorCode:
    """A coordinator's failed write (refused by the log, or not committed in time) as Kafka
    answers it to the request that made it."""
    if code in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return ErrorCode.unknown_server_error
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    return code


class WaitReplicated(Protocol):
    """The broker's purgatory wait of an acks=all produce (``Purgatory.replicated``): NONE
    once the high watermark reached ``required_offset``, else the error that ended the wait
    (REQUEST_TIMED_OUT after ``timeout_s``)."""

    def __call__(
        self, partition: Partition, required_offset: int, timeout_s: float, api_key: int = -1
    ) -> Awaitable[ErrorCode]: ...


@dataclass(frozen=True, slots=True)
class CommitPoint:
    """Where an answer of a coordinator stands in its partition: the log end offset when the
    answer was made (``partition`` None: nothing to wait for — the partition is not served
    here, or a lone broker has no such partition yet)."""

    partition: Partition | None
    offset: int

    def outcome(self) -> ErrorCode | None:
        """None while the high watermark is below ``offset``; then NONE, or the error to
        answer with instead (NOT_COORDINATOR once leadership moved, COORDINATOR_NOT_AVAILABLE
        when the ISR fell below ``min.insync.replicas``)."""
        if self.partition is None:
            return ErrorCode.none
        result = self.partition.replicated(self.offset)
        return None if result is None else write_error(result)


async def committed(
    points: Sequence[CommitPoint], wait: WaitReplicated, timeout_s: float, api_key: int = -1
) -> list[ErrorCode]:
    """Wait until every point is committed, at most ``timeout_s``; each one's outcome: NONE,
    or the error to answer with instead (:func:`write_error`: a timeout is
    COORDINATOR_NOT_AVAILABLE, as Kafka's)."""

    async def one(point: CommitPoint) -> ErrorCode:
        if point.partition is None:
            return ErrorCode.none
        return write_error(await wait(point.partition, point.offset, timeout_s, api_key))

    return list(await asyncio.gather(*(one(point) for point in points)))


class InternalTopic:
    """One internal topic: ``<prefix>.num.partitions``, ``<prefix>.replication.factor`` (fewer
    while fewer brokers are live, as Kafka's tests run it; Kafka itself refuses until enough
    brokers are up) and ``<prefix>.segment.bytes`` from the broker's settings, plus ``configs``
    of its own. Its writes are acks=all ones: a topic made with fewer replicas than its minimum
    ISR (the broker setting ``min_isr_setting``; a cluster smaller than its replication factor)
    would refuse every one of them, so its ``min.insync.replicas`` is at most its replication
    factor."""

    def __init__(
        self,
        name: str,
        prefix: str,
        topics: TopicManager,
        config: BrokerConfig,
        clock: Clock,
        configs: Mapping[str, str],
        min_isr_setting: str,
    ) -> None:
        self.name = name
        self.prefix = prefix
        self.topics = topics
        self.config = config
        self.clock = clock
        self._configs = dict(configs)
        self._min_isr_setting = min_isr_setting
        # The creation in flight: two FindCoordinator requests at once make the topic once.
        self._creating: asyncio.Future[None] | None = None

    @property
    def partitions(self) -> int:
        """The topic's partition count, or the one it will be created with."""
        existing = self.topics.topic(self.name)
        if existing is not None:
            return existing.partitions
        return self.config.get_int(f"{self.prefix}.num.partitions")

    def replication(self) -> int:
        return min(
            self.config.get_int(f"{self.prefix}.replication.factor"),
            self.topics.live_broker_count(),
        )

    async def ensure(self) -> None:
        """Create the topic unless it exists (FindCoordinator does, before anyone appends)."""
        if self.topics.topic(self.name) is not None:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create())
        await asyncio.shield(self._creating)

    def _create_now(self) -> None:
        """Made by FindCoordinator first, as clients ask. A write before that creates it here
        when the store answers at once (a single broker); in a cluster it starts the creation
        (a ZooKeeper write, awaited off this call) and is refused meanwhile, retriably."""
        if self.topics.store.answers_at_once:
            result_now(self._create(inline=True))
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.ensure_future(self._create())
        raise KafkaError(ErrorCode.coordinator_not_available, f"{self.name} is being created")

    async def _create(self, *, inline: bool = False) -> None:
        await self.topics.create_topic(
            self.name,
            self.config.get_int(f"{self.prefix}.num.partitions"),
            self.replication(),
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config.get_int(f"{self.prefix}.segment.bytes")),
                **self.topic_configs(),
            },
            inline=inline,
        )

    def topic_configs(self) -> dict[str, str]:
        """The topic's own configs beyond compaction and segment size."""
        min_isr = min(self.config.get_int(self._min_isr_setting), self.replication())
        return self._configs | {"min.insync.replicas": str(min_isr)}

    def partition(self, index: int) -> Partition | None:
        return self.topics.partition(self.name, index)

    def append(
        self,
        index: int,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = -1,
        transactional: bool = False,
    ) -> tuple[Partition, AppendInfo]:
        """Append ``records`` as one batch to partition ``index`` as its leader; the partition
        and where the batch went. Raises :class:`KafkaError` (UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER, RECORD_LIST_TOO_LARGE, KAFKA_STORAGE_ERROR, …)."""
        if self.topics.topic(self.name) is None:
            self._create_now()
        target = self.partition(index)
        if target is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition, f"{self.name}-{index} is missing"
            )
        batch = bytearray(
            encode_batch(
                [NewRecord(key, value) for key, value in records],
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                # A coordinator's transactional batch is Kafka's: base sequence 0, checked for
                # the producer's epoch only, never for its sequence.
                base_sequence=0 if transactional else -1,
                transactional=transactional,
                now_ms=self.clock.time_ms(),
            )
        )
        max_bytes = self.topics.topic_config(self.name).get_int("max.message.bytes")
        try:
            headers = validate_batches(batch, max_bytes)
        except InvalidBatch as e:
            code = (
                ErrorCode.record_list_too_large
                if e.error == "message_too_large"
                else ErrorCode.corrupt_message
            )
            raise KafkaError(code, str(e)) from e
        try:
            return target, target.append(batch, headers, None)
        except OSError as e:
            raise KafkaError(ErrorCode.kafka_storage_error, str(e)) from e
