"""ZooKeeper itself goes away under load: the cluster's brokers reconnect, an idempotent acks=all
producer keeps going once ZooKeeper is back, and nothing it saw acknowledged is lost.

Two outages, each with a ZooKeeper of the test's own:

- ZooKeeper killed and restarted, shorter than the brokers' session timeout: the sessions survive
  (their ephemeral registrations keep their owners), the controller stays.
- ZooKeeper frozen (SIGSTOP) for longer than the session timeout. A killed and restarted ZooKeeper
  cannot show this, however long it stays down: it reloads its sessions from its data directory
  and gives each a fresh timeout, so its clients reconnect in time. A frozen one finds on waking
  that its sessions' time ran out while it slept: every broker's session expires, every broker
  registers again and a controller is elected again. (ZooKeeper may still keep a session whose
  client's reconnect it reads before its expiry check, so "every" is every broker whose session
  it expired.)

After either, a topic created afterwards gets leaders and a full ISR (the watches work again), and
every broker tells the same story about the loaded partition.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from kazoo.client import KazooClient

from odradek.testing import RunningCluster, wait_until

from .failover_support import (
    FAILOVER_TIMEOUT_S,
    SESSION_TIMEOUT_MS,
    STEP,
    Ledger,
    Load,
    assert_read_back,
    confluent_consumer,
    confluent_producer,
    create_replicated_topic,
    started_cluster,
    unique_name,
    wait_for_leader,
    wait_for_progress,
)

# ZooKeeper's largest session timeout is 20 ticks (the test server ticks every 500 ms): room for a
# restart of its JVM.
LONG_SESSION_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class Registrations:
    """Who holds what in ZooKeeper: each registered broker's session, and the controller."""

    owners: dict[int, int]  # broker id → session owning /brokers/ids/<id>
    controller: int | None
    controller_epoch: int


def registrations(cluster: RunningCluster) -> Registrations | None:
    """Read from ZooKeeper directly (a client of the test's own); None while it does not answer."""
    client = KazooClient(hosts=cluster.zookeeper_connect, timeout=5)
    try:
        client.start(timeout=5)
    except Exception:
        client.close()
        return None
    try:
        owners = {}
        for child in client.get_children("/brokers/ids"):
            _, stat = client.get(f"/brokers/ids/{child}")
            owners[int(child)] = stat.ephemeralOwner
        controller = None
        if client.exists("/controller"):
            data, _ = client.get("/controller")
            controller = int(json.loads(data)["brokerid"])
        epoch, _ = client.get("/controller_epoch")
        return Registrations(owners, controller, int(epoch))
    finally:
        client.stop()
        client.close()


def all_registered(cluster: RunningCluster) -> Registrations | None:
    found = registrations(cluster)
    if found is None or sorted(found.owners) != [1, 2, 3] or found.controller is None:
        return None
    return found


@pytest.fixture
def loaded(tmp_path, request) -> Iterator[Callable[[int], tuple[RunningCluster, str, Ledger]]]:
    """``loaded(session_timeout_ms)``: a cluster, an RF=3 topic, and a confluent-kafka consumer
    reading it until the test ends; the test runs the producer."""
    with contextlib.ExitStack() as stack:

        def start(session_timeout_ms: int) -> tuple[RunningCluster, str, Ledger]:
            settings = {"zookeeper.session.timeout.ms": str(session_timeout_ms)}
            cluster = stack.enter_context(started_cluster(tmp_path, settings=settings))
            topic = unique_name(request.node.name)
            create_replicated_topic(cluster, topic)
            ledger = Ledger()
            consumer = Load(
                "confluent-consumer", ledger, confluent_consumer(cluster.bootstrap, topic, ledger)
            )
            stack.callback(consumer.stop)
            return cluster, topic, ledger

        yield start


def assert_cluster_recovered(cluster: RunningCluster, topic: str) -> None:
    """The loaded partition has a leader and a full ISR on every broker, and a topic made now
    gets the same (every broker follows ZooKeeper's changes again)."""
    wait_for_leader(cluster, topic, isr_size=3)
    fresh = unique_name("after-outage")
    create_replicated_topic(cluster, fresh, 2)


def test_a_zookeeper_restart_shorter_than_the_session_timeout_keeps_the_sessions(loaded):
    cluster, topic, ledger = loaded(LONG_SESSION_TIMEOUT_MS)
    producer = Load("producer", ledger, confluent_producer(cluster.bootstrap, topic, ledger))
    try:
        wait_for_progress(ledger.acks, STEP, "progress before the outage")
        before = all_registered(cluster)
        assert before is not None
        started = time.monotonic()
        cluster.zookeeper.restart()
        outage_s = time.monotonic() - started
        assert outage_s < LONG_SESSION_TIMEOUT_MS / 1000, "the restart outlasted the sessions"
        after = wait_until(
            lambda: all_registered(cluster), FAILOVER_TIMEOUT_S, 0.2, "registrations"
        )
        assert after == before  # the same sessions, controller and epoch
        wait_for_progress(ledger.acks, STEP, "progress after the outage")
        assert_cluster_recovered(cluster, topic)
        wait_for_progress(ledger.acks, STEP, "progress after the recovery")
    finally:
        producer.stop()
    assert_read_back(ledger, cluster, topic)
    assert all(cluster.is_running(b) for b in cluster.brokers)


def test_a_zookeeper_outage_longer_than_the_session_timeout_re_registers_the_brokers(loaded):
    cluster, topic, ledger = loaded(SESSION_TIMEOUT_MS)
    producer = Load("producer", ledger, confluent_producer(cluster.bootstrap, topic, ledger))
    try:
        wait_for_progress(ledger.acks, STEP, "progress before the outage")
        before = all_registered(cluster)
        assert before is not None
        process = cluster.zookeeper.process
        assert process is not None
        process.send_signal(signal.SIGSTOP)
        try:
            # The outage's length is what is under test: real time on ZooKeeper's own clock.
            time.sleep(2 * SESSION_TIMEOUT_MS / 1000)
        finally:
            process.send_signal(signal.SIGCONT)

        def re_registered() -> tuple[Registrations, set[int]] | None:
            """All three registered, those whose session expired under new sessions, and a
            controller elected again if its session was among them."""
            found = all_registered(cluster)
            if found is None:
                return None
            expired = {b for b, owner in found.owners.items() if owner != before.owners[b]}
            if not expired:
                return None
            if before.controller in expired and found.controller_epoch <= before.controller_epoch:
                return None
            return found, expired

        after, expired = wait_until(
            re_registered, FAILOVER_TIMEOUT_S, 0.2, "brokers registered again"
        )
        print(f"sessions expired: {sorted(expired)}; controller epoch {after.controller_epoch}")
        # Each expired session is a new registration of a live broker, none of the old ones.
        assert not set(after.owners.values()) & {before.owners[b] for b in expired}
        assert after.controller in after.owners
        wait_for_progress(ledger.acks, STEP, "progress after the outage")
        assert_cluster_recovered(cluster, topic)
        wait_for_progress(ledger.acks, STEP, "progress after the recovery")
    finally:
        producer.stop()
    assert_read_back(ledger, cluster, topic)
    assert all(cluster.is_running(b) for b in cluster.brokers)
