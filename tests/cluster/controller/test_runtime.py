"""The controller's shell on a real ZooKeeper: brokers as memberships (each with its own session)
and a ControllerRuntime each, on the test's event loop, no broker processes.

ZooKeeper's watches are real, so the tests poll for their effects with a deadline; the
controller's own timer (the leader rebalance) is driven by a ManualClock, never by sleeping.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.client.data import TopicPartition
from odradek.clock import ManualClock
from odradek.cluster.controller.runtime import ControllerRuntime
from odradek.cluster.controller.state import NO_LEADER, ElectionResult
from odradek.cluster.metadata.membership import BrokerMembership, BrokerRegistration
from odradek.cluster.metadata.store import PartitionState, TopicMetadata
from odradek.cluster.metadata.zookeeper import (
    CONTROLLER_EPOCH_PATH,
    ZooKeeperMetadataStore,
    ZooKeeperSession,
    decode_partition_state,
    partition_state_path,
)
from odradek.config import BrokerConfig
from odradek.protocol.errors import ErrorCode, KafkaError

SESSION_TIMEOUT_MS = 4000
DEADLINE_S = 20


class Broker:
    """What a broker brings to the controller: a session, its store, membership and runtime."""

    def __init__(
        self, connect: str, broker_id: int, clock: ManualClock, config: dict[str, str]
    ) -> None:
        self.broker_id = broker_id
        self.session = ZooKeeperSession(connect, SESSION_TIMEOUT_MS).start()
        self.store = ZooKeeperMetadataStore(self.session, broker_id)
        registration = BrokerRegistration(
            broker_id, "127.0.0.1", 9090 + broker_id, rack=f"rack-{broker_id}"
        )
        self.membership = BrokerMembership(self.session, registration, clock)
        self.runtime = ControllerRuntime(self.store, self.membership, BrokerConfig(config), clock)
        self.up = True

    def start(self) -> None:
        self.runtime.start()
        self.membership.start(asyncio.get_running_loop(), self.runtime.membership_changed)

    async def crash(self) -> None:
        """The broker dies: its session ends, so its registration (and /controller) go at once."""
        if not self.up:
            return
        self.up = False
        self.membership.close()
        await self.runtime.stop()
        self.store.close()
        self.session.close()


class Cluster:
    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.clock = ManualClock()
        self.brokers: dict[int, Broker] = {}
        self.admin = ZooKeeperMetadataStore(
            ZooKeeperSession(connect, SESSION_TIMEOUT_MS).start(), 0, own_session=True
        )

    def start(self, *broker_ids: int, **config: str) -> None:
        for broker_id in broker_ids:
            props = {k.replace("_", "."): v for k, v in config.items()}
            broker = Broker(self.connect, broker_id, self.clock, props)
            self.brokers[broker_id] = broker
            broker.start()

    async def crash(self, broker_id: int) -> None:
        await self.brokers[broker_id].crash()

    async def controller(self) -> Broker:
        """The broker whose runtime is active, once there is exactly one."""
        await until(lambda: len(self.active()) == 1)
        (broker,) = self.active()
        return broker

    def active(self) -> list[Broker]:
        return [b for b in self.brokers.values() if b.up and b.runtime.active]

    def state(self, topic: str, partition: int) -> PartitionState | None:
        """The state znode, read at once (a blocking read: the tests poll it in conditions)."""
        try:
            data, stat = self.admin.zk.get(partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return decode_partition_state(data, stat.version)

    async def create(self, topic: str, *replicas: tuple[int, ...], **configs: str) -> None:
        props = {k.replace("_", "."): v for k, v in configs.items()}
        await self.admin.put(TopicMetadata(topic, uuid.uuid4(), len(replicas), props, replicas))

    async def states(self, topic: str, count: int) -> list[PartitionState]:
        """The topic's partition states, once all exist."""
        await until(lambda: all(self.state(topic, p) is not None for p in range(count)))
        return [s for p in range(count) if (s := self.state(topic, p)) is not None]

    async def leader_writes_isr(self, topic: str, partition: int, isr: tuple[int, ...]) -> None:
        """What a ZooKeeper-era leader does on ISR changes: rewrite the state itself, same epoch."""
        current = self.state(topic, partition)
        assert current is not None
        await self.admin.write_partition_state(
            topic, partition, replace(current, isr=isr), current.version
        )

    async def close(self) -> None:
        for broker in self.brokers.values():
            await broker.crash()
        self.admin.close()


