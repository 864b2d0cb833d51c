"""One runtime for every coordinator (Kafka's ``CoordinatorRuntime`` of coordinator-common): a
state machine per internal topic (the group coordinator on ``__consumer_offsets``, the transaction
coordinator on ``__transaction_state``), loaded and unloaded as this broker's leadership of the
topic's partitions comes and goes, run one operation at a time, its records appended to the
partition's leader log and its answers sent only once those records are committed.

The shard (``S``) is the state machine. An operation is a function of it that changes it and
returns the response; the records it asks for are the writes it queued
(:meth:`CoordinatorShard.take_writes`, each a :class:`CoordinatorWrite`: records, and what follows
once the log took them or refused them) — together Kafka's ``CoordinatorResult``
(:class:`CoordinatorResult`, what :meth:`CoordinatorRuntime.perform` returns). The runtime appends
them in the same event-loop turn as the operation, synchronously as Kafka's
``CoordinatorPartitionWriter``, so no other operation sees the state in between; a write the log
refuses is followed by the rest of the operation's being refused too (Kafka appends an operation's
records as one batch), and the shard puts its state back through the writes' ``failed``.

:meth:`CoordinatorRuntime.write` is a request's operation: run, appended, and answered once the high
watermark of the key's partition reaches that partition's log end as of the answer — every record
the shard's state may come from, as Kafka's deferred event queue holds even an answer that wrote
nothing behind the writes before it. :meth:`~CoordinatorRuntime.read` answers from the state as it
is now, behind the same wait. A refused write or a commit that does not come within the runtime's
commit timeout raises :class:`CoordinatorError` with Kafka's mapping
(:func:`~odradek.coordinator.common.internal_topic.write_error`: REQUEST_TIMED_OUT and too few
in-sync replicas are COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR). An operation's
records that are not committed in time stay in the log, and the state with them: Kafka does not take
back an append whose commit timed out either (a new leader reloads from its log).

Timers: the shard's :class:`~odradek.coordinator.common.timers.Timers` are run by a task that sleeps
until the next deadline on the injected clock; what an action writes is appended as any operation's
(:meth:`~CoordinatorRuntime.tick`, which tests call after moving a ``ManualClock``).

Loading (:class:`~odradek.coordinator.common.loader.ShardLoader`): a lone broker replays every
partition before it serves (:meth:`~CoordinatorRuntime.load`); in a cluster the partitions led at
start are replayed before the broker serves (:meth:`~CoordinatorRuntime.follow`) and the rest as the
replica manager's leadership listeners report them; what a new leader epoch means is the shard's to
say.

Crash: nothing of its own; the state is the log's. Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from odradek.clock import Clock
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.internal_topic import (
    NO_PRODUCER_ID,
    CommitPoint,
    InternalTopic,
    WaitReplicated,
    committed,
    write_error,
)
from odradek.coordinator.common.loader import Shard as LoadingHooks
from odradek.coordinator.common.loader import ShardLoader
from odradek.coordinator.common.timers import Timers
from odradek.counters import remote_wait
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

T = TypeVar("T")


def _ignore(_: object) -> None:
    """What a write does when nothing follows from it."""


@dataclass(frozen=True, slots=True)
class CoordinatorContext:
    """What the broker builds every coordinator runtime from: its settings, the topics among which
    the runtime's internal topic lives, the clock, and the wait for a write's replication (the
    purgatory's)."""

    config: BrokerConfig
    topics: TopicManager
    clock: Clock
    wait_replicated: WaitReplicated


@dataclass(frozen=True, slots=True)
class CoordinatorWrite:
    """Records a shard asks to append to partition ``partition`` of its topic as one batch (a
    transactional one of ``producer_id`` when given), and what follows from them: ``applied``
    once the leader's log took the batch (given the offset of its first record), ``failed`` when
    the log refused it (given the log's error, unmapped), ``committed`` once the answer of the
    operation that asked for it was waited for (NONE, or the mapped error that ended the wait)."""

    partition: int
    records: tuple[tuple[bytes, bytes | None], ...]
    applied: Callable[[int], None] = _ignore
    failed: Callable[[ErrorCode], None] = _ignore
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    committed: Callable[[ErrorCode], None] = _ignore


@dataclass(frozen=True, slots=True)
class CoordinatorResult(Generic[T]):
    """An operation as run: the writes it asked for (those its writes' callbacks asked for in
    turn included), its response, and the log's error for the first write refused (NONE: every
    one taken)."""

    records: tuple[CoordinatorWrite, ...]
    response: T
    error: ErrorCode = ErrorCode.none


class CoordinatorError(KafkaError):
    """An operation's answer is this error instead (``code``: mapped as Kafka answers it;
    ``refused``: the log's own error when it refused the operation's records, else NONE)."""

    def __init__(self, code: ErrorCode, refused: ErrorCode = ErrorCode.none) -> None:
        super().__init__(code, refused.name if refused != ErrorCode.none else "")
        self.refused = refused


class CoordinatorShard(Protocol):
    """What the runtime needs of a state machine."""

    timers: Timers

    def partition_for(self, key: str) -> int: ...

    def take_writes(self) -> list[CoordinatorWrite]:
        """The writes asked for since the last call, in order."""
        ...

    def is_active(self, partition: int) -> bool:
        """Whether the shard serves ``partition`` now (owned and loaded)."""
        ...


S = TypeVar("S", bound=CoordinatorShard)


def append_writes(
    shard: CoordinatorShard, append: Callable[[CoordinatorWrite], int]
) -> tuple[list[CoordinatorWrite], ErrorCode]:
    """Append the writes ``shard`` asked for, in order, through ``append`` (the leader's log:
    the offset of the batch's first record, or :class:`KafkaError`), and tell each its outcome —
    which may ask for more writes, appended in turn. The writes, and the error of the first one
    refused (NONE)."""
    error = ErrorCode.none
    done: list[CoordinatorWrite] = []
    while writes := shard.take_writes():
        refused = ErrorCode.none
        for write in writes:
            done.append(write)
            if refused != ErrorCode.none:
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
    return done, error


class CoordinatorRuntime(Generic[S]):
    """``shard`` served on ``topic`` (see the module doc), on the topic's clock. ``loading``: how
    the shard takes a partition on and lets it go; ``commit_timeout_ms``: how long an answer
    waits for its records' commit."""

    def __init__(
        self,
        topic: InternalTopic,
        shard: S,
        loading: LoadingHooks,
        wait_replicated: WaitReplicated,
        commit_timeout_ms: int,
        what: str,
    ) -> None:
        self.topic = topic
        self.shard = shard
        self.clock = topic.clock
        self.commit_timeout_ms = commit_timeout_ms
        self._wait_replicated = wait_replicated
        self._what = what  # for the log and task names: "groups", "transactions"
        self._loading = loading
        self._loader = ShardLoader(topic, loading, what)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wake: asyncio.Event | None = None
        self._timer_task: asyncio.Task[None] | None = None
        self.stopping = False

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> int:
        """A lone broker: own every partition (those of a topic still to be created too) and
        replay what exists, synchronously (the broker is not serving yet); how many records."""
        count = 0
        for index in range(self.topic.partitions):
            partition = self.topic.partition(index)
            epoch = partition.leader_epoch if partition is not None else 0
            self._loading.begin_loading(index, max(epoch, 0))
            if partition is not None:
                count += self._loader.replay_all(partition)
            self._loading.finish_loading(index)
        if count:
            log.info("replayed %d records of %s", count, self.topic.name)
        return count

    def start(self) -> None:
        """Load everything (a lone broker) and start the timers; in a cluster nothing is owned
        until :meth:`follow`."""
        if self.topic.topics.leads_alone:
            self.load()
        self._wake = asyncio.Event()
        self.shard.timers.on_earlier_deadline = self._wake.set
        self._timer_task = asyncio.create_task(self._run_timers(), name=f"{self._what}-timers")

    def follow(self, leadership_listeners: list[Callable[[Partition, bool], None]]) -> None:
        """In a cluster: serve the partitions this broker leads, loading those led now at once
        (before the broker serves) and the others as leadership moves here
        (``leadership_listeners``: the replica manager's)."""
        leadership_listeners.append(self.leadership_changed)
        self._loader.load_led()

    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        """A partition state was applied (called again for the same role: idempotent): a new
        leadership loads the partition (its requests get COORDINATOR_LOAD_IN_PROGRESS
        meanwhile), a lost one unloads it."""
        self._loader.leadership_changed(partition, leader)

    def unload_all(self, indexes: Iterable[int]) -> None:
        """The topic is gone (deleted in a cluster): serve none of ``indexes`` any more."""
        self._loader.unload_all(indexes)

    # -- operations ----------------------------------------------------------------------------

    def perform(self, op: Callable[[S], T]) -> CoordinatorResult[T]:
        """Run ``op`` and append the writes it asked for, now (no wait for their commit)."""
        response = op(self.shard)
        writes, error = append_writes(self.shard, self._append)
        return CoordinatorResult(tuple(writes), response, error)

    async def write(self, key: str, op: Callable[[S], T], *, api_key: int = -1) -> T:
        """Run ``op`` for ``key`` (a group or transactional id), append its records, and return
        its response once they, and everything before them in the key's partition, are
        committed. Raises :class:`CoordinatorError` when a write was refused or the commit did
        not come in time. ``api_key``: the request that waits (its RemoteTime)."""
        result = self.perform(op)
        if result.error != ErrorCode.none:
            raise CoordinatorError(write_error(result.error), result.error)
        error = await self._committed_at(key, api_key)
        for write in result.records:
            write.committed(error)
        if error != ErrorCode.none:
            raise CoordinatorError(error)
        return result.response

    async def write_deferred(
        self, key: str, op: Callable[[S, Callable[[T], None]], None], *, api_key: int = -1
    ) -> T:
        """A write whose response comes later, through the callback ``op`` is given (a
        JoinGroup or SyncGroup, completed for the whole group by another request or a timer):
        returned once it came and what it may depend on is committed."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def reply(response: T) -> None:
            if not future.done():
                future.set_result(response)

        result = self.perform(lambda shard: op(shard, reply))
        if result.error != ErrorCode.none:
            raise CoordinatorError(write_error(result.error), result.error)
        response = await remote_wait(future)
        # Resumed after the operation that answered, and its writes, ran to their end: the
        # partition's log end now covers every record the response may depend on.
        error = await self._committed_at(key, api_key)
        if error != ErrorCode.none:
            raise CoordinatorError(error)
        return response

    async def read(self, key: str, op: Callable[[S], T], *, api_key: int = -1) -> T:
        """``op``'s view of the state now, returned once the records it may come from (those
        of ``key``'s partition) are committed."""
        return await self.write(key, op, api_key=api_key)

    async def read_all(self, op: Callable[[S], T], *, api_key: int = -1) -> T:
        """``op``'s view of every partition served here (ListGroups), once all of them are
        committed; raises the first failure."""
        response = self.perform(op).response
        points = [self._point(index) for index in range(self.topic.partitions)]
        outcomes = await self.committed([p for p in points if p.partition is not None], api_key)
        failure = next((f for f in outcomes if f != ErrorCode.none), None)
        if failure is not None:
            raise CoordinatorError(failure)
        return response

    def tick(self) -> int:
        """Act on the shard's deadlines that passed (and append what they wrote)."""
        return self.perform(lambda shard: shard.timers.fire_due(self.clock.monotonic_ms())).response

    def spawn(self, coroutine: Awaitable[Any], name: str) -> None:
        """Run ``coroutine`` as a task of this runtime (cancelled by :meth:`stop`)."""
        if self.stopping:
            with contextlib.suppress(Exception):
                coroutine.close()  # type: ignore[attr-defined]
            return
        task = asyncio.ensure_future(coroutine)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- commit points -------------------------------------------------------------------------

    def commit_point(self, key: str) -> CommitPoint:
        """Where an answer about ``key`` made now must wait until: its partition's log end."""
        return self._point(self.shard.partition_for(key))

    def _point(self, index: int) -> CommitPoint:
        partition = self.topic.partition(index)
        if partition is None or not self.shard.is_active(index):
            return CommitPoint(None, 0)
        log_end = partition.log.log_end_offset
        # Everything in the log committed already: nothing to wait for (an answer that wrote
        # nothing is not refused because the ISR is smaller than min.insync.replicas now).
        if partition.high_watermark >= log_end:
            return CommitPoint(None, log_end)
        return CommitPoint(partition, log_end)

    async def committed(self, points: Sequence[CommitPoint], api_key: int = -1) -> list[ErrorCode]:
        """Wait until the answers at ``points`` may be sent, at most the commit timeout; each
        one's outcome, NONE or the error to answer with instead."""
        return await committed(
            points, self._wait_replicated, self.commit_timeout_ms / 1000, api_key
        )

    async def _committed_at(self, key: str, api_key: int) -> ErrorCode:
        (error,) = await self.committed([self.commit_point(key)], api_key)
        return error

    def _append(self, write: CoordinatorWrite) -> int:
        _, info = self.topic.append(
            write.partition,
            write.records,
            producer_id=write.producer_id,
            producer_epoch=write.producer_epoch,
            transactional=write.producer_id != NO_PRODUCER_ID,
        )
        return info.first_offset

    # -- timers and stopping -------------------------------------------------------------------

    async def _run_timers(self) -> None:
        """Sleep until the next deadline (or an earlier one appears), then tick."""
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while not self.stopping:
            deadline = self.shard.timers.next_deadline()
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
            if self.stopping:
                return
            try:
                self.tick()
            except Exception:
                log.exception("%s timers failed", self._what)

    async def stop(self) -> None:
        """Stop the timers, the loads and the runtime's tasks."""
        self.stopping = True
        tasks = [*self._tasks, *self._loader.stop()]
        for task in tasks:
            task.cancel()
        if self._wake is not None:
            self._wake.set()
        if self._timer_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer_task
            self._timer_task = None
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
