"""The share groups' side of the partition leaders (Kafka's ``SharePartitionManager``): one
:class:`~odradek.cluster.share.share_partition.SharePartition` per (group, partition) led here,
ShareFetch's reads and acquisitions, and acknowledgements.

A ShareFetch reads through the replica manager's fetch path (``fetch_records``, its DelayedFetch
long-poll and read bounds: read_committed stops at the last stable offset) from each partition's
next fetch offset, then acquires what it read for the member. A fetch that got nothing waits
again, until its ``max_wait`` — at most until the next record lock expires or an acknowledgement
or release makes records available again, so a released record is delivered without waiting for
new data (a fetch parked for new data is woken when records of its group are released). A
share-partition starts, the first time a group fetches it here, at the log start
(``share.auto.offset.reset=earliest``) or the high watermark (``latest``, the default), as the
group's configs say.

Crash: the share-partitions are in memory only; a new leader, or this broker after a restart,
starts each group again from ``share.auto.offset.reset``. Everything runs on the broker's event
loop (reading a fetched slice's bytes to find its batches' offsets included, as the small reads of
the coordinators' loads).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.clock import Clock
from odradek.cluster.replication.delayed import FetchParams, FetchResult
from odradek.cluster.replication.partition import FetchIsolation, Partition, RecordSlice
from odradek.cluster.replication.replica_manager import ReplicaManager
from odradek.cluster.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRange,
    FetchedBatch,
    SharePartition,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch_response import TopicData
from odradek.protocol.record_batch import iter_headers

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

EARLIEST = "earliest"
LATEST = "latest"
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


@dataclass(frozen=True, slots=True)
class ShareSettings:
    """The broker's ``group.share.*`` settings the partition leaders use."""

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2_000


@dataclass(frozen=True, slots=True)
class GroupShareConfig:
    """A group's own settings (group configs ``share.*``), the broker's where unset."""

    auto_offset_reset: str = LATEST
    record_lock_duration_ms: int | None = None
    isolation_level: str = READ_UNCOMMITTED


@dataclass(frozen=True, slots=True)
class _Position:
    """A share-partition's read, as the replica manager's fetch asks it (no fetch session)."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    sent_high_watermark: int | None = None
    sent_last_stable_offset: int | None = None
    sent_log_start_offset: int | None = None


@dataclass(slots=True)
class ShareFetched:
    """One partition's answer to a ShareFetch."""

    error: ErrorCode = ErrorCode.none
    records: bytes | None = None
    acquired: list[AcquiredRange] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ShareFetchLimits:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int


