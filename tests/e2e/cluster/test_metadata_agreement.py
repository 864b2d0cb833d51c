"""Metadata from every broker of a three-broker cluster tells the same story: for each partition
the same leader, leader epoch, replicas and ISR, and ``offline_replicas`` names a killed broker
for as long as it is down.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode
from odradek.testing import wait_until

from .failover_support import (
    FAILOVER_TIMEOUT_S,
    PartitionMetadata,
    address,
    advertised_brokers,
    create_replicated_topic,
    describe,
    live_ids,
    started_cluster,
    unique_name,
)

PARTITIONS = 3


def everyone_agrees(cluster, topic) -> list[PartitionMetadata] | None:
    """The topic's partitions if every running broker describes them alike, else None."""
    answers = [describe(address(cluster, b), topic) for b in live_ids(cluster)]
    first = answers[0]
    if first is None or any(a != first for a in answers[1:]):
        return None
    return first


def test_every_broker_describes_partitions_alike_and_names_a_killed_one_offline(tmp_path):
    with started_cluster(tmp_path) as cluster:
        topic = unique_name("agreement")
        create_replicated_topic(cluster, topic, PARTITIONS)
        healthy = wait_until(lambda: everyone_agrees(cluster, topic), what="agreement")
        assert len(healthy) == PARTITIONS
        for p in healthy:
            assert p.error_code == ErrorCode.none
            assert sorted(p.replicas) == [1, 2, 3]
            assert sorted(p.isr) == [1, 2, 3]
            assert p.leader in p.replicas
            assert p.leader_epoch >= 0
            assert p.offline == ()
        # Kafka's assignment spreads the leaders over the brokers.
        assert len({p.leader for p in healthy}) > 1

        victim = healthy[0].leader
        cluster.kill(victim)

        def victim_offline() -> list[PartitionMetadata] | None:
            found = everyone_agrees(cluster, topic)
            if found is None:
                return None
            for p in found:
                if p.offline != (victim,) or victim in p.isr or p.leader in (victim, -1):
                    return None
            return found

        down = wait_until(victim_offline, FAILOVER_TIMEOUT_S, 0.2, "the killed broker offline")
        for before, after in zip(healthy, down, strict=True):
            assert after.replicas == before.replicas  # the assignment stays
            assert after.error_code == ErrorCode.none
            if before.leader == victim:
                assert after.leader_epoch > before.leader_epoch
            else:
                assert after.leader == before.leader
        for broker_id in live_ids(cluster):
            assert advertised_brokers(cluster, broker_id) == {1, 2, 3} - {victim}

        cluster.start_broker(victim)

        def victim_back() -> list[PartitionMetadata] | None:
            found = everyone_agrees(cluster, topic)
            if found is None or len(live_ids(cluster)) != 3:
                return None
            if any(p.offline or sorted(p.isr) != [1, 2, 3] for p in found):
                return None
            return found

        back = wait_until(victim_back, FAILOVER_TIMEOUT_S, 0.2, "the restarted broker in sync")
        for p in back:
            assert p.leader != -1
        for broker_id in live_ids(cluster):
            assert advertised_brokers(cluster, broker_id) == {1, 2, 3}
