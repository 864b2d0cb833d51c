"""Eligible leader replicas (KIP-966) with real brokers and a real ZooKeeper: a partition of
replication factor 3 and ``min.insync.replicas=2`` loses its replicas one by one; the one that
left the ISR while it was already below the minimum comes back first and leads cleanly, with
every acknowledged record (where Kafka before 4 would have waited for the last ISR member or
elected uncleanly)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.testing import RunningCluster, wait_until

from .support import create_topic, leader_of, partition_view, read_partition

pytestmark = pytest.mark.slow

TOPIC = "eligible"


def test_a_replica_that_left_a_too_small_isr_is_elected_cleanly(tmp_path: Path) -> None:
    settings = {"zookeeper.session.timeout.ms": "3000"}
    with RunningCluster(tmp_path, settings=settings) as cluster:
        create_topic(cluster.bootstrap, TOPIC, 1, 3, **{"min.insync.replicas": "2"})
        view = partition_view(cluster.bootstrap, TOPIC)
        leader = view.leader
        first, second = (r for r in view.replicas if r != leader)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(20):
            producer.produce(TOPIC, b"v%d" % i, partition=0)
        assert producer.flush(30) == 0

        cluster.kill(first)  # the ISR keeps min.insync.replicas: first is not eligible
        wait_until(
            lambda: (
                partition_view(cluster.bootstrap, TOPIC).isr == (leader, second)
                or partition_view(cluster.bootstrap, TOPIC).isr == (second, leader)
            ),
            60,
            what=f"broker {first} out of the ISR",
        )
        cluster.kill(second)  # below it now: second holds every committed record
        wait_until(
            lambda: partition_view(cluster.bootstrap, TOPIC).isr == (leader,),
            60,
            what=f"broker {second} out of the ISR",
        )
        cluster.kill(leader)
        cluster.start_broker(second)
        wait_until(
            lambda: leader_of(cluster.bootstrap, TOPIC) == second,
            60,
            what=f"broker {second} elected from the ELR",
        )
        records = read_partition(cluster.bootstrap, TOPIC, 20)
        assert sorted(records.values()) == sorted(b"v%d" % i for i in range(20))
