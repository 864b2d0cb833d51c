"""ZooKeeper itself goes away under load: the cluster's brokers reconnect, an idempotent acks=all
producer keeps going once ZooKeeper is back, and nothing it saw acknowledged is lost.

Two outages, each with a ZooKeeper of the test's own:

- ZooKeeper killed and restarted, shorter than the brokers' session timeout: the brokers connect to
  their same sessions again (their registrations keep their owners), the controller stays.
- ZooKeeper restarted while the brokers cannot reach it, and kept from them until it has expired
  their sessions: every broker registers again and a controller is elected again. Down alone is
  not enough, however long: a restarted ZooKeeper reloads its sessions and gives each a fresh
  timeout, so its clients reconnect in time; and a frozen one (SIGSTOP) races its expiry against
  the reconnects queued while it slept, keeping some sessions and not others. So the brokers
  reach ZooKeeper through a :class:`ZooKeeperProxy` that the test cuts.

After either, a topic created afterwards gets leaders and a full ISR (the watches work again), and
every broker tells the same story about the loaded partition.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

from odradek.protocol.errors import ErrorCode
from odradek.testing import (
    RunningCluster,
    ZooKeeperServer,
    wait_until,
    zookeeper_four_letter_word,
)
from tests.server.conftest import API_VERSIONS, CREATE_TOPICS, KafkaConnection

from .failover_support import (
    FAILOVER_TIMEOUT_S,
    STEP,
    Ledger,
    Load,
    ZooKeeperProxy,
    address,
    advertised_brokers,
    assert_read_back,
    confluent_consumer,
    confluent_producer,
    create_replicated_topic,
    create_topic,
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


def registrations(connect: str) -> Registrations | None:
    """Read from ZooKeeper at ``connect`` (a client of the test's own); None while it does not
    answer."""
    client = KazooClient(hosts=connect, timeout=5)
    try:
        client.start(timeout=5)
    except Exception:
        client.close()
        return None
    try:
        owners = {}
        for child in client.get_children("/brokers/ids"):
            # A node can go between the listing and the read (its session expiring right then).
            with contextlib.suppress(NoNodeError):
                _, stat = client.get(f"/brokers/ids/{child}")
                owners[int(child)] = stat.ephemeralOwner
        controller = None
        with contextlib.suppress(NoNodeError):
            data, _ = client.get("/controller")
            controller = int(json.loads(data)["brokerid"])
        epoch, _ = client.get("/controller_epoch")
        return Registrations(owners, controller, int(epoch))
    except (ConnectionLoss, SessionExpiredError):
        return None
    finally:
        client.stop()
        client.close()


def connected_sessions(zookeeper: ZooKeeperServer) -> set[int]:
    """The sessions with a client connected right now (ZooKeeper's ``cons``)."""
    answer = zookeeper_four_letter_word("127.0.0.1", zookeeper.port, "cons")
    return {int(sid, 16) for sid in re.findall(r"sid=0x([0-9a-f]+)", answer)}


def all_registered(connect: str) -> Registrations | None:
    found = registrations(connect)
    if found is None or sorted(found.owners) != [1, 2, 3] or found.controller is None:
        return None
    return found


def proxied_cluster(
    stack: contextlib.ExitStack, tmp_path: Path, settings: dict[str, str] | None = None
) -> tuple[ZooKeeperServer, ZooKeeperProxy, RunningCluster]:
    """A ZooKeeper of the test's own, the proxy the brokers reach it through and a started
    cluster, each closed with ``stack``."""
    zookeeper = stack.enter_context(ZooKeeperServer(tmp_path / "zookeeper"))
    proxy = ZooKeeperProxy(zookeeper).start()
    stack.callback(proxy.stop)
    cluster = stack.enter_context(
        started_cluster(tmp_path / "cluster", zookeeper=proxy, settings=settings)
    )
    return zookeeper, proxy, cluster


@contextlib.contextmanager
def confluent_load(
    stack: contextlib.ExitStack, cluster: RunningCluster, topic: str, ledger: Ledger
) -> Iterator[None]:
    """A confluent-kafka consumer (stopped with ``stack``) and producer (stopped, flushing, when
    the block ends) on ``topic``, noting what they see in ``ledger``."""
    consumer = Load(
        "confluent-consumer", ledger, confluent_consumer(cluster.bootstrap, topic, ledger)
    )
    stack.callback(consumer.stop)
    producer = Load("producer", ledger, confluent_producer(cluster.bootstrap, topic, ledger))
    try:
        yield
    finally:
        producer.stop()


def assert_cluster_recovered(cluster: RunningCluster, topic: str) -> None:
    """The loaded partition has a leader and a full ISR on every broker, and a topic made now
    gets the same (every broker follows ZooKeeper's changes again)."""
    wait_for_leader(cluster, topic, isr_size=3)
    fresh = unique_name("after-outage")
    create_replicated_topic(cluster, fresh, 2)


def test_a_zookeeper_restart_shorter_than_the_session_timeout_keeps_the_sessions(tmp_path):
    """The brokers are cut off (through the proxy) while ZooKeeper restarts and let back once it
    serves: a reconnect that reaches a ZooKeeper still starting can go unanswered, and kazoo
    then waits a whole session timeout for the answer, which loses the session."""
    settings = {"zookeeper.session.timeout.ms": str(LONG_SESSION_TIMEOUT_MS)}
    with contextlib.ExitStack() as stack:
        zookeeper, proxy, cluster = proxied_cluster(stack, tmp_path, settings)
        direct = zookeeper.connect_string(cluster.chroot)
        topic = unique_name("short-outage")
        create_replicated_topic(cluster, topic)
        ledger = Ledger()
        with confluent_load(stack, cluster, topic, ledger):
            wait_for_progress(ledger.acks, STEP, "progress before the outage")
            before = all_registered(direct)
            assert before is not None
            started = time.monotonic()
            proxy.cut()
            try:
                zookeeper.restart()
            finally:
                proxy.restore()
            outage_s = time.monotonic() - started
            print(f"ZooKeeper out of reach for {outage_s:.1f} s")
            assert outage_s < LONG_SESSION_TIMEOUT_MS / 1000, "the restart outlasted the sessions"
            # ZooKeeper reloads the sessions and their registrations from its data directory:
            # the brokers are back when their clients are connected to those same sessions.
            wait_until(
                lambda: set(before.owners.values()) <= connected_sessions(zookeeper),
                FAILOVER_TIMEOUT_S,
                0.2,
                "the brokers connected to their sessions again",
            )
            assert all_registered(direct) == before  # the controller and its epoch too
            wait_for_progress(ledger.acks, STEP, "progress after the outage")
            assert_cluster_recovered(cluster, topic)
            wait_for_progress(ledger.acks, STEP, "progress after the recovery")
        assert_read_back(ledger, cluster, topic)
        assert all(cluster.is_running(b) for b in cluster.brokers)


def test_a_zookeeper_outage_longer_than_the_session_timeout_re_registers_every_broker(tmp_path):
    with contextlib.ExitStack() as stack:
        zookeeper, proxy, cluster = proxied_cluster(stack, tmp_path)
        direct = zookeeper.connect_string(cluster.chroot)
        topic = unique_name("long-outage")
        create_replicated_topic(cluster, topic)
        ledger = Ledger()
        with confluent_load(stack, cluster, topic, ledger):
            wait_for_progress(ledger.acks, STEP, "progress before the outage")
            before = all_registered(direct)
            assert before is not None
            proxy.cut()
            zookeeper.restart()

            def sessions_expired() -> bool:
                found = registrations(direct)
                return found is not None and not found.owners and found.controller is None

            # ZooKeeper expires the brokers' sessions on its own clock, a session timeout after
            # it came back: their registrations and /controller go.
            wait_until(sessions_expired, FAILOVER_TIMEOUT_S, 0.2, "the brokers' sessions expired")
            proxy.restore()

            def re_registered() -> Registrations | None:
                found = all_registered(direct)
                if found is None or set(found.owners.values()) & set(before.owners.values()):
                    return None
                return found

            after = wait_until(
                re_registered, FAILOVER_TIMEOUT_S, 0.2, "every broker registered again"
            )
            assert after.controller_epoch > before.controller_epoch
            assert set(after.owners.values()) <= connected_sessions(zookeeper)
            wait_for_progress(ledger.acks, STEP, "progress after the outage")
            assert_cluster_recovered(cluster, topic)
            wait_for_progress(ledger.acks, STEP, "progress after the recovery")
        assert_read_back(ledger, cluster, topic)
        assert all(cluster.is_running(b) for b in cluster.brokers)


def test_create_topics_that_outlasts_the_session_fails_the_topic_not_the_connection(tmp_path):
    """CreateTopics reaching a broker cut off from ZooKeeper waits for ZooKeeper (the broker's
    store calls block until kazoo reconnects); when the session expired meanwhile and the
    ``zookeeper.connection.timeout.ms`` is spent, the topic fails with UNKNOWN_SERVER_ERROR
    (Kafka's answer to a ZooKeeper client timeout) and the connection stays open."""
    settings = {"zookeeper.connection.timeout.ms": "1500"}
    with contextlib.ExitStack() as stack:
        zookeeper, proxy, cluster = proxied_cluster(stack, tmp_path, settings)
        direct = zookeeper.connect_string(cluster.chroot)
        before = all_registered(direct)
        assert before is not None
        connection = stack.enter_context(KafkaConnection(address(cluster, 1)))
        proxy.cut()
        try:
            correlation_id = connection.send(
                CREATE_TOPICS,
                5,
                timeout=15_000,
                topics=[
                    {
                        "name": unique_name("no-zookeeper"),
                        "num_partitions": 1,
                        "replication_factor": 3,
                        "assignments": [],
                        "configs": [],
                    }
                ],
            )

            def sessions_expired() -> bool:
                found = registrations(direct)
                return found is not None and not found.owners

            wait_until(sessions_expired, FAILOVER_TIMEOUT_S, 0.2, "the brokers' sessions expired")
        finally:
            proxy.restore()
        response = connection.receive(CREATE_TOPICS, 5, correlation_id)
        (result,) = response.topics
        assert result.error_code == ErrorCode.unknown_server_error, result
        assert "ZooKeeper" in result.error_message
        answer = connection.request(
            API_VERSIONS, 3, client_software_name="t", client_software_version="1"
        )
        assert answer.error_code == ErrorCode.none
        wait_until(
            lambda: all(advertised_brokers(cluster, b) == {1, 2, 3} for b in cluster.brokers),
            FAILOVER_TIMEOUT_S,
            0.2,
            "every broker sees the three registered again",
        )
        # Right after re-registering, a broker's first writes may still find kazoo settling its
        # new session, within the 1.5 s budget this test sets low for its first half: the
        # broker must take a topic again soon, not necessarily at the first try.
        name = unique_name("zookeeper-back")
        wait_until(
            lambda: (
                create_topic(cluster, name).error_code
                in (ErrorCode.none, ErrorCode.topic_already_exists)
            ),
            FAILOVER_TIMEOUT_S,
            0.5,
            "a topic created after the outage",
        )
        wait_for_leader(cluster, name, 0, isr_size=3)