async def until(condition: Callable[[], bool], timeout: float = DEADLINE_S) -> None:
    """Poll for what ZooKeeper's watches will make true."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def run(connect: str, scenario: Callable[[Cluster], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = Cluster(connect)
        try:
            await scenario(cluster)
        finally:
            await cluster.close()

    asyncio.run(main())


def test_a_new_topic_gets_its_first_states(zookeeper_connect: str) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.start(1, 2, 3)
        controller = await cluster.controller()
        assert controller.broker_id == 1 and controller.runtime.controller_epoch == 1
        await until(lambda: set(controller.runtime.live_brokers) == {1, 2, 3})
        assert controller.runtime.live_brokers[2].rack == "rack-2"

        # Broker 4 never registered: the first live replica leads, the live replicas are the ISR.
        await cluster.create("t", (1, 2, 3), (4, 3, 2))
        assert await cluster.states("t", 2) == [
            PartitionState(1, 0, (1, 2, 3), 1, 0),
            PartitionState(3, 0, (3, 2), 1, 0),
        ]
        await cluster.admin.set_partitions("t", 3, [[2, 1]])
        assert (await cluster.states("t", 3))[2] == PartitionState(2, 0, (2, 1), 1, 0)

        # The store deletes the topic's znodes; the controller forgets it, and a new topic of
        # the same name starts afresh.
        state = controller.runtime.controller
        assert state is not None
        await cluster.admin.remove("t")
        await until(lambda: "t" not in state.topics)
        await cluster.create("t", (2, 3))
        assert await cluster.states("t", 1) == [PartitionState(2, 0, (2, 3), 1, 0)]
        await controller.runtime.idle()
        assert cluster.state("t", 1) is None
        assert state.assignment("t") == {0: (2, 3)}

    run(zookeeper_connect, scenario)


def test_a_dead_brokers_leaderships_move_to_isr_members(zookeeper_connect: str) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.start(1, 2, 3)
        await cluster.controller()
        await cluster.create("t", (1, 2, 3), (2, 3, 1))
        await cluster.states("t", 2)

        await cluster.crash(2)
        await until(lambda: cluster.state("t", 1) == PartitionState(3, 1, (3, 1), 1, 1))
        assert cluster.state("t", 0) == PartitionState(1, 1, (1, 3), 1, 1)

    run(zookeeper_connect, scenario)


def test_a_new_controller_repairs_what_changed_meanwhile(zookeeper_connect: str) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.start(1, 2, 3)
        first = await cluster.controller()
        await cluster.create("t", (1, 2), (3, 2))
        await cluster.states("t", 2)

        # The controller stops acting (still registered as controller): what happens next
        # waits for the next one.
        await first.runtime.stop()
        await cluster.crash(3)
        await cluster.create("u", (2, 1))
        await cluster.crash(1)

        second = await cluster.controller()
        assert second.broker_id == 2 and second.runtime.controller_epoch == 2
        await until(lambda: cluster.state("u", 0) is not None)
        await second.runtime.idle()
        assert cluster.state("t", 0) == PartitionState(2, 1, (2,), 2, 1)
        assert cluster.state("t", 1) == PartitionState(2, 1, (2,), 2, 1)
        assert cluster.state("u", 0) == PartitionState(2, 0, (2,), 2, 0)

    run(zookeeper_connect, scenario)


async def preferred_leader_back_in_sync(
    cluster: Cluster, **config: str
) -> tuple[Broker, TopicPartition]:
    """Broker 2, t-0's preferred leader, dies and comes back; the leader takes it back into the
    ISR. Broker 2 still does not lead."""
    cluster.start(1, 2, 3, **config)
    controller = await cluster.controller()
    await cluster.create("t", (2, 1, 3))
    await cluster.states("t", 1)
    await cluster.crash(2)
    await until(lambda: cluster.state("t", 0) == PartitionState(1, 1, (1, 3), 1, 1))

    cluster.start(2)
    await until(lambda: 2 in controller.runtime.live_brokers)
    await controller.runtime.idle()
    assert cluster.state("t", 0) == PartitionState(1, 1, (1, 3), 1, 1)
    tp = TopicPartition("t", 0)
    # Not in the ISR yet: no election.
    results = await controller.runtime.elect_preferred([tp])
    assert results[tp].error == ErrorCode.preferred_leader_not_available

    await cluster.leader_writes_isr("t", 0, (1, 3, 2))
    state = controller.runtime.controller
    assert state is not None
    await until(lambda: state.state(tp) == PartitionState(1, 1, (1, 3, 2), 1, 2))
    return controller, tp


def test_a_returning_broker_leads_again_once_elected(zookeeper_connect: str) -> None:
    async def scenario(cluster: Cluster) -> None:
        controller, tp = await preferred_leader_back_in_sync(cluster)
        results = await controller.runtime.elect_preferred([tp])
        assert results == {tp: ElectionResult(ErrorCode.none, 2)}
        assert cluster.state("t", 0) == PartitionState(2, 2, (1, 3, 2), 1, 3)
        again = await controller.runtime.elect_preferred([tp])
        assert again[tp].error == ErrorCode.election_not_needed

    run(zookeeper_connect, scenario)


def test_the_automatic_rebalance_gives_the_preferred_replica_its_leadership_back(
    zookeeper_connect: str,
) -> None:
    async def scenario(cluster: Cluster) -> None:
        controller, _ = await preferred_leader_back_in_sync(cluster)
        await controller.runtime.check_rebalance()  # not due yet
        assert cluster.state("t", 0) == PartitionState(1, 1, (1, 3, 2), 1, 2)
        cluster.clock.advance(5_000)  # the first check, 5 s after the take-over
        await controller.runtime.check_rebalance()
        assert cluster.state("t", 0) == PartitionState(2, 2, (1, 3, 2), 1, 3)

    run(zookeeper_connect, scenario)


def test_no_automatic_rebalance_when_disabled(zookeeper_connect: str) -> None:
    async def scenario(cluster: Cluster) -> None:
        controller, _ = await preferred_leader_back_in_sync(
            cluster, auto_leader_rebalance_enable="false"
        )
        cluster.clock.advance(600_000)
        await controller.runtime.check_rebalance()
        assert cluster.state("t", 0) == PartitionState(1, 1, (1, 3, 2), 1, 2)

    run(zookeeper_connect, scenario)


def test_controlled_shutdown_leaves_the_broker_leading_nothing_it_can_hand_over(
    zookeeper_connect: str,
) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.start(1, 2, 3)
        controller = await cluster.controller()
        await cluster.create("t", (2, 1, 3), (1, 2, 3), (3, 2, 1))
        await cluster.create("pair", (2, 3))
        await cluster.create("solo", (2,))
        await cluster.states("t", 3)
        await cluster.states("pair", 1)
        await cluster.states("solo", 1)
        await cluster.crash(3)
        await until(lambda: cluster.state("pair", 0) == PartitionState(2, 1, (2,), 1, 1))

        with pytest.raises(KafkaError) as stale:
            await controller.runtime.controlled_shutdown(2, broker_epoch=1)
        assert stale.value.code == ErrorCode.stale_broker_epoch
        with pytest.raises(KafkaError) as not_controller:
            await cluster.brokers[2].runtime.controlled_shutdown(2)
        assert not_controller.value.code == ErrorCode.not_controller

        epoch = cluster.brokers[2].membership.broker_epoch
        assert epoch == controller.runtime.live_brokers[2].epoch > 1
        remaining = await controller.runtime.controlled_shutdown(2, broker_epoch=epoch)
        # pair-0 has nobody else in sync, solo-0 no other replica: neither can move, and the
        # answer names neither (the broker would retry in vain).
        assert remaining == frozenset()
        for p in range(3):
            state = cluster.state("t", p)
            assert state is not None and state.leader == 1 and state.isr == (1,)
        assert cluster.state("pair", 0) == PartitionState(2, 1, (2,), 1, 1)
        assert cluster.state("solo", 0) == PartitionState(2, 0, (2,), 1, 0)

    run(zookeeper_connect, scenario)


def test_a_stale_controllers_write_is_refused(
    zookeeper_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.start(1, 2)
        controller = await cluster.controller()
        await cluster.create("t", (1, 2))
        await cluster.states("t", 1)

        # Another controller's election bumps /controller_epoch (broker 1 has not noticed yet).
        raw = KazooClient(hosts=cluster.connect)
        raw.start(timeout=10)
        try:
            data, stat = raw.get(CONTROLLER_EPOCH_PATH)
            raw.set(CONTROLLER_EPOCH_PATH, str(int(data) + 1).encode(), version=stat.version)
        finally:
            raw.stop()
            raw.close()

        with caplog.at_level(logging.WARNING, logger="odradek.cluster.controller.runtime"):
            await cluster.crash(2)  # broker 1 would take broker 2 out of t-0's ISR
            await until(lambda: not controller.runtime.active)
        assert cluster.state("t", 0) == PartitionState(1, 0, (1, 2), 1, 0)
        assert "stops as controller (epoch 1)" in caplog.text
        assert "another controller was elected" in caplog.text
        with pytest.raises(KafkaError) as e:
            await controller.runtime.elect_preferred()
        assert e.value.code == ErrorCode.not_controller

    run(zookeeper_connect, scenario)


def test_unclean_election_only_when_the_topic_enables_it(zookeeper_connect: str) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.start(1, 2, 3)
        controller = await cluster.controller()
        await cluster.create("u", (2, 3))
        await cluster.states("u", 1)
        await cluster.leader_writes_isr("u", 0, (2,))  # broker 3 fell behind
        tp = TopicPartition("u", 0)
        state = controller.runtime.controller
        assert state is not None
        await until(lambda: state.state(tp) == PartitionState(2, 0, (2,), 1, 1))

        await cluster.crash(2)
        await until(lambda: cluster.state("u", 0) == PartitionState(NO_LEADER, 1, (2,), 1, 2))
        await controller.runtime.idle()
        assert cluster.state("u", 0) == PartitionState(NO_LEADER, 1, (2,), 1, 2)

        await cluster.admin.set_configs("u", {"unclean.leader.election.enable": "true"})
        await until(lambda: cluster.state("u", 0) == PartitionState(3, 2, (3,), 1, 3))

    run(zookeeper_connect, scenario)


def test_a_lost_session_ends_the_controllers_term(
    zookeeper_connect: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(cluster: Cluster) -> None:
        cluster.start(1, 2)
        first = await cluster.controller()
        assert first.broker_id == 1
        # Closing a second client on the same session expires it for the first (ZooKeeper's way).
        session_id, password = first.session.client.client_id
        twin = KazooClient(hosts=cluster.connect, client_id=(session_id, password))
        twin.start(timeout=10)
        twin.stop()
        twin.close()
        with caplog.at_level(logging.WARNING, logger="odradek.cluster.controller.runtime"):
            await until(lambda: "the ZooKeeper session was lost" in caplog.text)
        # Whoever wins next, it is a new term.
        await until(lambda: any(b.runtime.controller_epoch == 2 for b in cluster.active()))

    run(zookeeper_connect, scenario)
