"""``odradek cluster`` and ``odradek topics describe`` against a real three-broker cluster
(ZooKeeper and ``odradek serve`` processes), checked against confluent-kafka's AdminClient.

The tests share one cluster; the last one kills a broker.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningCluster, wait_until

from .support import ids, odradek, table_after

TIMEOUT_S = 15
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningCluster]:
    # A short replica.lag.time.max.ms: leaders check their ISR every second, so that a leader
    # that would put a dead follower back in the ISR does so while the test looks.
    settings = {"replica.lag.time.max.ms": "2000"}
    with RunningCluster(tmp_path_factory.mktemp("cli-cluster"), settings=settings) as running:
        yield running


def admin(cluster: RunningCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def make_topic(cluster: RunningCluster, records: int = 0) -> tuple[str, dict[int, int]]:
    """A topic with RF=3 and ``records`` records spread over its partitions, once every
    replica is in sync; returns its name and the records stored per partition."""
    name = f"cli-{uuid.uuid4().hex[:8]}"
    client = admin(cluster)  # kept alive while its futures run
    futures = client.create_topics(
        [NewTopic(name, num_partitions=PARTITIONS, replication_factor=3)],
        operation_timeout=TIMEOUT_S,
        request_timeout=TIMEOUT_S,
    )
    futures[name].result(timeout=TIMEOUT_S)
    counts = dict.fromkeys(range(PARTITIONS), 0)

    def delivered(err: object, message: object) -> None:
        assert err is None, err
        counts[message.partition()] += 1  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(records):
        producer.produce(
            name, f"record-{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered
        )
    assert producer.flush(TIMEOUT_S) == 0
    wait_until(lambda: all_in_sync(cluster, name), what=f"every replica of {name} in sync")
    return name, counts


def partitions(
    cluster: RunningCluster, topic: str, *, known: bool = True
) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition → (leader, replicas, ISR) as confluent-kafka's AdminClient sees them; with
    ``known`` False, nothing while the answering broker has not heard of the topic yet (a
    retriable error: Kafka's brokers, too, learn a new topic a moment after its creation)."""
    metadata = admin(cluster).list_topics(topic, timeout=TIMEOUT_S)
    described = metadata.topics[topic]
    # librdkafka does not mark a topic-level error of a Metadata answer retriable: LEADER_NOT_
    # AVAILABLE is what a broker that has not learnt of a topic made elsewhere answers (as Kafka's
    # do when auto-creation finds it exists).
    on_its_way = (KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART)
    if (
        not known
        and described.error is not None
        and (described.error.retriable() or described.error.code() in on_its_way)
    ):
        return {}
    assert described.error is None, described.error
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in described.partitions.values()}


def all_in_sync(cluster: RunningCluster, topic: str) -> bool:
    found = partitions(cluster, topic, known=False)
    return len(found) == PARTITIONS and all(
        leader >= 0 and sorted(isr) == sorted(replicas) for leader, replicas, isr in found.values()
    )


def test_cluster_lists_the_brokers_and_the_controller(cluster: RunningCluster) -> None:
    done = odradek("cluster", "--bootstrap-server", cluster.bootstrap)
    metadata = admin(cluster).list_topics(timeout=TIMEOUT_S)
    brokers = table_after(done.stdout, "BROKER")
    assert [int(b["BROKER"]) for b in brokers] == [1, 2, 3]
    assert {int(b["BROKER"]): b["ADDRESS"] for b in brokers} == {
        i: cluster.brokers[i].bootstrap for i in (1, 2, 3)
    }
    controllers = [int(b["BROKER"]) for b in brokers if b["STATUS"] == "controller"]
    assert controllers == [metadata.controller_id]
    assert f"Controller: broker {metadata.controller_id} at " in done.stdout
    for title in ("Under-replicated partitions", "Under-min-ISR partitions", "Offline partitions"):
        assert f"{title}: 0" in done.stdout, done.stdout


def test_topics_describe_matches_the_metadata_of_confluent_kafka(cluster: RunningCluster) -> None:
    topic, counts = make_topic(cluster, records=30)
    expected = partitions(cluster, topic)
    done = odradek("topics", "describe", topic, "--bootstrap-server", cluster.bootstrap)
    assert done.stdout.startswith(f"Topic: {topic}\tPartitionCount: {PARTITIONS}\t")
    assert "ReplicationFactor: 3" in done.stdout
    rows = table_after(done.stdout, "PARTITION")
    assert [int(r["PARTITION"]) for r in rows] == list(range(PARTITIONS))
    for row in rows:
        partition = int(row["PARTITION"])
        leader, replicas, isr = expected[partition]
        assert int(row["LEADER"]) == leader
        assert ids(row["REPLICAS"]) == replicas
        assert sorted(ids(row["ISR"])) == sorted(isr)
        assert row["OFFLINE"] == "-"
        assert (int(row["LOG-START"]), int(row["LOG-END"])) == (0, counts[partition])
        # The sizes are the leader's, read from its own data directory.
        assert int(row["FROM"]) == leader
        assert row["LOG-DIR"] == str((cluster.directory / f"broker-{leader}").absolute())
        assert int(row["SIZE-BYTES"]) > 0 and int(row["SEGMENTS"]) == 1


def test_after_a_broker_is_killed_its_partitions_are_under_replicated(
    cluster: RunningCluster,
) -> None:
    topic, _ = make_topic(cluster)
    before = partitions(cluster, topic)
    victim = before[0][0]  # the leader of partition 0
    led = sorted(p for p, (leader, _, _) in before.items() if leader == victim)
    cluster.kill(victim)

    def moved() -> bool:
        now = partitions(cluster, topic)
        return all(leader not in (victim, -1) for leader, _, _ in now.values()) and all(
            victim not in now[p][2] for p in led
        )

    wait_until(moved, timeout_s=30, what=f"leaderships moved off broker {victim}")

    def shown() -> str | None:
        # The broker asked learns of the change from ZooKeeper's watches too: ask until it has.
        output = odradek("cluster", "--bootstrap-server", cluster.bootstrap).stdout
        brokers = {int(b["BROKER"]): b["STATUS"] for b in table_after(output, "BROKER")}
        return output if brokers.get(victim) == "not-live" else None

    output = wait_until(shown, timeout_s=30, what=f"broker {victim} shown not live")
    assert sorted(b for b in (1, 2, 3) if b != victim) == sorted(
        int(b["BROKER"])
        for b in table_after(output, "BROKER")
        if b["STATUS"] in ("live", "controller")
    )
    under = table_after(output, "TOPIC", after="Under-replicated partitions")
    ours = sorted(int(r["PARTITION"]) for r in under if r["TOPIC"] == topic)
    assert set(led) <= set(ours), output
    for row in under:
        assert victim in ids(row["REPLICAS"]) and victim not in ids(row["ISR"])
        assert ids(row["OFFLINE"]) == [victim]
        assert row["LEADER"] != "none" and int(row["LEADER"]) != victim
    assert re.search(r"^Offline partitions: 0$", output, re.MULTILINE), output
    assert re.search(r"^Under-min-ISR partitions: 0$", output, re.MULTILINE), output

    described = odradek("topics", "describe", topic, "--bootstrap-server", cluster.bootstrap)
    for row in table_after(described.stdout, "PARTITION"):
        assert ids(row["OFFLINE"]) == [victim]
        assert int(row["FROM"]) == int(row["LEADER"]) != victim

    assert ours == list(range(PARTITIONS)), output
