"""Broker registration and controller election on a real ZooKeeper."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from odradek.clock import ManualClock
from odradek.cluster.metadata.membership import (
    BrokerMembership,
    BrokerRegistration,
    DuplicateBrokerIdError,
    MembershipChange,
)
from odradek.cluster.metadata.zookeeper import ZooKeeperSession
from odradek.testing import wait_until

SESSION_TIMEOUT_MS = 4000
# Polls for what ZooKeeper or kazoo's threads will make true.
WAIT_S = 20
POLL_S = 0.02


class Cluster:
    """Brokers' memberships in one chroot, each with its own session."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.sessions: list[ZooKeeperSession] = []
        self.members: list[BrokerMembership] = []

    def join(self, broker_id: int, clock: ManualClock | None = None) -> BrokerMembership:
        session = ZooKeeperSession(self.connect, SESSION_TIMEOUT_MS).start()
        self.sessions.append(session)
        member = BrokerMembership(
            session, BrokerRegistration(broker_id, "127.0.0.1", 9090 + broker_id), clock
        )
        member.start()
        self.members.append(member)
        return member

    def close(self) -> None:
        for member in self.members:
            member.close()
        for session in self.sessions:
            session.close()


@pytest.fixture
def cluster(zookeeper_connect: str) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper_connect)
    yield cluster
    cluster.close()


def test_registration_is_kafkas_broker_json(cluster: Cluster) -> None:
    member = cluster.join(3, ManualClock(1_700_000_000_123))
    data, stat = member.zk.get("/brokers/ids/3")
    assert stat.ephemeralOwner == member.session.session_id
    assert json.loads(data) == {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:9093"],
        "jmx_port": -1,
        "host": "127.0.0.1",
        "port": 9093,
        "timestamp": "1700000000123",
        "version": 5,
    }
    assert BrokerRegistration.from_json(3, data) == member.registration


def test_a_rack_is_registered_when_set() -> None:
    registration = BrokerRegistration(2, "h", 9092, rack="eu-1a")
    info = json.loads(registration.to_json(0))
    assert info["rack"] == "eu-1a"
    assert BrokerRegistration.from_json(2, registration.to_json(0)) == registration


def test_a_duplicate_broker_id_is_refused(cluster: Cluster) -> None:
    cluster.join(1)
    with pytest.raises(DuplicateBrokerIdError, match=r"broker.id 1 is already registered"):
        cluster.join(1)


def test_the_first_broker_becomes_controller_with_epoch_1(cluster: Cluster) -> None:
    first = cluster.join(1, ManualClock(1_700_000_000_000))
    second = cluster.join(2)
    assert first.is_controller and first.controller_epoch == 1
    wait_until(lambda: second.controller_id == 1, WAIT_S, POLL_S, "broker 1 controller")
    assert not second.is_controller
    assert json.loads(first.zk.get("/controller")[0]) == {
        "version": 1,
        "brokerid": 1,
        "timestamp": "1700000000000",
    }
    assert first.zk.get("/controller_epoch")[0] == b"1"


def test_control_moves_when_the_controllers_session_closes(cluster: Cluster) -> None:
    first = cluster.join(1)
    second = cluster.join(2)

    assert first.is_controller
    seen: list[tuple[MembershipChange, bool]] = []

    async def watch_the_move() -> None:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        session = ZooKeeperSession(cluster.connect, SESSION_TIMEOUT_MS).start()
        cluster.sessions.append(session)
        third = BrokerMembership(session, BrokerRegistration(3, "127.0.0.1", 9093))
        cluster.members.append(third)
        third.start(loop, lambda c: seen.append((c, threading.get_ident() == loop_thread)))
        first.session.close()  # the controller goes away
        async with asyncio.timeout(20):
            while not any(c.controller_id in (2, 3) and c.brokers == {2, 3} for c, _ in seen):
                await asyncio.sleep(0.01)

    asyncio.run(watch_the_move())
    wait_until(
        lambda: second.controller_id is not None and second.controller_id != 1,
        WAIT_S,
        POLL_S,
        "a new controller",
    )
    winner = second.controller_id
    assert winner in (2, 3)
    assert second.controller_epoch == 2
    assert int(second.zk.get("/controller_epoch")[0]) == 2
    assert any(c.controller_id == 1 and c.controller_epoch == 1 for c, _ in seen)  # before
    assert all(on_loop for _, on_loop in seen)


def test_registration_comes_back_after_session_expiry(cluster: Cluster) -> None:
    member = cluster.join(1)
    old_session = member.session.session_id
    # Closing a second client on the same session expires it for the first (ZooKeeper's way).
    session_id, password = member.session.client.client_id
    twin = KazooClient(hosts=cluster.connect, client_id=(session_id, password))
    twin.start(timeout=10)
    twin.stop()
    twin.close()

    def registered_anew() -> bool:
        try:
            stat = member.zk.exists("/brokers/ids/1")
        except KazooException:  # the old session's end, seen by this call
            return False
        return stat is not None and stat.ephemeralOwner not in (0, old_session)

    wait_until(registered_anew, WAIT_S, POLL_S, "a new registration")
    assert member.session.session_id != old_session
    wait_until(lambda: member.controller_epoch == 2, WAIT_S, POLL_S, "controller epoch 2")
    assert member.is_controller


def test_every_listener_is_registered_inter_broker_first() -> None:
    registration = BrokerRegistration(
        4,
        "10.0.0.4",
        9092,
        listener_name="INTERNAL",
        other_endpoints=(("SSL", "SSL", "kafka-4.example", 9093),),
    )
    info = json.loads(registration.to_json(0))
    assert info["endpoints"] == ["INTERNAL://10.0.0.4:9092", "SSL://kafka-4.example:9093"]
    assert info["listener_security_protocol_map"] == {"INTERNAL": "PLAINTEXT", "SSL": "SSL"}
    assert BrokerRegistration.from_json(4, registration.to_json(0)) == registration
