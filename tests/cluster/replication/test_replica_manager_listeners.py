"""The replica manager tells its leadership listeners about every partition state it applies
(the group coordinator loads and unloads ``__consumer_offsets`` partitions from them)."""

from __future__ import annotations

from pathlib import Path

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore, PartitionState
from odradek.cluster.replication.fetcher import FetcherConfig
from odradek.cluster.replication.partition import NO_LEADER, Partition
from odradek.cluster.replication.replica_manager import ReplicaManager
from odradek.storage import LogConfig, PartitionLog

LOCAL, OTHER = 1, 2


def test_listeners_hear_each_applied_state_with_the_role_it_gave(tmp_path: Path) -> None:
    clock = ManualClock()
    log = PartitionLog.open(tmp_path / "__consumer_offsets-0", LogConfig(), clock)
    partition = Partition("__consumer_offsets", 0, log, local_id=LOCAL, clock=clock)
    manager = ReplicaManager(
        LOCAL,
        LocalMetadataStore(tmp_path, node_id=LOCAL),
        lambda topic, index: partition,
        lambda topic, index: None,
        lambda topic, index, state: None,
        lambda broker_id: None,  # no address: following starts no fetcher
        lambda: None,
        FetcherConfig(local_id=LOCAL),
        clock,
        30_000,
    )
    heard: list[tuple[Partition, bool]] = []
    manager.leadership_listeners.append(lambda p, leads: heard.append((p, leads)))
    failing_calls: list[bool] = []

    def failing(p: Partition, leads: bool) -> None:
        failing_calls.append(leads)
        raise RuntimeError("a listener's failure stays its own")

    manager.leadership_listeners.insert(0, failing)

    manager.apply(partition, PartitionState(LOCAL, 1, (LOCAL, OTHER), 1, 1))
    assert partition.is_leader
    manager.apply(partition, PartitionState(OTHER, 2, (OTHER,), 1, 2))
    assert not partition.is_leader
    manager.apply(partition, PartitionState(NO_LEADER, 3, (), 1, 3))
    manager.apply(partition, PartitionState(LOCAL, 1, (LOCAL,), 1, 0))  # stale: ignored
    manager.apply(partition, PartitionState(LOCAL, 4, (LOCAL,), 1, 4))
    assert heard == [(partition, True), (partition, False), (partition, False), (partition, True)]
    assert failing_calls == [True, False, False, True]
