"""A broker's part in a ZooKeeper cluster: its session, registration, view of the cluster, the
roles of its partitions, and the controller it may become.

:class:`ClusterNode` puts together what ``zookeeper.connect`` turns on:
:class:`~odradek.cluster.metadata.zookeeper.store.ZooKeeperMetadataStore` (topics, partition
states), :class:`~odradek.cluster.metadata.zookeeper.membership.BrokerMembership`
(``/brokers/ids/<id>``, controller election),
:class:`~odradek.cluster.metadata.zk_view.ZooKeeperClusterView` (what Metadata answers),
:class:`~odradek.cluster.replication.replica_manager.ReplicaManager` (leader and follower roles,
the fetchers, ISR writes) and :class:`~odradek.cluster.controller.runtime.ControllerRuntime`. It
routes the watches' notifications, which arrive on the broker's event loop, to each of them.

Start-up order matters: the store is opened before the logs (the broker opens the partitions it
is assigned), and the node listens to it from the moment it opens: the first listener starts
the watches, whose first reports (every partition's state) come once, and other parts of the
broker add theirs before the node joins; what is reported before :meth:`ClusterNode.join` is
kept for it. The registration is made only once the listener is bound (it names the advertised
port), and roles are applied before the listener serves. A duplicate ``broker.id`` or an
unreachable ZooKeeper stops the start with the store's error. Stopping: the controlled shutdown
(the controller moves this broker's leaderships away, the broker answers NOT_LEADER_OR_FOLLOWER
meanwhile), then the fetchers stop, then the session closes, which removes the registration.

Crash: nothing here is on disk; a broker killed leaves its ephemeral znodes until ZooKeeper's
session timeout, after which the controller elects new leaders.

Threads: the event loop. Nothing here waits for ZooKeeper on it: the store's calls are
coroutines that run kazoo off the loop (opening the store, too), notifications arrive with what
changed, and the work a change brings (a new broker's registration read, the replication
throttles re-read) runs as tasks, in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from odradek.client.aio import AsyncConnection
from odradek.client.core import ClientError
from odradek.clock import Clock
from odradek.cluster.controller.assignment import BrokerMetadata
from odradek.cluster.controller.runtime import ControllerRuntime
from odradek.cluster.metadata.store import MetadataChange, PartitionState
from odradek.cluster.metadata.zk_view import ZooKeeperClusterView
from odradek.cluster.metadata.zookeeper.membership import (
    BrokerMembership,
    BrokerRegistration,
    MembershipChange,
)
from odradek.cluster.metadata.zookeeper.store import ZooKeeperMetadataStore, ZooKeeperSession
from odradek.cluster.replication.fetcher import FetcherConfig
from odradek.cluster.replication.partition import Partition
from odradek.cluster.replication.purgatory import Purgatory
from odradek.cluster.replication.quota import ReplicationQuotas
from odradek.cluster.replication.replica_manager import ReplicaManager
from odradek.cluster.topics import TopicManager
from odradek.config import DYNAMIC_BROKER_CONFIGS, BrokerConfig
from odradek.protocol import controlled_shutdown as shutdown_protocol
from odradek.security.inter_broker import inter_broker_security
from odradek.stopping import stop_step
from odradek.storage import LogManager
from odradek.topic_partition import TopicPartition

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
_SESSION_CLOSE_TIMEOUT_S = 10


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ClusterNode:
    """This broker in a ZooKeeper cluster (see the module doc)."""

    def __init__(self, config: BrokerConfig, clock: Clock, purgatory: Purgatory) -> None:
        self.config = config
        self.clock = clock
        # The broker's: the replica manager's delayed produces and fetches wait in it.
        self.purgatory = purgatory
        self.node_id = config.node_id
        self.session = ZooKeeperSession.from_config(config)
        self._store: ZooKeeperMetadataStore | None = None
        self._membership: BrokerMembership | None = None
        self._view: ZooKeeperClusterView | None = None
        self._replicas: ReplicaManager | None = None
        self._controller: ControllerRuntime | None = None
        self._topics: TopicManager | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # What the store's watches reported before join (see open_store): each partition's
        # latest state, and whether a topic changed.
        self._early_states: dict[tuple[str, int], PartitionState | None] = {}
        self._early_topics_change = False
        self._membership_turn = asyncio.Lock()
        self._rates_turn = asyncio.Lock()

    @property
    def store(self) -> ZooKeeperMetadataStore:
        assert self._store is not None, "cluster node not opened"
        return self._store

    @property
    def view(self) -> ZooKeeperClusterView:
        assert self._view is not None, "cluster node not joined"
        return self._view

    @property
    def replicas(self) -> ReplicaManager:
        assert self._replicas is not None, "cluster node not joined"
        return self._replicas

    @property
    def controller(self) -> ControllerRuntime:
        assert self._controller is not None, "cluster node not joined"
        return self._controller

    def live_brokers(self) -> list[BrokerMetadata]:
        """The registered brokers, as replica placement sees them (none before :meth:`join`)."""
        if self._view is None:
            return []
        return [BrokerMetadata(b.node_id, b.rack) for b in self._view.live_brokers()]

    async def open_store(self) -> ZooKeeperMetadataStore:
        """Connect to ZooKeeper (retrying up to ``zookeeper.connection.timeout.ms``) and open
        the metadata store in it, off the loop."""

        def open_blocking() -> ZooKeeperMetadataStore:
            self.session.start()
            return ZooKeeperMetadataStore(self.session, self.node_id, self.config.raw("cluster.id"))

        store = await asyncio.to_thread(open_blocking)
        self._store = store
        # This broker's listener before any other (the group coordinator, the credentials and
        # others add theirs before join): the first listener starts the store's watches, and
        # their first reports, every partition's state, come once, to the listeners there are
        # then. Until join they are kept.
        store.add_listener(asyncio.get_running_loop(), self._metadata_changed)
        return store

    async def join(
        self,
        topics: TopicManager,
        logs: LogManager,
        advertised: tuple[str, int],
        group_partition: Callable[[str], int],
        listeners: tuple[tuple[str, str, str, int], ...] = (),
    ) -> None:
        """Register this broker (refused for a duplicate id), start watching, and put every
        hosted partition in the role its state names. On the event loop, before serving.
        ``listeners`` are every listener's (name, security protocol, advertised host, port),
        the inter-broker one (at ``advertised``) first."""
        loop = asyncio.get_running_loop()
        store = self.store
        self._topics = topics
        rack = self.config.raw("broker.rack")
        name, protocol = (listeners[0][0], listeners[0][1]) if listeners else ("PLAINTEXT",) * 2
        registration = BrokerRegistration(
            self.node_id, *advertised, rack, name, protocol, other_endpoints=listeners[1:]
        )
        membership = BrokerMembership(self.session, registration, self.clock)
        self._membership = membership
        view = ZooKeeperClusterView(self.node_id, store, membership, group_partition)
        self._view = view
        config = self.config
        self._replicas = ReplicaManager(
            self.node_id,
            store,
            topics.partition,
            view.partition_state,
            view.state_written,
            view.address_of,
            logs.checkpoint,
            FetcherConfig(
                local_id=self.node_id,
                max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
                min_bytes=config.get_int("replica.fetch.min.bytes"),
                max_bytes=config.get_int("replica.fetch.response.max.bytes"),
                partition_max_bytes=config.get_int("replica.fetch.max.bytes"),
                backoff_ms=config.get_int("replica.fetch.backoff.ms"),
                socket_timeout_ms=config.get_int("replica.socket.timeout.ms"),
                fetchers_per_leader=config.get_int("num.replica.fetchers"),
                security=inter_broker_security(config),
            ),
            self.clock,
            config.get_int("replica.lag.time.max.ms"),
            ReplicationQuotas(
                self.node_id,
                self.clock,
                samples=config.get_int("replication.quota.window.num"),
                sample_ms=config.get_int("replication.quota.window.size.seconds") * 1000,
            ),
            purgatory=self.purgatory,
        )
        self._controller = ControllerRuntime(store, membership, config, self.clock)
        # The states reported before now (this broker's listener has been on the store since
        # open_store), and the topics that changed meanwhile: from here on, changes come in.
        for (topic, index), state in self._early_states.items():
            view.partition_state_changed(topic, index, state)
        self._early_states.clear()
        if self._early_topics_change:
            # The partitions it opens are put in their roles with the others, below.
            self._early_topics_change = False
            topics.sync()
        self._controller.start()
        # Registration and the first election: ZooKeeper calls, off the loop.
        await asyncio.to_thread(membership.start, loop, self._membership_changed)
        await view.membership_changed(membership.brokers)
        self._replicas.start()
        self._notify_offline_at_start(topics, logs)
        await self._read_broker_rates()
        self._quotas_changed(MetadataChange("topics"))
        for topic, index in list(topics.partitions):
            self._replicas.refresh(topic, index)

    def _membership_changed(self, change: MembershipChange) -> None:
        self._spawn(self._apply_membership(change))

    async def _apply_membership(self, change: MembershipChange) -> None:
        # In turn: each change's registrations are read before the next change is applied.
        async with self._membership_turn:
            await self.view.membership_changed(change.brokers)
            self.controller.membership_changed(change)
            await self.replicas.brokers_changed()

    async def _read_broker_rates(self) -> None:
        """The replication throttles follow this broker's dynamic configs."""
        async with self._rates_turn:
            try:
                dynamic = await self.store.broker_configs(self.node_id)
            except Exception as e:
                log.warning("could not read this broker's dynamic configs: %r", e)
                return
            static = {n: v for n in DYNAMIC_BROKER_CONFIGS if (v := self.config.raw(n)) is not None}
            self.replicas.quotas.set_rates({**static, **dynamic})

    def _quotas_changed(self, change: MetadataChange) -> None:
        """The replication throttles follow the broker's dynamic configs and the topics'."""
        quotas = self.replicas.quotas
        if change.kind == "broker_configs":
            self._spawn(self._read_broker_rates())
        elif change.kind == "topics":
            quotas.set_topics({t.name: t.configs for t in self.store.topics.values()})

    def _metadata_changed(self, change: MetadataChange) -> None:
        topics = self._topics
        if topics is None or self._replicas is None:
            # Before join: kept for it (a state's first report is not repeated).
            if change.kind == "partition_state" and change.topic is not None:
                assert change.partition is not None
                self._early_states[(change.topic, change.partition)] = change.state
            elif change.kind == "topics":
                self._early_topics_change = True
            return
        self._quotas_changed(change)
        if change.kind == "topics":
            opened, removed = topics.sync()
            if change.topic is not None:
                self.view.topic_changed(change.topic)
            else:
                for name in {t for t, _ in removed}:
                    self.view.topic_changed(name)
            for topic, index in removed:
                self.replicas.forget(topic, index)
            for partition in opened:
                self.replicas.refresh(partition.topic, partition.index)
            if change.topic is not None:
                fresh = {(p.topic, p.index) for p in opened}
                for name, index in list(topics.partitions):
                    if name == change.topic and (name, index) not in fresh:
                        state = self.view.partition_state(name, index)
                        hosted = topics.partition(name, index)
                        if hosted is not None and state is not None:
                            self.replicas.apply(hosted, state)
        elif change.kind == "partition_state" and change.topic is not None:
            assert change.partition is not None
            state = self.view.partition_state_changed(change.topic, change.partition, change.state)
            hosted = topics.partition(change.topic, change.partition)
            if hosted is not None and state is not None:
                self.replicas.apply(hosted, state)

    def log_dir_failed(self, partitions: list[Partition]) -> None:
        """``partitions`` are in a log dir that went offline: they neither lead nor follow
        from now on (the replica manager leaves offline logs alone), and the controller hears
        of it, to move their leaderships to replicas elsewhere (Kafka's log dir event)."""
        if self._replicas is None or self._store is None:
            return
        for partition in partitions:
            self._replicas.log_dir_failed(partition)
        self._spawn(
            self._notify_log_dir_failure([TopicPartition(p.topic, p.index) for p in partitions])
        )

    def _notify_offline_at_start(self, topics: TopicManager, logs: LogManager) -> None:
        """Log dirs that failed before the broker registered: the controller hears of their
        partitions now, as a Kafka broker's first LeaderAndIsr answer tells it: those whose
        dir failed since they opened, and those assigned here that could not be opened (their
        log may be in a dir that failed as it opened)."""
        if len(logs.online_dirs()) == len(logs.log_dirs):
            return
        offline = {(p.topic, p.index) for p in topics.partitions.values() if p.log.offline}
        offline |= {
            (topic.name, index)
            for topic in topics.topics()
            for index in range(topic.partitions)
            if self.node_id in topic.replicas_of(index)
            and (topic.name, index) not in topics.partitions
        }
        for key in offline:
            partition = topics.partition(*key)
            if partition is not None:
                self.replicas.log_dir_failed(partition)
        self._spawn(self._notify_log_dir_failure([TopicPartition(*k) for k in sorted(offline)]))

    async def _notify_log_dir_failure(self, partitions: list[TopicPartition]) -> None:
        try:
            await self.store.notify_log_dir_failure(self.node_id, partitions)
        except Exception as e:
            log.error(
                "could not tell the controller of the failed log dir (%d partitions): %r",
                len(partitions),
                e,
            )

    def _spawn(self, coroutine: object) -> None:
        task = asyncio.ensure_future(coroutine)  # type: ignore[call-overload]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- stopping ------------------------------------------------------------------------------

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move this broker's leaderships away (ControlledShutdown, as
        Kafka's brokers do), until none is left or ``timeout_s`` passed. Returns whether it
        finished."""
        if self._membership is None:
            return False
        if not self.session.connected:
            # No controller can be told (Kafka gives up after its retries too): the others
            # elect new leaders when this broker's session ends.
            log.warning("controlled shutdown skipped: not connected to ZooKeeper")
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            controller_id = self._membership.controller_id
            address = None if controller_id is None else self.view.address_of(controller_id)
            if address is None:
                await asyncio.sleep(0.2)
                continue
            try:
                remaining = await self._ask_controller(address, deadline - loop.time())
            except (ClientError, OSError, TimeoutError) as e:
                log.info("controlled shutdown: controller %s unreachable: %s", controller_id, e)
                await asyncio.sleep(0.2)
                continue
            if remaining is None:
                await asyncio.sleep(0.2)  # NOT_CONTROLLER or similar: ask again
                continue
            if not remaining:
                log.info("controlled shutdown of broker %d succeeded", self.node_id)
                return True
            log.info("controlled shutdown: %d partitions still led here", len(remaining))
            await asyncio.sleep(0.2)
        log.warning("controlled shutdown of broker %d did not finish in time", self.node_id)
        return False

    async def _ask_controller(
        self, address: str, timeout_s: float
    ) -> list[shutdown_protocol.RemainingPartition] | None:
        assert self._membership is not None
        connection = await AsyncConnection.open(
            address,
            client_id=f"broker-{self.node_id}-shutdown",
            timeout_s=max(timeout_s, 0.1),
            negotiate=False,
            security=inter_broker_security(self.config),
        )
        try:
            frame = shutdown_protocol.encode_request(
                CONTROLLED_SHUTDOWN_VERSION,
                0,
                f"broker-{self.node_id}",
                shutdown_protocol.ControlledShutdownRequest(
                    self.node_id, self._membership.broker_epoch
                ),
            )
            response = await connection.exchange_frame(frame, timeout_s=max(timeout_s, 0.1))
        finally:
            await connection.close()
        _, answer = shutdown_protocol.decode_response(CONTROLLED_SHUTDOWN_VERSION, response)
        if answer.error_code != 0:
            log.info("controlled shutdown answered %s", answer.error_code)
            return None
        return list(answer.remaining_partitions)

    async def stop(self, step_timeout_s: float) -> None:
        """Stop the controller, then the replica fetchers, then leave ZooKeeper; each step
        bounded by ``step_timeout_s``, so that one stuck step does not leave the fetchers
        appending to logs the broker is about to close."""
        if self._controller is not None:
            await stop_step("the controller", self._controller.stop(), step_timeout_s)
        if self._replicas is not None:
            await stop_step("the replica fetchers", self._replicas.stop(), step_timeout_s)
        for task in list(self._tasks):
            task.cancel()
        if self._membership is not None:
            self._membership.close()
        if self._store is not None:
            self._store.close()
        await self._close_session()

    async def _close_session(self) -> None:
        """Close the ZooKeeper session off the event loop, waiting at most
        ``_SESSION_CLOSE_TIMEOUT_S``: kazoo's stop joins its callback threads, and one blocked
        in a callback must not hold the broker's exit (the session then ends by its timeout).
        A daemon thread, so that the interpreter does not wait for it either."""
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()

        def close() -> None:
            try:
                self.session.close()
            except Exception:
                log.exception("closing the ZooKeeper session failed")
            finally:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(_settle, closed)

        threading.Thread(target=close, name="zookeeper-close", daemon=True).start()
        try:
            await asyncio.wait_for(closed, _SESSION_CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning(
                "closing the ZooKeeper session took over %d s; stopping without waiting "
                "(ZooKeeper ends the session at its timeout)",
                _SESSION_CLOSE_TIMEOUT_S,
            )
