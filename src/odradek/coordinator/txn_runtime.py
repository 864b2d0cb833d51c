"""The transaction coordinator inside a broker: its records in ``__transaction_state``, the
partitions it owns, the markers it sends, and the timer that aborts forgotten transactions.

:class:`TransactionStateTopic` writes the state machine's records (one RecordBatch v2 each,
through ``Partition.append`` on the leader) and creates the compacted topic on first need, as
Kafka does. :class:`TransactionCoordinatorRuntime` runs the
:class:`~odradek.coordinator.transactions.TransactionCoordinator`: it owns the partitions this
broker leads (a lone broker all of them), loads them by replay when leadership arrives and drops
them when it leaves (:mod:`odradek.coordinator.loader`); it answers a request once the record
it wrote is replicated (the ``wait_replicated`` the broker passes in: its purgatory), and it has
the transaction markers sent (:mod:`odradek.coordinator.markers`: WriteTxnMarkers to each
partition's leader, retried until every partition has its marker), then writes the Complete
record.

A crash anywhere in this leaves a Prepare record without its Complete one, or nothing: the next
load finds the Prepare state and sends the markers again (a second marker for a transaction
already ended is harmless to the partition). A Complete record that cannot be written yet (too
few in-sync replicas) is retried for as long as this broker coordinates the transaction.

Everything runs on the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from odradek.clock import Clock
from odradek.cluster.metadata.producer_ids import ProducerIdManager
from odradek.cluster.metadata.view import ClusterView, leader_endpoint
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.internal_topic import (
    CommitPoint,
    InternalTopic,
    WaitReplicated,
    committed,
    write_error,
)
from odradek.coordinator.loader import ShardLoader
from odradek.coordinator.log_reader import read_batches
from odradek.coordinator.markers import MarkerChannel
from odradek.coordinator.records import RecordFormatError
from odradek.coordinator.transactions import (
    MarkerJob,
    TransactionCoordinator,
    TxnAnswer,
    TxnConfig,
    TxnOutcome,
    TxnWrite,
)
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
_WRITE_TIMEOUT_S = 5.0
# A Complete record that cannot be written yet is retried with this backoff.
_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 1.0


class TransactionStateTopic(InternalTopic):
    """``__transaction_state`` as the coordinator writes and replays it."""

    def __init__(self, topics: TopicManager, config: BrokerConfig, clock: Clock) -> None:
        super().__init__(
            TXN_TOPIC,
            "transaction.state.log",
            topics,
            config,
            clock,
            {"compression.type": "uncompressed", "unclean.leader.election.enable": "false"},
        )

    def topic_configs(self) -> dict[str, str]:
        return super().topic_configs() | {
            "min.insync.replicas": str(
                min(self.config.get_int("transaction.state.log.min.isr"), self.replication())
            )
        }

    def write(self, index: int, key: bytes, value: bytes) -> CommitPoint:
        """Append one record as the partition's leader; where the high watermark must get for
        the record to be replicated."""
        partition, info = self.append(index, [(key, value)])
        return CommitPoint(partition, info.last_offset + 1)


class TransactionCoordinatorRuntime:
    """The broker's transaction coordinator, loaded, sending markers and aborting on timeout."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicManager,
        clock: Clock,
        producer_ids: ProducerIdManager,
        wait_replicated: WaitReplicated,
    ) -> None:
        self.clock = clock
        self.state_topic = TransactionStateTopic(topics, config, clock)
        self.coordinator = TransactionCoordinator(
            TxnConfig(
                partitions=self.state_topic.partitions,
                max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            ),
            clock,
            producer_ids.next_id,
        )
        self._wait_replicated = wait_replicated
        self._config = config
        self._abort_interval_s = (
            config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        )
        # Set by the broker once its cluster view exists: where markers go.
        self.cluster: ClusterView | None = None
        self.markers = MarkerChannel(config, lambda: self.cluster)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loader = ShardLoader(self.state_topic, _TransactionShard(self), "transactions")
        self._timer: asyncio.Task[None] | None = None
        self._stopping = False

    # -- ownership -----------------------------------------------------------------------------

    def load(self) -> None:
        """A lone broker owns every partition (those of a topic still to be created too) and
        replays what exists, synchronously: the broker is not serving yet."""
        for index in range(self.state_topic.partitions):
            partition = self.state_topic.partition(index)
            epoch = partition.leader_epoch if partition is not None else 0
            self.coordinator.begin_loading(index, max(epoch, 0))
            if partition is not None:
                self._loader.replay_all(partition)
            self.resume_markers(self.coordinator.finish_loading(index))

    def start(self) -> None:
        """Load (a lone broker) and start the timeout timer; in a cluster nothing is owned
        until :meth:`follow`."""
        if self.state_topic.topics.leads_alone:
            self.load()
        self._timer = asyncio.create_task(self._abort_expired_loop(), name="txn-timeouts")

    def follow(self, leadership_listeners: list[Callable[[Partition, bool], None]]) -> None:
        """In a cluster: load the partitions this broker leads now, and the rest as leadership
        moves here (``leadership_listeners``: the replica manager's)."""
        leadership_listeners.append(self.leadership_changed)
        self._loader.load_led()

    def leadership_changed(self, partition: Partition, leader: bool) -> None:
        """A new leadership, or one in a new epoch (which fences the markers of the old),
        loads the partition again; a lost one unloads it."""
        self._loader.leadership_changed(partition, leader)

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        """Replay one read of ``partition`` from ``offset``: how many records, and where the
        next read starts (None: done)."""
        index = partition.index
        batches, next_offset = read_batches(partition, offset)
        count = 0
        for header, records in batches:
            if header.is_control:
                continue
            for record in records:
                try:
                    self.coordinator.replay(index, record.key, record.value)
                except RecordFormatError as e:
                    log.warning("%s offset %d: %s", partition.name, record.offset, e)
                count += 1
        return count, next_offset

    def resume_markers(self, jobs: Iterable[MarkerJob]) -> None:
        for job in jobs:
            log.info(
                "transaction %s was found prepared to %s on loading (coordinator epoch %d): "
                "sending its markers",
                job.transactional_id,
                "commit" if job.commit else "abort",
                job.coordinator_epoch,
            )
            self._spawn(self._complete(job), f"markers-{job.transactional_id}")

    def on_topic_deleted(self, topic: str) -> None:
        if topic == TXN_TOPIC and not self.state_topic.topics.leads_alone:
            self._loader.unload_all(self.coordinator.owned)

    # -- requests ------------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> TxnAnswer:
        return await self._run(
            self.coordinator.init_producer_id(
                transactional_id, timeout_ms, producer_id, producer_epoch
            )
        )

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> TxnAnswer:
        return await self._run(
            self.coordinator.add_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> TxnAnswer:
        return await self._run(
            self.coordinator.end_txn(transactional_id, producer_id, producer_epoch, commit)
        )

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: whether these partitions are in the producer's ongoing transaction, asked
        of the coordinator of ``transactional_id`` — here, or (in a cluster) over the network
        with AddPartitionsToTxn v4+ ``verify_only``."""
        wanted = list(partitions)
        local = self.coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, wanted
        )
        if self.cluster is None or not any(
            code == ErrorCode.not_coordinator for code in local.values()
        ):
            return local
        endpoint = leader_endpoint(
            self.cluster, TXN_TOPIC, self.coordinator.partition_for(transactional_id)
        )
        if endpoint is None or endpoint.node_id == self.cluster.node_id:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        return await self.markers.verify(
            endpoint, transactional_id, producer_id, producer_epoch, wanted
        )

    async def _run(self, outcome: TxnOutcome) -> TxnAnswer:
        if isinstance(outcome, TxnAnswer):
            return outcome
        error = await self._write(outcome)
        if error != ErrorCode.none:
            return TxnAnswer(error)
        if outcome.markers is not None:
            job = outcome.markers
            self._spawn(self._complete(job), f"markers-{job.transactional_id}")
        return outcome.answer

    async def _write(self, write: TxnWrite) -> ErrorCode:
        try:
            point = self.state_topic.write(write.partition, write.key, write.value)
        except KafkaError as e:
            self.coordinator.written(write, False)
            return write_error(e.code)
        (error,) = await committed([point], self._wait_replicated, _WRITE_TIMEOUT_S)
        self.coordinator.written(write, error == ErrorCode.none)
        return error

    # -- markers -------------------------------------------------------------------------------

    def _spawn(self, coroutine: Awaitable[Any], name: str) -> None:
        if self._stopping:
            with contextlib.suppress(Exception):
                coroutine.close()  # type: ignore[attr-defined]
            return
        task = asyncio.ensure_future(coroutine)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _complete(self, job: MarkerJob) -> None:
        """Write ``job``'s markers to every partition, then the Complete record."""
        try:
            await self.markers.send(job, lambda: self._still_owned(job))
            delay = _RETRY_FIRST_S
            # A failed Complete write (too few in-sync replicas of __transaction_state while a
            # broker is down, a timeout) leaves the transaction prepared, and its producer
            # answered CONCURRENT_TRANSACTIONS, until it is written: retried while this broker
            # still coordinates the transaction, as Kafka's marker channel retries its append.
            while (write := self.coordinator.markers_done(job)) is not None:
                error = await self._write(write)
                if error == ErrorCode.none:
                    break
                log.info(
                    "completing transaction %s failed (%s); retrying",
                    job.transactional_id,
                    error.name,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
                if self._stopping:
                    break
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("sending the markers of transaction %s failed", job.transactional_id)

    def _still_owned(self, job: MarkerJob) -> bool:
        index = self.coordinator.partition_for(job.transactional_id)
        return self.coordinator.coordinator_epoch(index) == job.coordinator_epoch

    # -- timeouts ------------------------------------------------------------------------------

    def abort_expired(self) -> int:
        """Start aborting every transaction past its timeout; how many."""
        writes = self.coordinator.expired()
        for write in writes:
            log.info(
                "aborting transaction %s: past its timeout of %d ms",
                write.transactional_id,
                write.next_value.timeout_ms,
            )
            self._spawn(self._run(write), f"abort-{write.transactional_id}")
        return len(writes)

    async def _abort_expired_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self._abort_interval_s)
            try:
                self.abort_expired()
            except Exception:
                log.exception("aborting expired transactions failed")

    async def stop(self) -> None:
        self._stopping = True
        tasks = [*self._tasks, *self._loader.stop()]
        if self._timer is not None:
            tasks.append(self._timer)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.markers.close()


class _TransactionShard:
    """The transaction coordinator as its loader sees it: a partition is loaded again in a new
    leader epoch, which becomes the coordinator epoch its markers carry."""

    def __init__(self, runtime: TransactionCoordinatorRuntime) -> None:
        self._runtime = runtime

    def is_loaded(self, index: int, epoch: int) -> bool:
        coordinator = self._runtime.coordinator
        return coordinator.is_loading(index) or coordinator.coordinator_epoch(index) == epoch

    def begin_loading(self, index: int, epoch: int) -> None:
        self._runtime.coordinator.begin_loading(index, epoch)

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        return self._runtime.replay_from(partition, offset)

    def finish_loading(self, index: int) -> None:
        runtime = self._runtime
        runtime.resume_markers(runtime.coordinator.finish_loading(index))

    def unload(self, index: int) -> None:
        self._runtime.coordinator.unload(index)
