"""Client quotas in a ZooKeeper cluster: a quota set through one broker is in ZooKeeper, and the
other broker throttles a client over it, while a client without a quota is not throttled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningBroker
from tests.e2e.security.conftest import two_brokers
from tests.e2e.test_client_quotas import produce_flat_out, set_quota

TIMEOUT_S = 20
QUOTA = 100_000  # bytes/s


@pytest.fixture
def cluster(tmp_path: Path, zookeeper_connect: str) -> Iterator[list[RunningBroker]]:
    with two_brokers(tmp_path, zookeeper_connect) as brokers:
        yield brokers


def largest_throttle(bootstrap: str, topic: str, client_id: str) -> float:
    """The largest throttle time a producer saw producing flat out to ``topic``."""
    return produce_flat_out(bootstrap, topic, client_id)[2]


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

    assert largest_throttle(second.bootstrap, topic, "limited") > 0
    assert largest_throttle(second.bootstrap, topic, "free") == 0
