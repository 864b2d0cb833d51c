"""A broker's part in a ZooKeeper cluster (odradek.cluster.node), with a real ZooKeeper."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import MetadataChange, PartitionState, TopicMetadata
from odradek.cluster.metadata.zookeeper.store import ZooKeeperMetadataStore
from odradek.cluster.node import ClusterNode
from odradek.cluster.replication.purgatory import Purgatory
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.storage import LogManager

NODE = 1


async def until(condition: Callable[[], bool], timeout_s: float = 15) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


def test_partition_states_reported_before_join_reach_the_view(
    zookeeper_connect: str, tmp_path: Path
) -> None:
    """The store's watches start with its first listener, and report each partition's state
    once, to the listeners there are then. Other parts of the broker add theirs before the
    node joins (the group coordinator, the credentials): the node must hear those first
    reports all the same, or a restarted follower never learns its partition's leader (the
    state changes only once it follows) and Metadata answers the partition with no leader."""
    config = BrokerConfig(
        {
            "zookeeper.connect": zookeeper_connect,
            "broker.id": str(NODE),
            "zookeeper.session.timeout.ms": "6000",
        }
    )
    clock = ManualClock()
    state = PartitionState(NODE, 3, (NODE,), 1)

    async def scenario() -> PartitionState | None:
        # What the cluster holds before this broker starts (another broker's store wrote it).
        writer = await asyncio.to_thread(ZooKeeperMetadataStore.open, config)
        try:
            await writer.put(TopicMetadata("t", uuid.uuid4(), 1, {}, ((NODE,),)))
            await writer.write_partition_state("t", 0, state, None)
        finally:
            writer.close()
        node = ClusterNode(config, clock, Purgatory())
        logs = LogManager([tmp_path / "logs"], clock)
        try:
            store = await node.open_store()
            topics = TopicManager(config, store, logs, clock, node.live_brokers, leads_alone=False)
            topics.open()
            # Another part of the broker listens before the node joins. The watches' first
            # reports are over once it hears the ACL changes listed: they are listed after
            # every topic's watches are set.
            seen: list[MetadataChange] = []
            store.add_listener(asyncio.get_running_loop(), seen.append)
            await until(lambda: any(c.kind == "acls" for c in seen))
            await node.join(topics, logs, ("127.0.0.1", 9092), lambda _: 0)
            return node.view.partition_state("t", 0)
        finally:
            await node.stop(10)
            logs.close()

    known = asyncio.run(scenario())
    assert known is not None
    assert (known.leader, known.leader_epoch, known.isr) == (NODE, 3, (NODE,))
