"""Kafka's Java producer and consumer against a three-broker cluster: a topic with replication
factor 3 and ``min.insync.replicas=2`` keeps every acknowledged record through a kill -9 of a
leader while the Java producer (idempotent, acks=all) writes."""

from __future__ import annotations

import threading

import pytest

from odradek.testing import RunningCluster, wait_until
from tests.e2e.cluster.support import create_topic, leader_of, read_partition

from .support import classpath, consume, parse_produced, run_java, start_java

pytestmark = pytest.mark.slow

TOPIC, PARTITIONS, COUNT = "java-replicated", 3, 600


def test_every_acknowledged_record_survives_a_leader_kill(tmp_path):
    classpath()
    with RunningCluster(tmp_path) as cluster:
        create_topic(
            cluster.bootstrap, TOPIC, PARTITIONS, replication=3, **{"min.insync.replicas": "2"}
        )
        log = tmp_path / "producer.log"
        producer = start_java(
            "JavaProducer", cluster.bootstrap, TOPIC, str(COUNT), "r", "12", "10", log=log
        )
        lines: list[str] = []
        assert producer.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(producer.stdout), daemon=True)
        reader.start()
        try:
            wait_until(lambda: len(lines) >= 100, 60, what="100 records acknowledged")
            victim = leader_of(cluster.bootstrap, TOPIC, 0)
            assert victim > 0
            acked_before = len(lines)
            cluster.kill(victim)
            assert producer.wait(120) == 0, log.read_text()
        finally:
            if producer.poll() is None:
                producer.kill()
        reader.join(10)

        produced = parse_produced(lines)
        assert produced.done and not produced.failed, (produced.failed[:5], log.read_text())
        assert len(produced.acked) == COUNT > acked_before
        assert leader_of(cluster.bootstrap, TOPIC, 0) not in (victim, -1)

        # Every acknowledged record where it was acknowledged, read without a group.
        for partition in range(PARTITIONS):
            acked = {o: v for v, (p, o) in produced.acked.items() if p == partition}
            stored = read_partition(cluster.bootstrap, TOPIC, max(acked) + 1, partition)
            assert {o: stored.get(o, b"").decode() for o in acked} == acked

        # The same through the Java consumer in a group.
        consumed = consume(cluster.bootstrap, TOPIC, "java-replicated-group", COUNT)
        read = {r.value: (r.partition, r.offset) for r in consumed.records}
        assert len(consumed.records) == len(read), "a record was read twice"
        missing = sorted(v for v in produced.acked if v not in read)
        moved = sorted(v for v, where in produced.acked.items() if read.get(v, where) != where)
        assert not missing, f"{len(missing)} acknowledged records missing, first {missing[:5]}"
        assert not moved, f"{len(moved)} records read elsewhere than acknowledged: {moved[:5]}"
        assert set(read) == set(produced.acked)


def test_transactions_v2_across_brokers(tmp_path):
    """A Kafka 4 transactional producer (transaction version 2) writing to partitions led by
    every broker: the leaders that are not the transaction's coordinator add their partitions
    to the transaction over the network, and read_committed sees exactly the committed data."""
    classpath()
    with RunningCluster(tmp_path) as cluster:
        topic = "java-txn-v2"
        create_topic(cluster.bootstrap, topic, 6, replication=1)
        out = run_java(
            "JavaTransactions", cluster.bootstrap, topic, "cluster-tv2", "commit-abort", "30"
        )
        assert out.split() == ["committed", "aborted", "committed", "fenced", "done"]
        committed = consume(
            cluster.bootstrap, topic, "java-txn-v2-rc", 31, "isolation.level=read_committed"
        )
        assert sorted(r.value for r in committed.records) == sorted(
            [f"c{i}" for i in range(30)] + ["last"]
        )
