"""The transaction coordinator inside a broker: its records in ``__transaction_state``, the
partitions it owns, the markers it sends, and the timer that aborts forgotten transactions.

:class:`TransactionStateTopic` writes the state machine's records (one RecordBatch v2 each,
through ``Partition.append`` on the leader) and creates the compacted topic on first need, as
Kafka does. :class:`TransactionCoordinatorRuntime` runs the
:class:`~odradek.coordinator.transactions.TransactionCoordinator`: it owns the partitions this
broker leads (a lone broker all of them), loads them by replay when leadership arrives and drops
them when it leaves; it answers a request once the record it wrote is replicated (the
``wait_replicated`` the broker passes in: its purgatory), and it sends the transaction markers:
WriteTxnMarkers requests over the Kafka protocol to each partition's leader — this broker too,
over a connection to itself, so that a marker takes one path whoever leads the partition —
retrying until every partition has its marker, then writing the Complete record.

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

from odradek.client.aio import AsyncConnection
from odradek.client.core import ClientError
from odradek.clock import Clock
from odradek.cluster.partition import Partition
from odradek.cluster.producer_ids import ProducerIdManager
from odradek.cluster.topics import TopicManager
from odradek.cluster.view import BrokerEndpoint, ClusterView, leader_endpoint
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
from odradek.security.inter_broker import inter_broker_security

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
WRITE_TXN_MARKERS = 27
_WRITE_TIMEOUT_S = 5.0
_MARKER_TIMEOUT_S = 30.0
_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 1.0
# Marker answers that retrying cannot change: the partition stops waiting for its marker.
_MARKER_FATAL = frozenset(
    {
        ErrorCode.invalid_producer_epoch,
        ErrorCode.producer_fenced,
        ErrorCode.transaction_coordinator_fenced,
        ErrorCode.invalid_request,
        ErrorCode.unsupported_version,
    }
)


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
        self._connections: dict[int, AsyncConnection] = {}
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
        return await self._verify_remote(
            endpoint, transactional_id, producer_id, producer_epoch, wanted
        )

    async def _verify_remote(
        self,
        endpoint: BrokerEndpoint,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": True,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            ]
        }
        try:
            connection = await self._connection(endpoint)
            response = await connection.request(24, request, version=4, timeout_s=_WRITE_TIMEOUT_S)
        except (ClientError, OSError) as e:
            log.info(
                "verifying %s with broker %d failed: %s", transactional_id, endpoint.node_id, e
            )
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if response.error_code:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        out: dict[tuple[str, int], ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    out[(topic.name, int(p.partition_index))] = ErrorCode(p.partition_error_code)
        return {tp: out.get(tp, ErrorCode.invalid_txn_state) for tp in partitions}

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
            await self._send_markers(job)
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

    async def _send_markers(self, job: MarkerJob) -> None:
        remaining = set(job.partitions)
        delay = _RETRY_FIRST_S
        while remaining and not self._stopping and self._still_owned(job):
            cluster = self.cluster
            by_leader: dict[int, tuple[BrokerEndpoint, list[tuple[str, int]]]] = {}
            for tp in sorted(remaining):
                if cluster is None:
                    break
                if cluster.partition_info(*tp) is None:
                    remaining.discard(tp)  # the topic is gone: nothing to mark
                    continue
                endpoint = leader_endpoint(cluster, *tp)
                if endpoint is not None:
                    by_leader.setdefault(endpoint.node_id, (endpoint, []))[1].append(tp)
            results = await asyncio.gather(
                *(self._send_to(endpoint, job, tps) for endpoint, tps in by_leader.values())
            )
            for answered in results:
                for tp, code in answered.items():
                    if code == ErrorCode.none:
                        remaining.discard(tp)
                    elif code in _MARKER_FATAL:
                        log.warning(
                            "marker of transaction %s for %s-%d refused: %s",
                            job.transactional_id,
                            *tp,
                            code.name,
                        )
                        remaining.discard(tp)
            if remaining:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)

    async def _send_to(
        self, endpoint: BrokerEndpoint, job: MarkerJob, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = {
            "markers": [
                {
                    "producer_id": job.producer_id,
                    "producer_epoch": job.producer_epoch,
                    "transaction_result": job.commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()],
                    "coordinator_epoch": job.coordinator_epoch,
                }
            ]
        }
        try:
            connection = await self._connection(endpoint)
            response = await connection.request(
                WRITE_TXN_MARKERS, request, timeout_s=_MARKER_TIMEOUT_S
            )
        except (ClientError, OSError) as e:
            log.info("markers to broker %d: %s; retrying", endpoint.node_id, e)
            self._drop_connection(endpoint.node_id)
            return {}
        out: dict[tuple[str, int], ErrorCode] = {}
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    out[(topic.name, int(p.partition_index))] = ErrorCode(p.error_code)
        return out

    async def _connection(self, endpoint: BrokerEndpoint) -> AsyncConnection:
        connection = self._connections.get(endpoint.node_id)
        if connection is not None and not connection.closed:
            return connection
        connection = await AsyncConnection.open(
            f"{endpoint.host}:{endpoint.port}",
            client_id=f"odradek-txn-coordinator-{self.cluster.node_id if self.cluster else -1}",
            timeout_s=_MARKER_TIMEOUT_S,
            # Markers and KIP-890 checks go over the inter-broker listener with its TLS and
            # SASL (to this broker too). Read when first needed: a lone broker whose only
            # listener is SASL and that never sees a transaction needs no credentials of its own.
            security=inter_broker_security(self._config),
        )
        self._connections[endpoint.node_id] = connection
        return connection

    def _drop_connection(self, node_id: int) -> None:
        connection = self._connections.pop(node_id, None)
        if connection is not None:
            self._spawn(connection.close(), "txn-marker-connection-close")

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
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


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
