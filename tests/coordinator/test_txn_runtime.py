"""The transaction coordinator's runtime on a real log: a Complete record whose write fails (too
few in-sync replicas of ``__transaction_state``, as while a broker of the cluster is down) is
written again, so the transaction does not stay prepared until the partition next loads."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.clock import ManualClock
from odradek.cluster.metadata.producer_ids import ProducerIdManager
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.metadata.view import BrokerEndpoint, LocalClusterView
from odradek.cluster.replication.partition import Partition
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.txn_records import TxnState
from odradek.coordinator.txn_runtime import TransactionCoordinatorRuntime
from odradek.protocol.errors import ErrorCode
from odradek.server.purgatory import Purgatory
from odradek.storage import LogManager

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
    purgatory = Purgatory()
    refusals = 0  # Complete writes still to refuse

    async def wait_replicated(
        partition: Partition, offset: int, timeout_s: float, api_key: int = -1
    ) -> ErrorCode:
        nonlocal refusals
        if refusals:
            refusals -= 1
            return ErrorCode.not_enough_replicas
        return await purgatory.replicated(partition, offset, timeout_s, api_key)

    runtime = TransactionCoordinatorRuntime(
        config, topics, clock, ProducerIdManager(store), wait_replicated
    )
    cluster = LocalClusterView(
        BrokerEndpoint(1, "broker.example", 9092), store.cluster_id, topics, lambda g: 0
    )
    topics.cluster = cluster
    runtime.load()
    runtime.cluster = cluster

    async def scenario() -> TxnState:
        answer = await runtime.init_producer_id(TID, 60_000, -1, -1)
        assert answer.error == ErrorCode.none
        pid, epoch = answer.producer_id, answer.producer_epoch
        assert (await runtime.add_partitions(TID, pid, epoch, [GONE])).error == ErrorCode.none
        assert (await runtime.end_txn(TID, pid, epoch, True)).error == ErrorCode.none
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
