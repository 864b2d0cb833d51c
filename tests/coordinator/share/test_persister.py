"""The partition leaders' persister talking to a share coordinator on another broker: every
share state API over a real connection to a real broker (the one this test starts), through
the inter-broker path a cluster takes when the key's ``__share_group_state`` partition is led
elsewhere."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.cluster.metadata.view import BrokerEndpoint, PartitionInfo
from odradek.cluster.share.persister import AVAILABLE, StateBatch
from odradek.config import BrokerConfig
from odradek.coordinator.share.persister import DefaultStatePersister
from odradek.coordinator.share.records import StateKey
from odradek.protocol.errors import ErrorCode
from odradek.testing import running_broker

REMOTE = 1
TOPIC = uuid.UUID(int=5)


@dataclass
class ElsewhereView:
    """Every partition led by the broker at ``endpoint``; this one is node 99."""

    endpoint: BrokerEndpoint
    node_id: int = 99
    cluster_id: str = "c"

    def controller_id(self) -> int:
        return REMOTE

    def live_brokers(self) -> Sequence[BrokerEndpoint]:
        return [self.endpoint]

    def partition_info(self, topic: str, index: int) -> PartitionInfo:
        return PartitionInfo(REMOTE, 0, (REMOTE,), (REMOTE,))

    def group_coordinator(self, group_id: str) -> BrokerEndpoint | None:
        return self.endpoint


class _Shard:
    def partition_of(self, key: StateKey) -> int:
        return 0


class _Topic:
    async def ensure(self) -> None:
        pass


class NotHere:
    """A share coordinator that serves nothing here."""

    shard = _Shard()
    state_topic = _Topic()

    def serves(self, key: StateKey) -> bool:
        return False


def test_every_share_state_call_reaches_the_coordinator_elsewhere(tmp_path: Path) -> None:
    with running_broker(tmp_path, node_id=str(REMOTE)) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        view = ElsewhereView(BrokerEndpoint(REMOTE, host, int(port)))
        persister = DefaultStatePersister(
            NotHere(),  # type: ignore[arg-type]
            BrokerConfig({"log.dirs": str(tmp_path / "here")}),
            view,
        )

        async def run() -> None:
            try:
                assert (await persister.read("g", TOPIC, 0, 0)).start_offset == -1
                assert await persister.initialize("g", TOPIC, 0, 1, 10) == ErrorCode.none
                batches = [StateBatch(10, 11, AVAILABLE, 2)]
                assert await persister.write("g", TOPIC, 0, 1, 4, 10, batches) == ErrorCode.none
                read = await persister.read("g", TOPIC, 0, 4)
                assert (read.error, read.state_epoch, read.start_offset) == (ErrorCode.none, 1, 10)
                assert read.batches == tuple(batches)
                stale = await persister.write("g", TOPIC, 0, 1, 3, 12, [])
                assert stale == ErrorCode.fenced_leader_epoch
                summary = await persister.summary("g", TOPIC, 0)
                assert (summary.leader_epoch, summary.start_offset) == (4, 10)
                assert await persister.delete("g", TOPIC, 0) == ErrorCode.none
                assert (await persister.read("g", TOPIC, 0, 0)).start_offset == -1
            finally:
                await persister.close()

        asyncio.run(run())
