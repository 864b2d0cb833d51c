"""Leaderships move off a broker whose log dir fails (KIP-112), with nothing acknowledged lost.

Broker 1 of a three-broker cluster (real ZooKeeper) keeps its data on a 16 MB tmpfs and leads a
partition replicated to all three. An idempotent confluent-kafka producer with acks=all writes
to it until that disk is full: broker 1 answers KAFKA_STORAGE_ERROR and tells the controller
(``/log_dir_event_notification``), which elects another in-sync replica and takes broker 1 out
of the ISR; the producer goes on to the new leader, and every acknowledged record is read back.
That dir was broker 1's only one, so it halts, as Kafka does; restarted with space again, it
catches up and rejoins the ISR.

Mounting needs root (CAP_SYS_ADMIN); without it the test is skipped, saying so.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from odradek.testing import ZooKeeperServer, wait_until

from .failover_support import started_cluster, unique_name
from .support import admin, partition_view, read_partition

VALUE_BYTES = 50_000
RECORDS = 600  # about 30 MB: twice what the small disk holds
IN_FLIGHT = 40


def test_leaderships_move_off_a_broker_whose_log_dir_fails(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    small_disk = tmp_path / "broker-1"
    small_disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(small_disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        with started_cluster(tmp_path, zookeeper=zookeeper) as cluster:
            topic = unique_name("dir-failure")
            client = admin(cluster.bootstrap)
            for future in client.create_topics(
                [NewTopic(topic, 1, replica_assignment=[[1, 2, 3]])], operation_timeout=30
            ).values():
                future.result(30)
            wait_until(
                lambda: partition_view(cluster.bootstrap, topic).isr == (1, 2, 3),
                what="broker 1 leading with all in sync",
            )
            assert partition_view(cluster.bootstrap, topic).leader == 1

            acked: dict[int, bytes] = {}
            errors: list[KafkaError] = []

            def delivered(error: KafkaError | None, message: Any) -> None:
                if error is not None:
                    errors.append(error)
                else:
                    acked[message.offset()] = message.value()

            producer = Producer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 90_000,
                }
            )
            deadline = time.monotonic() + 120
            for i in range(RECORDS):
                while len(producer) >= IN_FLIGHT:
                    assert time.monotonic() < deadline, f"{len(acked)} acks of {i} sent"
                    producer.poll(0.05)
                value = b"%07d" % i + b"x" * VALUE_BYTES
                producer.produce(topic, value, partition=0, on_delivery=delivered)
                producer.poll(0)
            assert producer.flush(120) == 0
            assert errors == []
            assert len(acked) == RECORDS

            view = partition_view(cluster.bootstrap, topic)
            assert view.leader in (2, 3) and 1 not in view.isr, view
            assert "log dir" in cluster.output(1) and "is offline" in cluster.output(1)
            assert read_partition(cluster.bootstrap, topic, max(acked) + 1) == acked

            # Its only log dir offline, broker 1 halted (Kafka's Exit.halt), and stays out of
            # the ISR ...
            process = cluster.brokers[1].process
            assert process is not None and process.wait(60) == 1
            wait_until(
                lambda: "halting broker: every log dir is offline" in cluster.output(1),
                what="broker 1's reason for halting",
            )
            assert 1 not in partition_view(cluster.bootstrap, topic).isr
            # ... until it is restarted with space again: it catches up and is back in sync.
            subprocess.run(["mount", "-o", "remount,size=256m", str(small_disk)], check=True)
            cluster.start_broker(1)
            wait_until(
                lambda: 1 in partition_view(cluster.bootstrap, topic).isr,
                60,
                what="broker 1 back in the ISR",
            )
    finally:
        subprocess.run(["umount", "-l", str(small_disk)], check=False)
