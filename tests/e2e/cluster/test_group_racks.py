"""Rack-aware assignment of KIP-848 consumer groups: confluent-kafka consumers with
``client.rack`` (``group.protocol=consumer``) in a cluster whose brokers name their racks each get
the partitions whose replicas are in their own rack."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from odradek.testing import RunningCluster, wait_until

from .support import create_topic, partition_view

pytestmark = pytest.mark.slow

TOPIC = "racked-group"
PARTITIONS = 4


def consumer(bootstrap: str, rack: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "by-rack",
            "group.protocol": "consumer",
            "client.rack": rack,
            "client.id": rack,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def test_consumers_get_the_partitions_of_their_own_rack(tmp_path: Path) -> None:
    racks = {1: "rack-a", 2: "rack-b"}
    with RunningCluster(
        tmp_path,
        size=2,
        racks=racks,
        settings={"group.consumer.heartbeat.interval.ms": "250"},
    ) as cluster:
        create_topic(cluster.bootstrap, TOPIC, PARTITIONS, 1)
        rack_of = {
            p: racks[partition_view(cluster.bootstrap, TOPIC, p).replicas[0]]
            for p in range(PARTITIONS)
        }
        assert set(rack_of.values()) == {"rack-a", "rack-b"}  # both racks hold some
        expected = {
            rack: {p for p, r in rack_of.items() if r == rack} for rack in ("rack-a", "rack-b")
        }
        members = {rack: consumer(cluster.bootstrap, rack) for rack in ("rack-b", "rack-a")}
        try:
            for member in members.values():
                member.subscribe([TOPIC])

            def by_rack() -> bool:
                for member in members.values():
                    member.poll(0.05)
                owned = {rack: {p.partition for p in m.assignment()} for rack, m in members.items()}
                return owned == expected

            wait_until(by_rack, timeout_s=60, what="each consumer on its own rack's partitions")
            # And it stays so.
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                assert by_rack()
        finally:
            for member in members.values():
                member.close()
