"""The transaction coordinator inside a broker: the transactional ids of
``__transaction_state`` as a shard of the coordinator runtime
(:mod:`odradek.coordinator.common.runtime`: loading as leadership moves, writes answered
once committed, timers), the markers it has sent, and the timer that aborts forgotten
transactions.

:class:`TransactionStateTopic` is the compacted topic, created on first need as Kafka does.
:class:`TransactionShard` runs the
:class:`~odradek.coordinator.transaction.coordinator.TransactionCoordinator`: a record it asks for
is written through the runtime and the state follows it once it is committed. A partition is loaded
again in each new leader epoch, which becomes the coordinator epoch its markers carry. After a
Prepare record the markers are sent, then the Complete record is written
(:mod:`odradek.coordinator.transaction.marker_sender`).

A crash anywhere in this leaves a Prepare record without its Complete one, or nothing: the next
load finds the Prepare state and sends the markers again (a second marker for a transaction
already ended is harmless to the partition). A Complete record that cannot be written yet (too
few in-sync replicas) is retried for as long as this broker coordinates the transaction.

Everything runs on the broker's event loop thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from odradek.clock import Clock
from odradek.cluster.metadata.producer_ids import ProducerIdManager
from odradek.cluster.metadata.view import ClusterView, leader_endpoint
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.internal_topic import InternalTopic
from odradek.coordinator.common.log_reader import replay_data_records
from odradek.coordinator.common.runtime import (
    CoordinatorContext,
    CoordinatorError,
    CoordinatorRuntime,
    CoordinatorWrite,
)
from odradek.coordinator.common.timers import Timers
from odradek.coordinator.group.records import RecordFormatError
from odradek.coordinator.transaction.coordinator import (
    MarkerJob,
    TransactionCoordinator,
    TxnAnswer,
    TxnConfig,
    TxnOutcome,
    TxnWrite,
)
from odradek.coordinator.transaction.marker_sender import MarkerSender
from odradek.coordinator.transaction.markers import MarkerChannel
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# Partitions of a transaction, as (topic, index).
Partitions = Iterable[tuple[str, int]]

TXN_TOPIC = "__transaction_state"
_COMMIT_TIMEOUT_MS = 5_000
_ABORT_CHECK = ("abort-expired",)


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
            "transaction.state.log.min.isr",
        )


class TransactionShard:
    """The transaction coordinator as the runtime runs it. Its operations answer with a
    :class:`~odradek.coordinator.transaction.coordinator.TxnAnswer`, or ask for a record
    (:class:`~odradek.coordinator.transaction.coordinator.TxnWrite`) that becomes a
    :class:`~odradek.coordinator.common.runtime.CoordinatorWrite` here: the state follows the
    record once it is committed (Kafka's ``TransactionStateManager`` appends, then updates the
    metadata in the append's callback), and a Prepare record's markers are sent from then on."""

    def __init__(
        self, coordinator: TransactionCoordinator, send_markers: Callable[[MarkerJob], None]
    ) -> None:
        self.coordinator = coordinator
        self.timers = Timers()
        self._send_markers = send_markers
        self._writes: list[CoordinatorWrite] = []

    def partition_for(self, key: str) -> int:
        return self.coordinator.partition_for(key)

    def take_writes(self) -> list[CoordinatorWrite]:
        writes, self._writes = self._writes, []
        return writes

    def is_active(self, partition: int) -> bool:
        return self.coordinator.coordinator_epoch(partition) is not None

    def answer(self, outcome: TxnOutcome) -> TxnAnswer:
        """``outcome``'s answer, its record asked for."""
        if isinstance(outcome, TxnAnswer):
            return outcome
        coordinator = self.coordinator

        def committed(error: ErrorCode) -> None:
            coordinator.written(outcome, error == ErrorCode.none)
            if error == ErrorCode.none and outcome.markers is not None:
                self._send_markers(outcome.markers)

        self._writes.append(
            CoordinatorWrite(
                outcome.partition,
                ((outcome.key, outcome.value),),
                failed=lambda _: coordinator.written(outcome, False),
                committed=committed,
            )
        )
        return outcome.answer


class TransactionCoordinatorRuntime(CoordinatorRuntime[TransactionShard]):
    """The broker's transaction coordinator, loaded, sending markers and aborting on timeout."""

    def __init__(
        self,
        context: CoordinatorContext,
        producer_ids: ProducerIdManager,
        cluster: ClusterView | None,
    ) -> None:
        config, topics, clock = context.config, context.topics, context.clock
        self.state_topic = TransactionStateTopic(topics, config, clock)
        coordinator = TransactionCoordinator(
            TxnConfig(
                partitions=self.state_topic.partitions,
                max_timeout_ms=config.get_int("transaction.max.timeout.ms"),
            ),
            clock,
            producer_ids.next_id,
        )
        super().__init__(
            self.state_topic,
            TransactionShard(coordinator, self._send_markers),
            _TransactionLoading(self),
            context.wait_replicated,
            _COMMIT_TIMEOUT_MS,
            "transactions",
        )
        self._abort_interval_ms = config.get_int(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        )
        # Where markers go and KIP-890 checks are asked (None: nowhere, a coordinator tested
        # without a broker around it).
        self.cluster = cluster
        self.markers = MarkerChannel(config, cluster)
        self.marker_sender = MarkerSender(
            self.markers, coordinator, self._write_record, lambda: self.stopping
        )

    @property
    def coordinator(self) -> TransactionCoordinator:
        """The state machine behind the shard."""
        return self.shard.coordinator

    def start(self) -> None:
        super().start()
        self._schedule_abort_check()

    # -- ownership -----------------------------------------------------------------------------

    def replay_from(self, partition: Partition, offset: int) -> tuple[int, int | None]:
        """Replay one read of ``partition`` from ``offset``: how many records, and where the
        next read starts (None: done)."""
        return replay_data_records(partition, offset, self.coordinator.replay, RecordFormatError)

    def resume_markers(self, jobs: Iterable[MarkerJob]) -> None:
        for job in jobs:
            log.info(
                "transaction %s was found prepared to %s on loading (coordinator epoch %d): "
                "sending its markers",
                job.transactional_id,
                "commit" if job.commit else "abort",
                job.coordinator_epoch,
            )
            self._send_markers(job)

    def on_topic_deleted(self, topic: str) -> None:
        if topic == TXN_TOPIC and not self.state_topic.topics.leads_alone:
            self.unload_all(self.coordinator.owned)

    # -- requests ------------------------------------------------------------------------------

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Partitions,
        *,
        add: bool = False,
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: whether these partitions are in the producer's ongoing transaction, asked
        of the coordinator of ``transactional_id`` — here, or (in a cluster) over the network
        with AddPartitionsToTxn v4+ ``verify_only``. ``add``: transaction version 2, where the
        partition leader adds them to the transaction instead (the producer does not)."""
        wanted = list(partitions)
        if add:
            local = await self._add_here(transactional_id, producer_id, producer_epoch, wanted)
        else:
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
            endpoint, transactional_id, producer_id, producer_epoch, wanted, add=add
        )

    async def _add_here(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        status = self.coordinator.status(transactional_id)
        if status != ErrorCode.none:
            return dict.fromkeys(partitions, status)
        try:
            answer = await self.write(
                transactional_id,
                lambda shard: shard.answer(
                    shard.coordinator.add_partitions(
                        transactional_id, producer_id, producer_epoch, partitions
                    )
                ),
            )
        except CoordinatorError as e:
            return dict.fromkeys(partitions, e.code)
        return dict.fromkeys(partitions, answer.error)

    async def _write_record(self, write: TxnWrite) -> ErrorCode:
        """Write a record the coordinator asked for outside a request (a Complete record, a
        timed-out transaction's abort); NONE once committed, else the error."""
        try:
            await self.write(write.transactional_id, lambda shard: shard.answer(write))
        except CoordinatorError as e:
            return e.code
        return ErrorCode.none

    # -- markers -------------------------------------------------------------------------------

    def _send_markers(self, job: MarkerJob) -> None:
        self.spawn(self.marker_sender.complete(job), f"markers-{job.transactional_id}")

    # -- timeouts ------------------------------------------------------------------------------

    def _schedule_abort_check(self) -> None:
        self.shard.timers.schedule(
            _ABORT_CHECK,
            self.clock.monotonic_ms() + self._abort_interval_ms,
            self._abort_check,
        )

    def _abort_check(self) -> None:
        self._schedule_abort_check()
        self.abort_expired()

    def abort_expired(self) -> int:
        """Start aborting every transaction past its timeout; how many."""
        writes = self.coordinator.expired()
        for write in writes:
            log.info(
                "aborting transaction %s: past its timeout of %d ms",
                write.transactional_id,
                write.next_value.timeout_ms,
            )
            self.spawn(self._write_record(write), f"abort-{write.transactional_id}")
        return len(writes)

    async def stop(self) -> None:
        await super().stop()
        await self.markers.close()


class _TransactionLoading:
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
