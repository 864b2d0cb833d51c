"""Client quotas in a ZooKeeper cluster: a quota set through one broker is in ZooKeeper, and the
other broker throttles a client over it, while a client without a quota is not throttled."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningBroker
from tests.e2e.test_client_quotas import set_quota

TIMEOUT_S = 20
QUOTA = 100_000  # bytes/s


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_connect: str) -> Iterator[list[RunningBroker]]:
    brokers: list[RunningBroker] = []
    try:
        for broker_id in (1, 2):
            settings = {"broker.id": str(broker_id), "zookeeper.connect": zookeeper_connect}
            brokers.append(RunningBroker(tmp_path / f"b{broker_id}", settings).start())
        yield brokers
    finally:
        for broker in brokers:
            broker.stop()


def largest_throttle(bootstrap: str, topic: str, client_id: str, seconds: float) -> float:
    """Produce flat out to ``topic`` for ``seconds``; the largest throttle time the client saw."""
    throttles: list[float] = []

    def stats(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            throttles.append(broker["throttle"]["max"])

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 512,
            "statistics.interval.ms": 500,
            "stats_cb": stats,
        }
    )
    value = b"x" * 10_000
    deadline = time.monotonic() + seconds
    delivered: list[Any] = []
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value, on_delivery=lambda e, m: delivered.append(e))
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(1.0)
    assert delivered and all(e is None for e in delivered)
    return max(throttles, default=0.0)


def test_a_quota_set_through_one_broker_is_applied_by_another(
    cluster: list[RunningBroker],
) -> None:
    first, second = cluster
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    topic = "quota-everywhere"
    # One partition, placed on the second broker: the first never sees the records.
    new = NewTopic(topic, 1, replica_assignment=[[2]])
    admin.create_topics([new])[topic].result(TIMEOUT_S)
    set_quota(first.bootstrap, [("client-id", "limited")], "producer_byte_rate", QUOTA)

    assert largest_throttle(second.bootstrap, topic, "limited", 4.0) > 0
    assert largest_throttle(second.bootstrap, topic, "free", 2.0) == 0
