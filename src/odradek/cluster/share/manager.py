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

Persistence (with a :class:`~odradek.cluster.share.persister.StatePersister`, Kafka's
``Persister``): a share-partition is read from the share coordinator the first time it is used in a
leader epoch (a ShareFetch or ShareAcknowledge waits for that read, never the event loop), and made
from ``share.auto.offset.reset`` and initialized there when nothing is stored yet. An
acknowledgement is written (WriteShareGroupState: the start offset and the state of every offset
in flight) before its answer leaves; records released by an expired lock or a closed session are
written in the background, one write at a time per share-partition. A write refused as fenced (a
newer leader or state epoch wrote since) drops the share-partition here: the next use reads it
again.

Crash: what was acknowledged is in ``__share_group_state``; a new leader, or this broker after a
restart, starts from there (records acquired and not yet acknowledged are delivered again; their
delivery counts are those last written). Without a persister the share-partitions are in memory
only and start again from ``share.auto.offset.reset``. Everything runs on the broker's event loop
(reading a fetched slice's bytes to find its batches' offsets included, as the small reads of the
coordinators' loads).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.clock import Clock
from odradek.cluster.replication.delayed import FetchParams, FetchResult
from odradek.cluster.replication.partition import FetchIsolation, Partition, RecordSlice
from odradek.cluster.replication.replica_manager import ReplicaManager
from odradek.cluster.share.persister import PersistedState, StatePersister
from odradek.cluster.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
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
        persister: StatePersister | None = None,
        topic_id_of: Callable[[str], uuid.UUID | None] = lambda _: None,
    ) -> None:
        self.replicas = replicas
        self.persister = persister
        self._topic_id_of = topic_id_of
        # Reads of persisted state under way, one per share-partition.
        self._loads: dict[tuple[str, str, int], asyncio.Future[ErrorCode]] = {}
        # Background writes: one task per share-partition, and whether it must write again.
        self._writers: dict[tuple[str, str, int], asyncio.Task[None]] = {}
        self._dirty: set[tuple[str, str, int]] = set()
        self._write_locks: dict[tuple[str, str, int], asyncio.Lock] = {}
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
                self._write_later(key)
            return share
        if self.persister is not None:
            # Not read from the share coordinator yet in this leader epoch (see prepare).
            raise KafkaError(ErrorCode.coordinator_load_in_progress)
        share = SharePartition(
            self._reset_offset(group_id, partition),
            delivery_count_limit=self.settings.delivery_count_limit,
            max_record_locks=self.settings.partition_max_record_locks,
        )
        self._shares[key] = share
        self._epochs[key] = partition.leader_epoch
        return share

    def _reset_offset(self, group_id: str, partition: Partition) -> int:
        if self.group_config(group_id).auto_offset_reset == EARLIEST:
            return partition.log.log_start_offset
        return partition.high_watermark

    # -- persisted state -----------------------------------------------------------------------

    async def prepare(
        self, group_id: str, keys: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """Read from the share coordinator each of the group's share-partitions of ``keys``
        not read yet in its partition's leader epoch; the error of each that could not be
        (nothing without a persister)."""
        if self.persister is None:
            return {}
        waits: dict[TopicPartitionKey, asyncio.Future[ErrorCode]] = {}
        for topic, index in keys:
            key = (group_id, topic, index)
            partition = self._partition_of(topic, index)
            if partition is None or not partition.is_leader:
                continue
            if key in self._shares and self._epochs.get(key) == partition.leader_epoch:
                continue
            load = self._loads.get(key)
            if load is None:
                load = asyncio.ensure_future(self._load(key, partition))
                self._loads[key] = load
                load.add_done_callback(self._load_done(key))
            waits[(topic, index)] = load
        failed: dict[TopicPartitionKey, ErrorCode] = {}
        for tp, load in waits.items():
            error = await asyncio.shield(load)
            if error != ErrorCode.none:
                failed[tp] = error
        return failed

    def _load_done(self, key: tuple[str, str, int]) -> Callable[[asyncio.Future[ErrorCode]], None]:
        def done(_: asyncio.Future[ErrorCode]) -> None:
            self._loads.pop(key, None)

        return done

    async def _load(self, key: tuple[str, str, int], partition: Partition) -> ErrorCode:
        persister = self.persister
        assert persister is not None
        group_id, topic, index = key
        topic_id = self._topic_id_of(topic)
        if topic_id is None:
            return ErrorCode.unknown_topic_or_partition
        epoch = partition.leader_epoch
        state = await persister.read(group_id, topic_id, index, epoch)
        if state.error != ErrorCode.none:
            log.info(
                "reading the state of share group %s on %s-%d: %s",
                group_id,
                topic,
                index,
                state.error.name,
            )
            return _load_error(state.error)
        if not partition.is_leader or partition.leader_epoch != epoch:
            return ErrorCode.not_leader_or_follower
        log_start = partition.log.log_start_offset
        if state.start_offset < 0:
            share = SharePartition(
                self._reset_offset(group_id, partition),
                delivery_count_limit=self.settings.delivery_count_limit,
                max_record_locks=self.settings.partition_max_record_locks,
            )
            share.state_epoch = max(state.state_epoch, 0)
            error = await persister.initialize(
                group_id, topic_id, index, share.state_epoch, share.start_offset
            )
            if error != ErrorCode.none:
                return _load_error(error)
            if not partition.is_leader or partition.leader_epoch != epoch:
                return ErrorCode.not_leader_or_follower
        else:
            share = SharePartition.restore(
                max(state.start_offset, log_start),
                state.batches,
                state_epoch=state.state_epoch,
                delivery_count_limit=self.settings.delivery_count_limit,
                max_record_locks=self.settings.partition_max_record_locks,
            )
        self._shares[key] = share
        self._epochs[key] = epoch
        return ErrorCode.none

    async def _write(self, key: tuple[str, str, int]) -> ErrorCode:
        """Write the share-partition's state (NONE without a persister), after the writes of
        it already under way: each write carries the whole state, so the last one must be the
        newest, whatever retries the ones before it took."""
        if self.persister is None:
            return ErrorCode.none
        lock = self._write_locks.get(key)
        if lock is None:
            lock = self._write_locks[key] = asyncio.Lock()
        async with lock:
            return await self._write_now(key)

    async def _write_now(self, key: tuple[str, str, int]) -> ErrorCode:
        persister = self.persister
        share = self._shares.get(key)
        if persister is None or share is None:
            return ErrorCode.none
        group_id, topic, index = key
        topic_id = self._topic_id_of(topic)
        if topic_id is None:
            return ErrorCode.unknown_topic_or_partition
        error = await persister.write(
            group_id,
            topic_id,
            index,
            share.state_epoch,
            self._epochs.get(key, -1),
            share.start_offset,
            share.state_batches(),
        )
        fenced = error in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch)
        if fenced and self._shares.get(key) is share:
            # Someone newer wrote: what is here is stale, read it again on the next use.
            self._forget(key)
        return error

    def _write_later(self, key: tuple[str, str, int]) -> None:
        """Write the share-partition's state in the background (released records)."""
        if self.persister is None:
            return
        self._dirty.add(key)
        if key in self._writers:
            return
        task = asyncio.ensure_future(self._write_while_dirty(key))
        self._writers[key] = task
        task.add_done_callback(lambda _: self._writers.pop(key, None))

    async def _write_while_dirty(self, key: tuple[str, str, int]) -> None:
        while key in self._dirty:
            self._dirty.discard(key)
            error = await self._write(key)
            if error != ErrorCode.none:
                log.info("writing the state of share group %s on %s-%d: %s", *key, error.name)

    async def close(self) -> None:
        """Stop the background writes."""
        tasks = list(self._writers.values()) + list(self._loads.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _forget(self, key: tuple[str, str, int]) -> None:
        self._shares.pop(key, None)
        self._epochs.pop(key, None)
        lock = self._write_locks.get(key)
        if lock is not None and not lock.locked():
            del self._write_locks[key]

    def existing(self, group_id: str) -> dict[TopicPartitionKey, SharePartition]:
        """The group's share-partitions made here so far."""
        return {(t, p): s for (g, t, p), s in self._shares.items() if g == group_id}

    async def offsets(
        self, group_id: str, keys: Sequence[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, tuple[int, int, int]]:
        """The group's start offset, leader epoch and lag for each of ``keys`` that has a
        state: its share-partition when the partition is led here, else what the share
        coordinator has (the lag then only when the partition is led here, else -1)."""
        found: dict[TopicPartitionKey, tuple[int, int, int]] = {}
        asked: list[tuple[TopicPartitionKey, Awaitable[PersistedState]]] = []
        for topic, index in keys:
            share = self._shares.get((group_id, topic, index))
            partition = self._partition_of(topic, index)
            if share is not None and partition is not None and partition.is_leader:
                found[(topic, index)] = (
                    share.start_offset,
                    partition.leader_epoch,
                    share.lag(partition.high_watermark),
                )
                continue
            topic_id = self._topic_id_of(topic)
            if self.persister is not None and topic_id is not None:
                asked.append(((topic, index), self.persister.summary(group_id, topic_id, index)))
        states = await asyncio.gather(*(summary for _, summary in asked))
        for (tp, _), state in zip(asked, states, strict=True):
            if state.error != ErrorCode.none or state.start_offset < 0:
                continue
            partition = self._partition_of(*tp)
            lag = -1
            if partition is not None and partition.is_leader:
                lag = max(partition.high_watermark - state.start_offset, 0)
            found[tp] = (state.start_offset, state.leader_epoch, lag)
        return found

    async def alter_offset(self, group_id: str, topic: str, index: int, offset: int) -> ErrorCode:
        """AlterShareGroupOffsets of one partition (its group has no members): the group
        starts there, nothing in flight, in a new state epoch."""
        key = (group_id, topic, index)
        partition = self._partition_of(topic, index)
        if self.persister is None:
            try:
                share = self.share_partition(group_id, topic, index)
            except KafkaError as e:
                return e.code
            assert partition is not None
            share.reset(max(offset, partition.log.log_start_offset))
            return ErrorCode.none
        topic_id = self._topic_id_of(topic)
        if topic_id is None:
            return ErrorCode.unknown_topic_or_partition
        state = await self.persister.summary(group_id, topic_id, index)
        if state.error != ErrorCode.none:
            return state.error
        held = self._shares.get(key)
        if partition is not None and partition.is_leader:
            offset = max(offset, partition.log.log_start_offset)
        epoch = max(state.state_epoch, held.state_epoch if held is not None else 0) + 1
        error = await self.persister.initialize(group_id, topic_id, index, epoch, offset)
        # Read again on the next use, in the new state epoch.
        self._forget(key)
        return error

    async def delete_offsets(self, group_id: str, topic: str, partitions: int) -> ErrorCode:
        """DeleteShareGroupOffsets of a topic: the group starts it again from
        ``share.auto.offset.reset``."""
        for key in [k for k in self._shares if k[0] == group_id and k[1] == topic]:
            self._forget(key)
        return await self._delete_states(group_id, topic, partitions)

    async def _delete_states(self, group_id: str, topic: str, partitions: int) -> ErrorCode:
        topic_id = self._topic_id_of(topic)
        if self.persister is None or topic_id is None:
            return ErrorCode.none
        persister = self.persister
        errors = await asyncio.gather(
            *(persister.delete(group_id, topic_id, index) for index in range(partitions))
        )
        return next((e for e in errors if e != ErrorCode.none), ErrorCode.none)

    async def forget_group(self, group_id: str, topics: Mapping[str, int]) -> None:
        """The group is deleted: its share-partitions here, and its persisted states of
        ``topics`` (name: partition count), go."""
        for key in [k for k in self._shares if k[0] == group_id]:
            self._forget(key)
        for topic, partitions in topics.items():
            await self._delete_states(group_id, topic, partitions)

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._shares if k[1] == topic]:
            self._forget(key)

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

    async def acknowledge(
        self,
        group_id: str,
        member_id: str,
        topic: str,
        index: int,
        batches: Sequence[AcknowledgementBatch],
    ) -> ErrorCode:
        """Apply a member's acknowledgements and, unless they only renew locks, write the
        share-partition's state before answering."""
        failed = await self.prepare(group_id, [(topic, index)])
        if failed:
            return failed[(topic, index)]
        try:
            share = self.share_partition(group_id, topic, index)
        except KafkaError as e:
            return e.code
        now = self.clock.monotonic_ms()
        share.expire_locks(now)
        error = share.acknowledge(member_id, batches, now, self.lock_ms(group_id))
        if error != ErrorCode.none:
            return error
        self._wake(group_id)
        if all(set(b.types) == {AcknowledgeType.RENEW} for b in batches):
            return ErrorCode.none
        return await self._write((group_id, topic, index))

    def release(self, group_id: str, member_id: str, keys: Sequence[TopicPartitionKey]) -> None:
        """A member's share session ended: what it holds of ``keys`` is available again."""
        released = 0
        for topic, index in keys:
            share = self._shares.get((group_id, topic, index))
            if share is not None and share.release_member(member_id):
                released += 1
                self._write_later((group_id, topic, index))
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
            failed = await self.prepare(group_id, keys)
            for key in keys:
                answer = answers[key] = ShareFetched()
                partition = self._partition_of(*key)
                if partition is not None:
                    answer.leader_id = partition.leader_id
                    answer.leader_epoch = partition.leader_epoch
                if key in failed:
                    if failed[key] != ErrorCode.coordinator_not_available:
                        answer.error = failed[key]
                    # Else nothing from it this time (its state is not readable yet): the
                    # member's next fetch asks again.
                    continue
                try:
                    share = self.share_partition(group_id, *key)
                except KafkaError as e:
                    answer.error = e.code
                    continue
                if share.expire_locks(now):
                    self._wake(group_id)
                    self._write_later((group_id, *key))
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
                    # The records are read from the segments on a thread: the loop never waits
                    # for a disk, even one the page cache usually answers.
                    raws = await asyncio.to_thread(_read_slices, result.topics)
                    got = self._acquire(
                        group_id,
                        member_id,
                        result.topics,
                        raws,
                        answers,
                        limits.max_records,
                        lock_ms,
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
        raws: Mapping[TopicPartitionKey, bytes],
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
                raw = raws[key]
                batches = _batches(raw, data.aborted_transactions)
                acquired = share.acquire(member_id, batches, remaining, now, lock_ms)
                if acquired:
                    got = True
                    answer.acquired = acquired
                    answer.records = raw
                    remaining -= sum(r.last_offset - r.first_offset + 1 for r in acquired)
        return got


def _read_slices(topics: Sequence[TopicData[RecordSlice]]) -> dict[TopicPartitionKey, bytes]:
    """The bytes of every slice read (on a thread: they may come from the disk)."""
    return {
        (topic.name, data.index): data.records.read_bytes()
        for topic in topics
        for data in topic.partitions
        if data.records is not None and data.records_size and not data.error_code
    }


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


def _load_error(error: ErrorCode) -> ErrorCode:
    """A failed read of a share-partition's state as its ShareFetch or ShareAcknowledge
    answers it: a leadership the share coordinator has seen pass is NOT_LEADER_OR_FOLLOWER
    (the client looks for the new leader); a coordinator not reachable yet, retriable."""
    if error == ErrorCode.fenced_leader_epoch:
        return ErrorCode.not_leader_or_follower
    if error in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
        return ErrorCode.coordinator_not_available
    return error