class SharePartitionManager:
    """The share-partitions of this broker's partitions (see the module doc)."""

    def __init__(
        self,
        replicas: ReplicaManager,
        partition_of: Callable[[str, int], Partition | None],
        clock: Clock,
        settings: ShareSettings,
        group_config: Callable[[str], GroupShareConfig] = lambda _: GroupShareConfig(),
    ) -> None:
        self.replicas = replicas
        self._partition_of = partition_of
        self.clock = clock
        self.settings = settings
        self.group_config = group_config
        self._shares: dict[tuple[str, str, int], SharePartition] = {}
        # The leader epoch each share-partition was made in: a new leadership starts anew.
        self._epochs: dict[tuple[str, str, int], int] = {}
        # Per group: set (and replaced) whenever records become available again, for its
        # waiting fetches.
        self._changed: dict[str, asyncio.Event] = {}

    def lock_ms(self, group_id: str) -> int:
        own = self.group_config(group_id).record_lock_duration_ms
        return own if own is not None else self.settings.record_lock_duration_ms

    # -- share-partitions ----------------------------------------------------------------------

    def share_partition(self, group_id: str, topic: str, index: int) -> SharePartition:
        """The group's share-partition of a partition led here (made on first use); raises
        :class:`KafkaError` for a partition not hosted or not led here."""
        partition = self._partition_of(topic, index)
        if partition is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        key = (group_id, topic, index)
        share = self._shares.get(key)
        if share is not None and self._epochs.get(key) == partition.leader_epoch:
            if share.start_offset < partition.log.log_start_offset:
                share.reset(partition.log.log_start_offset)  # retention passed the group
            return share
        config = self.group_config(group_id)
        start = (
            partition.log.log_start_offset
            if config.auto_offset_reset == EARLIEST
            else partition.high_watermark
        )
        share = SharePartition(
            start,
            delivery_count_limit=self.settings.delivery_count_limit,
            max_record_locks=self.settings.partition_max_record_locks,
        )
        self._shares[key] = share
        self._epochs[key] = partition.leader_epoch
        return share

    def existing(self, group_id: str) -> dict[TopicPartitionKey, SharePartition]:
        """The group's share-partitions made here so far."""
        return {(t, p): s for (g, t, p), s in self._shares.items() if g == group_id}

    def offsets(
        self, group_id: str, keys: Sequence[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, tuple[int, int, int]]:
        """The group's start offset, leader epoch and lag for each of ``keys`` (None: every
        share-partition of the group here) that has a share-partition on a partition led
        here."""
        found: dict[TopicPartitionKey, tuple[int, int, int]] = {}
        wanted = self.existing(group_id) if keys is None else keys
        for topic, index in wanted:
            share = self._shares.get((group_id, topic, index))
            partition = self._partition_of(topic, index)
            if share is None or partition is None or not partition.is_leader:
                continue
            found[(topic, index)] = (
                share.start_offset,
                partition.leader_epoch,
                share.lag(partition.high_watermark),
            )
        return found

    def alter_offset(self, group_id: str, topic: str, index: int, offset: int) -> ErrorCode:
        """AlterShareGroupOffsets of one partition (its group has no members): the group
        starts there, nothing in flight."""
        try:
            share = self.share_partition(group_id, topic, index)
        except KafkaError as e:
            return e.code
        partition = self._partition_of(topic, index)
        assert partition is not None
        share.reset(max(offset, partition.log.log_start_offset))
        return ErrorCode.none

    def delete_offsets(self, group_id: str, topic: str) -> None:
        """DeleteShareGroupOffsets of a topic: the group starts it again from
        ``share.auto.offset.reset``."""
        for key in [k for k in self._shares if k[0] == group_id and k[1] == topic]:
            del self._shares[key]
            self._epochs.pop(key, None)

    def forget_group(self, group_id: str) -> None:
        for key in [k for k in self._shares if k[0] == group_id]:
            del self._shares[key]
            self._epochs.pop(key, None)

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._shares if k[1] == topic]:
            del self._shares[key]
            self._epochs.pop(key, None)

    def _changes(self, group_id: str) -> asyncio.Event:
        event = self._changed.get(group_id)
        if event is None:
            event = self._changed[group_id] = asyncio.Event()
        return event

    def _wake(self, group_id: str) -> None:
        event = self._changed.pop(group_id, None)
        if event is not None:
            event.set()

    # -- acknowledgements and releases ---------------------------------------------------------

    def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        index: int,
        batches: Sequence[AcknowledgementBatch],
    ) -> ErrorCode:
        try:
            share = self.share_partition(group_id, topic, index)
        except KafkaError as e:
            return e.code
        now = self.clock.monotonic_ms()
        share.expire_locks(now)
        error = share.acknowledge(member_id, batches, now, self.lock_ms(group_id))
        if error == ErrorCode.none:
            self._wake(group_id)
        return error

    def release(self, group_id: str, member_id: str, keys: Sequence[TopicPartitionKey]) -> None:
        """A member's share session ended: what it holds of ``keys`` is available again."""
        released = 0
        for topic, index in keys:
            share = self._shares.get((group_id, topic, index))
            if share is not None:
                released += share.release_member(member_id)
        if released:
            self._wake(group_id)

    # -- ShareFetch ----------------------------------------------------------------------------

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        keys: Sequence[TopicPartitionKey],
        limits: ShareFetchLimits,
        *,
        api_key: int = -1,
    ) -> dict[TopicPartitionKey, ShareFetched]:
        """Acquire records of ``keys`` for the member (see the module doc)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.max_wait_ms / 1000
        config = self.group_config(group_id)
        isolation = (
            FetchIsolation.TXN_COMMITTED
            if config.isolation_level == READ_COMMITTED
            else FetchIsolation.HIGH_WATERMARK
        )
        lock_ms = self.lock_ms(group_id)
        while True:
            answers: dict[TopicPartitionKey, ShareFetched] = {}
            positions: list[tuple[TopicPartitionKey, _Position]] = []
            now = self.clock.monotonic_ms()
            next_lock: int | None = None
            changed = self._changes(group_id)
            for key in keys:
                answer = answers[key] = ShareFetched()
                partition = self._partition_of(*key)
                if partition is not None:
                    answer.leader_id = partition.leader_id
                    answer.leader_epoch = partition.leader_epoch
                try:
                    share = self.share_partition(group_id, *key)
                except KafkaError as e:
                    answer.error = e.code
                    continue
                if share.expire_locks(now):
                    self._wake(group_id)
                offset = share.next_fetch_offset()
                lock = share.next_deadline()
                if lock is not None:
                    next_lock = lock if next_lock is None else min(next_lock, lock)
                if offset is not None:
                    positions.append((key, _Position(offset, limits.max_bytes)))
            remaining_s = deadline - loop.time()
            wait_ms = max(int(remaining_s * 1000), 0)
            if next_lock is not None:
                wait_ms = min(wait_ms, max(next_lock - now, 0))
            got = False
            if positions:
                params = FetchParams(-1, isolation, wait_ms, limits.min_bytes, limits.max_bytes)
                result = await self._read_or_wake(params, positions, changed, api_key)
                if result is not None:
                    got = self._acquire(
                        group_id, member_id, result.topics, answers, limits.max_records, lock_ms
                    )
            elif wait_ms > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), wait_ms / 1000)
            if got or any(a.error != ErrorCode.none for a in answers.values()):
                return answers
            if loop.time() >= deadline:
                return answers

    async def _read_or_wake(
        self,
        params: FetchParams,
        positions: Sequence[tuple[TopicPartitionKey, _Position]],
        changed: asyncio.Event,
        api_key: int,
    ) -> FetchResult | None:
        """The replica manager's read of ``positions`` (long-polling as it does), given up
        for None when ``changed`` is set first: records of the group became available again
        (released by another member), to be read from where they are."""
        read = asyncio.ensure_future(
            self.replicas.fetch_records(params, positions, api_key=api_key)
        )
        woken = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait({read, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            if not read.done():
                read.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await read
        return None if read.cancelled() else read.result()

    def _acquire(
        self,
        group_id: str,
        member_id: str,
        topics: Sequence[TopicData[RecordSlice]],
        answers: Mapping[TopicPartitionKey, ShareFetched],
        max_records: int,
        lock_ms: int,
    ) -> bool:
        now = self.clock.monotonic_ms()
        got = False
        remaining = max_records
        for topic in topics:
            for data in topic.partitions:
                key = (topic.name, data.index)
                answer = answers[key]
                if data.error_code:
                    answer.error = ErrorCode(data.error_code)
                    continue
                if data.records is None or not data.records_size or remaining <= 0:
                    continue
                try:
                    share = self.share_partition(group_id, *key)
                except KafkaError as e:
                    answer.error = e.code
                    continue
                raw = data.records.read_bytes()
                batches = _batches(raw, data.aborted_transactions)
                acquired = share.acquire(member_id, batches, remaining, now, lock_ms)
                if acquired:
                    got = True
                    answer.acquired = acquired
                    answer.records = raw
                    remaining -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
        return got


def _batches(raw: bytes, aborted: Sequence[tuple[int, int]]) -> list[FetchedBatch]:
    """The batches of a read, each marked skipped when it is a control batch or one of an
    aborted transaction (``aborted``: producer id and first offset, as read_committed gets
    them; a producer's transaction is aborted from its first offset to its ABORT marker)."""
    pending = sorted(aborted, key=lambda entry: entry[1])
    open_aborts: set[int] = set()
    batches: list[FetchedBatch] = []
    for header in iter_headers(raw):
        while pending and pending[0][1] <= header.base_offset:
            open_aborts.add(pending.pop(0)[0])
        skipped = header.is_control
        if header.is_control:
            open_aborts.discard(header.producer_id)
        elif header.is_transactional and header.producer_id in open_aborts:
            skipped = True
        batches.append(FetchedBatch(header.base_offset, header.last_offset, skipped))
    return batches
