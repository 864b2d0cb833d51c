"""``/metrics`` of a three-broker cluster: a follower killed makes the leader's partition
under-replicated and its ISR shrink counter move; the follower back makes them go back."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.testing import RunningCluster, wait_until

from ..metrics_support import Scrape, metrics_address, scrape
from .support import admin, create_topic, partition_view

pytestmark = pytest.mark.slow

TOPIC = "watched"


def test_a_killed_follower_shows_as_under_replicated_and_an_isr_shrink(tmp_path: Path) -> None:
    settings = {
        "metrics.listener": "127.0.0.1:0",
        "replica.lag.time.max.ms": "2000",
        "zookeeper.session.timeout.ms": "10000",
    }
    with RunningCluster(tmp_path, size=3, settings=settings) as cluster:
        addresses = {b: metrics_address(cluster.output(b)) for b in cluster.brokers}
        create_topic(cluster.bootstrap, TOPIC, partitions=1, replication=3)
        view = wait_until(
            lambda: (v := partition_view(cluster.bootstrap, TOPIC)).isr and len(v.isr) == 3 and v,
            what="all three replicas in the ISR",
        )
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1"})
        for _ in range(10):
            producer.produce(TOPIC, b"before", partition=0)
        assert producer.flush(30) == 0
        leader = addresses[view.leader]
        before = scrape(leader)
        assert before.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert (
            before.value("kafka_cluster_partition_underreplicated", topic=TOPIC, partition="0") == 0
        )
        assert before.value("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 10
        shrinks = before.value("kafka_server_replicamanager_isrshrinks_total")
        # Kafka counts a follower's fetch under "Fetch" and again under "FetchFollower".
        requests = "kafka_network_requestmetrics_requests_total"
        follower_fetches = before.value(requests, request="FetchFollower")
        assert follower_fetches > 0
        assert before.value(requests, request="FetchConsumer") == 0
        assert before.value(requests, request="Fetch") == follower_fetches
        assert (
            before.value(
                "kafka_network_requestmetrics_totaltime_seconds_count", request="FetchFollower"
            )
            == follower_fetches
        )
        controllers = sum(
            scrape(a).value("kafka_controller_kafkacontroller_activecontrollercount")
            for a in addresses.values()
        )
        assert controllers == 1
        # Each follower fetches in a session of its own with the leader (KIP-227).
        sessions = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
        assert before.value(sessions) >= 2
        assert before.value(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
        ) >= before.value(sessions)

        follower = next(b for b in view.replicas if b != view.leader)
        cluster.kill(follower)
        # As in Kafka, a follower that stopped fetching stays in sync while the leader has
        # nothing newer; records written now leave it behind, and the leader drops it from the
        # ISR after replica.lag.time.max.ms, long before ZooKeeper ends its session (at which
        # the controller would take it out itself).
        for _ in range(10):
            producer.produce(TOPIC, b"after", partition=0)
        producer.flush(30)

        def shrunk() -> Scrape | None:
            now = scrape(leader)
            under = now.value("kafka_server_replicamanager_underreplicatedpartitions")
            return now if under == 1 else None

        after = wait_until(shrunk, timeout_s=60, what="the partition under-replicated")
        assert after.value("kafka_server_replicamanager_isrshrinks_total") == shrinks + 1
        assert (
            after.value("kafka_cluster_partition_underreplicated", topic=TOPIC, partition="0") == 1
        )
        assert after.value("kafka_server_replicamanager_underminisrpartitioncount") == 0
        assert after.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        # The follower left kept fetching in its session: no new one (the killed follower's
        # stays until evicted).
        assert after.value(sessions) == before.value(sessions)

        # Its registration must be gone before it registers again.
        wait_until(
            lambda: follower not in admin(cluster.bootstrap).list_topics(timeout=10).brokers,
            timeout_s=60,
            what="the killed broker's session ended",
        )
        cluster.start_broker(follower)
        back = wait_until(
            lambda: (
                (s := scrape(leader)).value("kafka_server_replicamanager_underreplicatedpartitions")
                == 0
                and s
            ),
            timeout_s=60,
            what="the follower back in the ISR",
        )
        assert back.value("kafka_server_replicamanager_isrexpands_total") >= 1
        assert back.value("kafka_server_replicamanager_isrshrinks_total") == shrinks + 1
