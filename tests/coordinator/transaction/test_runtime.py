"""The transaction coordinator's runtime on a real log: a Complete record whose write fails (too
few in-sync replicas of ``__transaction_state``, as while a broker of the cluster is down) is
written again, so the transaction does not stay prepared until the partition next loads."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from odradek.clock import ManualClock
from odradek.cluster.metadata.producer_ids import ProducerIdManager
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.metadata.view import BrokerEndpoint, LocalClusterView
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.runtime import CoordinatorContext
from odradek.coordinator.transaction.records import TxnState
from odradek.coordinator.transaction.runtime import TransactionCoordinatorRuntime
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.purgatory import Purgatory
from odradek.storage import AppendInfo, LogManager

TID = "tx"
# A topic that does not exist: its marker is not needed, so the job goes straight to Complete.
GONE = ("gone", 0)


def test_a_failed_complete_write_is_retried(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": "1"})
    logs = LogManager(config.log_dirs, clock)
    store = LocalMetadataStore(config.log_dirs[0], node_id=1)
    topics = TopicManager(config, store, logs, clock)
    topics.open()
    refusals = 0  # Complete writes still to refuse
    cluster = LocalClusterView(
        BrokerEndpoint(1, "broker.example", 9092), store.cluster_id, topics, lambda g: 0
    )
    runtime = TransactionCoordinatorRuntime(
        CoordinatorContext(config, topics, clock, Purgatory().replicated),
        ProducerIdManager(store),
        cluster,
    )
    append = runtime.state_topic.append

    def refusing_append(*args: Any, **kwargs: Any) -> tuple[Partition, AppendInfo]:
        nonlocal refusals
        if refusals:
            refusals -= 1
            raise KafkaError(ErrorCode.not_enough_replicas, "refused by the test")
        return append(*args, **kwargs)

    runtime.state_topic.append = refusing_append  # type: ignore[method-assign]
    runtime.load()

    async def scenario() -> TxnState:
        answer = await runtime.write(
            TID, lambda s: s.answer(s.coordinator.init_producer_id(TID, 60_000, -1, -1))
        )
        assert answer.error == ErrorCode.none
        pid, epoch = answer.producer_id, answer.producer_epoch
        added = await runtime.write(
            TID, lambda s: s.answer(s.coordinator.add_partitions(TID, pid, epoch, [GONE]))
        )
        assert added.error == ErrorCode.none
        ended = await runtime.write(
            TID, lambda s: s.answer(s.coordinator.end_txn(TID, pid, epoch, True))
        )
        assert ended.error == ErrorCode.none
        # The Prepare record is written and the markers' task not yet run: refuse the
        # Complete record twice.
        nonlocal refusals
        refusals = 2

        async def completed() -> TxnState:
            while True:
                metadata = runtime.coordinator.metadata(TID)
                assert metadata is not None
                if metadata.state != TxnState.PREPARE_COMMIT:
                    return metadata.state
                await asyncio.sleep(0.01)

        try:
            return await asyncio.wait_for(completed(), 10)
        finally:
            await runtime.stop()

    try:
        assert asyncio.run(scenario()) == TxnState.COMPLETE_COMMIT
        assert refusals == 0  # both refusals were met, and the third write went through
    finally:
        logs.close()
