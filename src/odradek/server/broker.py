"""The broker process: storage, topics, and the listeners that serve Kafka's protocol."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from odradek.clock import Clock, SystemClock
from odradek.cluster.metadata.listener_view import ListenerClusterView
from odradek.cluster.metadata.producer_ids import ProducerIdManager
from odradek.cluster.metadata.store import LocalMetadataStore, MetadataStore
from odradek.cluster.metadata.view import BrokerEndpoint, ClusterView
from odradek.cluster.node import ClusterNode
from odradek.cluster.replication.purgatory import Purgatory
from odradek.cluster.topics import TopicManager
from odradek.config import DYNAMIC_CONNECTION_CONFIGS, BrokerConfig
from odradek.coordinator.group.runtime import GroupCoordinatorRuntime
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.coordinator.transaction.runtime import TransactionCoordinatorRuntime
from odradek.counters import BrokerCounters
from odradek.following import StoreFollower
from odradek.quotas.manager import ClientQuotas
from odradek.registry.ids import KnownSchemaIds
from odradek.security.delegation_tokens import TokenSettings
from odradek.security.listeners import Listener
from odradek.security.scram import CredentialLookup, ScramCredential
from odradek.server.acceptor import Acceptor
from odradek.server.authorizer import Authorizer
from odradek.server.composition import build_services, lone_cluster_view, open_parts
from odradek.server.connection import Connection
from odradek.server.connection_quotas import BrokerLimits, ConnectionQuotas
from odradek.server.console_client import console_client
from odradek.server.credentials import CredentialCache
from odradek.server.delegation_tokens import DelegationTokens
from odradek.server.memory_pool import MemoryPool
from odradek.server.registry import load_handlers
from odradek.server.services import BrokerServices, Session
from odradek.stopping import stop_step
from odradek.storage import LogManager
from odradek.storage.cleaner import CleanerConfig, LogCleaner
from odradek.storage.log_dir_failure import KafkaStorageError
from odradek.storage.segment import LogSegment

if TYPE_CHECKING:
    from odradek.iceberg.translator import TableTranslation
    from odradek.registry.http import RegistryServer
    from odradek.registry.metrics import RegistryMetrics
    from odradek.server.metrics import MetricsServer

log = logging.getLogger("odradek.broker")

_HOUSEKEEPING_INTERVAL_S = 0.5
_FIRST_RETENTION_CHECK_MS = 30_000  # after start, as Kafka's first retention check
# Kafka retries a controlled shutdown controlled.shutdown.max.retries (3) times; about as long.
_CONTROLLED_SHUTDOWN_TIMEOUT_S = 15
_STOP_STEP_TIMEOUT_S = 10
_ACCEPT_ERROR_LOG_INTERVAL_MS = 1000


def halt(reason: str) -> None:
    """End the process at once, as Kafka's ``Exit.halt(1)``: no clean shutdown, which could
    only write to dirs that failed; the next start recovers the logs (and in a cluster the
    controller moves the leaderships once the ZooKeeper session ends)."""
    log.critical("halting broker: %s", reason)
    logging.shutdown()
    sys.stderr.flush()
    os._exit(1)


class Broker:
    """One broker: call :meth:`start`, then :meth:`serve_forever` or :meth:`stop`."""

    def __init__(
        self,
        config: BrokerConfig,
        clock: Clock | None = None,
        *,
        schema_registry_default: tuple[str, int] | None = None,
    ) -> None:
        self.config = config
        # Where the registry listens when schema.registry.listener is not set at all (odradek
        # serve's lone broker); a port in use there is warned about, not fatal.
        self._schema_registry_default = schema_registry_default
        self.clock = clock or SystemClock()
        self.node_id = config.node_id
        self.log_dirs: list[Path] = config.log_dirs
        self.logs = LogManager(self.log_dirs, self.clock)
        # Called when the broker cannot go on with the log dirs it has left (KIP-112): every
        # one offline, or a lone broker's metadata dir.  Tests of a broker in their own process
        # replace it.
        self.halt: Callable[[str], None] = halt
        self._halts_on_dir_failure = False
        self.store: MetadataStore | None = None
        # Users' SCRAM credentials, followed as they change, where the store is ZooKeeper.
        self.credentials = CredentialCache()
        # Delegation tokens (KIP-48), built on the store when the broker starts.
        self.tokens: DelegationTokens | None = None
        self._next_token_check_ms = 0
        # With zookeeper.connect: this broker's part in a cluster; None for a lone broker.
        self.node: ClusterNode | None = None
        self._topics: TopicManager | None = None
        self._producer_ids: ProducerIdManager | None = None
        self._groups: GroupCoordinatorRuntime | None = None
        self._txns: TransactionCoordinatorRuntime | None = None
        self._share_states: ShareCoordinatorRuntime | None = None
        # Counted only while metrics are served (metrics.listener).
        self.counters = BrokerCounters() if config.metrics_listener is not None else None
        self.metrics: MetricsServer | None = None
        self.schema_registry: RegistryServer | None = None
        # The registry's figures on /metrics (with metrics.listener), refusals by schema id
        # validation among them.
        self.registry_metrics: RegistryMetrics | None = None
        # Topics as Iceberg tables (iceberg.mode); set once the broker serves.
        self.tables: TableTranslation | None = None
        self.purgatory = Purgatory(self.counters.requests if self.counters is not None else None)
        self._services: BrokerServices | None = None
        self._server: Acceptor | None = None
        self._servers: list[Acceptor] = []
        self._listener_services: dict[str, BrokerServices] = {}
        self._connections: set[asyncio.Task[None]] = set()
        self._open: set[Connection] = set()
        # queued.max.request.bytes: what all connections together may hold of unhandled requests.
        self.request_memory = MemoryPool(config.get_int("queued.max.request.bytes"))
        self.connection_quotas = ConnectionQuotas.from_config(
            self.clock, config, [spec.name for spec in config.listener_specs()]
        )
        # The broker-wide connection limits follow this broker's dynamic configs.
        self._connection_limits = StoreFollower(
            self._read_connection_limits,
            self.connection_quotas.reconfigure,
            ("broker_configs",),
            "this broker's connection limits",
        )
        self._housekeeping: asyncio.Task[None] | None = None
        self.cleaner: LogCleaner | None = None
        self._next_retention_ms = 0
        self._accept_errors_unlogged = 0
        self._next_accept_error_log_ms = 0
        # The first listener's addresses, and the inter-broker listener's advertised address
        # (what a cluster registers); every listener's, by name, in the dicts.
        self.bound: tuple[str, int] = ("", 0)
        self.advertised: tuple[str, int] = ("", 0)
        self.bound_listeners: dict[str, tuple[str, int]] = {}
        self.advertised_listeners: dict[str, tuple[str, int]] = {}
        load_handlers()

    @property
    def topics(self) -> TopicManager:
        assert self._topics is not None, "broker not started"
        return self._topics

    @property
    def groups(self) -> GroupCoordinatorRuntime:
        """The group coordinator (consumer groups and committed offsets)."""
        assert self._groups is not None, "broker not started"
        return self._groups

    @property
    def producer_ids(self) -> ProducerIdManager:
        assert self._producer_ids is not None, "broker not started"
        return self._producer_ids

    @property
    def cluster_id(self) -> str:
        assert self.store is not None
        return self.store.cluster_id

    @property
    def services(self) -> BrokerServices:
        """What the handlers get (built once, by :meth:`start`)."""
        assert self._services is not None, "broker not started"
        return self._services

    async def start(self) -> tuple[str, int]:
        try:
            return await self._start()
        except BaseException:
            # A broker that failed to start (a duplicate broker.id, ZooKeeper unreachable) must
            # not keep a ZooKeeper session open, nor its port, in a process that goes on.
            if self.node is not None:
                await self.node.stop(_STOP_STEP_TIMEOUT_S)
                self.node = None
            for server in self._servers:
                server.close()
            if self.metrics is not None:
                await self.metrics.stop()
            await self._stop_schema_registry()
            raise

    async def _start(self) -> tuple[str, int]:
        for directory in self.log_dirs:
            # A dir that cannot be made is taken offline by the log manager as it opens.
            with contextlib.suppress(OSError):
                directory.mkdir(parents=True, exist_ok=True)
        cluster_id = self.config.raw("cluster.id")
        if self.config.raw("zookeeper.connect"):
            self.node = ClusterNode(self.config, self.clock, self.purgatory)
            self.store = await self.node.open_store()
        else:
            metadata_dir = self.log_dirs[0]
            try:
                self.store = LocalMetadataStore(metadata_dir, cluster_id, self.node_id)
            except OSError as e:
                raise KafkaStorageError(
                    metadata_dir,
                    f"log dir {metadata_dir} holds this broker's metadata and cannot be used "
                    f"({type(e).__name__}: {e})",
                ) from e
        loop = asyncio.get_running_loop()

        def dir_failed(log_dir: Path, reason: str) -> None:
            # Heard on whichever thread hit the error (the loop's, the flusher's, the
            # cleaner's); a loop already closed has no partitions left to tell.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._log_dir_failed, log_dir)

        self.logs.failures.add_listener(dir_failed)
        parts = open_parts(
            self.config,
            self.clock,
            self.store,
            self.logs,
            self.purgatory,
            live_brokers=self.node.live_brokers if self.node is not None else None,
        )
        self._producer_ids, self._topics, self._groups = (
            parts.producer_ids,
            parts.topics,
            parts.groups,
        )
        self._check_log_dirs()
        self._groups.start()
        self._start_log_maintenance()
        listeners = await self._bind_listeners()
        cluster: ClusterView
        if self.node is not None:
            await self.node.join(
                self._topics,
                self.logs,
                self.advertised,
                self._groups.shard.partition_for,
                self._registered_listeners(listeners),
            )
            # The groups of the offsets partitions led here now, then as leadership moves.
            self._groups.follow(self.node.replicas.leadership_listeners)
            cluster = self.node.view
        else:
            cluster = lone_cluster_view(
                parts, BrokerEndpoint(self.node_id, *self.advertised, listeners=self._endpoints())
            )
        self._services = build_services(
            parts,
            cluster,
            replicas=self.node.replicas if self.node is not None else None,
            controller=self.node.controller if self.node is not None else None,
            counters=self.counters,
            authorizer=self._authorizer(self.store),
            quotas=await self._client_quotas(self.store),
            tokens=self.tokens,
        )
        await self._connection_limits.follow(self.store)
        self._txns = self._services.transactions
        if self._services.telemetry is not None:
            await self._services.telemetry.follow(self.store)
        self._txns.start()
        if self.node is not None:
            self._txns.follow(self.node.replicas.leadership_listeners)
        self._share_states = self._services.share_states
        if self._share_states is not None:
            self._share_states.start()
            if self.node is not None:
                self._share_states.follow(self.node.replicas.leadership_listeners)
        self._start_metrics()
        for listener, server in zip(listeners, self._servers, strict=True):
            services = self._services
            if len(listeners) > 1:
                # Metadata and FindCoordinator answer with the addresses of the listener asked.
                services = dataclasses.replace(
                    services, cluster=ListenerClusterView(cluster, listener.name)
                )
            self._listener_services[listener.name] = services
            server.start_serving()
        self._start_schema_registry()
        self._start_table_translation()
        self._check_log_dirs()
        self._halts_on_dir_failure = True
        self._housekeeping = asyncio.create_task(self._housekeep())
        log.info(
            "odradek broker %d listening on %s, data in %s",
            self.node_id,
            ", ".join(
                f"{host}:{port} ({name}, advertised {a_host}:{a_port})"
                for (name, (host, port)), (a_host, a_port) in zip(
                    self.bound_listeners.items(), self.advertised_listeners.values(), strict=True
                )
            ),
            ", ".join(str(d) for d in self.log_dirs),
        )
        return self.bound

    async def _bind_listeners(self) -> list[Listener]:
        """Bind every listener's socket (not serving yet: the cluster view advertises the ports
        the OS picked, and connections need the services built after it)."""
        assert self.store is not None
        store = self.store

        scram_lookup: CredentialLookup
        if isinstance(store, LocalMetadataStore):

            def scram_lookup(user: str, mechanism: str) -> ScramCredential | None:
                text = store.user_configs_now(user).get(mechanism)
                return None if text is None else ScramCredential.from_kafka(text)

        else:
            await self.credentials.follow(store)
            scram_lookup = self.credentials.lookup
        self.tokens = DelegationTokens(TokenSettings.from_config(self.config), self.clock, store)
        await self.tokens.follow()

        listeners = [
            Listener.from_config(
                self.config, spec, scram_lookup, self.clock, token_lookup=self.tokens.login
            )
            for spec in self.config.listener_specs()
        ]
        advertised = self.config.advertised_specs()
        for listener in listeners:
            server = Acceptor.bind(
                listener.spec.host,
                listener.spec.port,
                self._connection_factory(listener),
                self._accept_failed,
                self.connection_quotas,
                listener.name,
            )
            self._servers.append(server)
            sockname = server.sockets[0].getsockname()
            bound = (sockname[0], sockname[1])
            self.bound_listeners[listener.name] = bound
            host, port = bound
            self.advertised_listeners[listener.name] = advertised.get(listener.name) or (
                ("127.0.0.1" if host in ("0.0.0.0", "", "::") else host),
                port,
            )
        self._server = self._servers[0]
        self.bound = self.bound_listeners[listeners[0].name]
        self.advertised = self.advertised_listeners[self.config.inter_broker_listener()]
        return listeners

    def _registered_listeners(
        self, listeners: list[Listener]
    ) -> tuple[tuple[str, str, str, int], ...]:
        """What a cluster's registration lists: every listener, the inter-broker one first."""
        inter_broker = self.config.inter_broker_listener()
        ordered = sorted(listeners, key=lambda lst: lst.name != inter_broker)
        return tuple(
            (lst.name, lst.spec.protocol, *self.advertised_listeners[lst.name]) for lst in ordered
        )

    def _accept_failed(self, error: OSError) -> None:
        """A listener cannot accept (EMFILE, ENFILE, ENOBUFS, ENOMEM) and waits a second: one
        log line a second at most, with the count of the others, and descriptors given back
        from the cache of open segment files so that the retry can succeed."""
        self._accept_errors_unlogged += 1
        if error.errno in (errno.EMFILE, errno.ENFILE):
            self.logs.open_files.give_back_half()
        now = self.clock.monotonic_ms()
        if now < self._next_accept_error_log_ms:
            return
        self._next_accept_error_log_ms = now + _ACCEPT_ERROR_LOG_INTERVAL_MS
        log.error(
            "cannot accept connections: %s (%d times since the last report; open segment files "
            "now at most %d)",
            error,
            self._accept_errors_unlogged,
            self.logs.open_files.capacity,
        )
        self._accept_errors_unlogged = 0

    def _connection_factory(self, listener: Listener) -> Callable[[], Connection]:
        def make() -> Connection:
            return Connection(
                self._listener_services[listener.name], self._accept, listener, self.request_memory
            )

        return make

    def _endpoints(self) -> tuple[tuple[str, str, int], ...]:
        if len(self.advertised_listeners) < 2:
            return ()
        return tuple((name, *address) for name, address in self.advertised_listeners.items())

    def _authorizer(self, store: MetadataStore) -> Authorizer | None:
        """Kafka's ACL authorizer when ``authorizer.class.name`` asks for one, following the
        store's ACL changes (those of other brokers too)."""
        authorizer = Authorizer.from_config(self.config, store)
        if authorizer is not None:
            store.add_listener(asyncio.get_running_loop(), authorizer.on_change)
        return authorizer

    async def _read_connection_limits(self) -> BrokerLimits:
        """The connection limits as this broker's dynamic configs set them over its properties
        (the overrides' host names looked up off the loop)."""
        assert self.store is not None
        dynamic = await self.store.broker_configs(self.node_id)
        changed = {k: v for k, v in dynamic.items() if k in DYNAMIC_CONNECTION_CONFIGS}
        config = BrokerConfig({**self.config.props, **changed})
        return await asyncio.to_thread(BrokerLimits.from_config, config)

    async def _client_quotas(self, store: MetadataStore) -> ClientQuotas:
        """The client quotas the store holds, followed as they change (on every broker)."""
        quotas = ClientQuotas(
            self.clock,
            samples=self.config.get_int("quota.window.num"),
            sample_ms=self.config.get_int("quota.window.size.seconds") * 1000,
        )
        quotas.listeners.append(self.connection_quotas.update_ip_quotas)
        await quotas.follow(store)
        return quotas

    def _start_metrics(self) -> None:
        listener = self.config.metrics_listener
        if listener is None or self.counters is None:
            return
        # Here, not at the top: Prometheus's client costs a broker that serves no metrics a
        # part of its start.
        from odradek.registry.metrics import RegistryMetrics
        from odradek.server.metrics import MetricsServer

        self.registry_metrics = RegistryMetrics()
        self.services.replicas.schema_refusal_listeners.append(
            self.registry_metrics.validation_refused
        )
        self.metrics = MetricsServer(
            self, self.counters, lambda: self.schema_registry, [self.registry_metrics]
        )
        bound = self.metrics.start(*listener)
        self.topics.deletion_listeners.append(self.counters.topic_deleted)
        self.topics.deletion_listeners.append(self.registry_metrics.topic_deleted)
        scheme = self.metrics.scheme
        log.info("odradek broker %d metrics on %s://%s:%d/metrics", self.node_id, scheme, *bound)

    def _start_schema_registry(self) -> None:
        """The registry's HTTP API (schema.registry.listener), a client of this cluster."""
        listener = self.config.schema_registry_listener
        optional = "schema.registry.listener" not in self.config.props
        if optional:
            listener = self._schema_registry_default
        if listener is None:
            return
        # Here, not at the top: aiohttp and the schema libraries cost a broker without a
        # registry most of a second of start-up.
        from odradek.registry.http import RegistryServer
        from odradek.registry.store import SchemaStore

        bootstrap, security = console_client(self.config, self.bound)
        store, loop = self.store, asyncio.get_running_loop()
        assert store is not None

        def user_configs(user: str) -> dict[str, str]:  # called on the registry's threads
            return asyncio.run_coroutine_threadsafe(store.user_configs(user), loop).result(10)

        metrics = self.registry_metrics
        self.schema_registry = RegistryServer.from_config(
            self.config,
            SchemaStore(bootstrap, security, clock=self.clock, metrics=metrics),
            user_configs,
            metrics,
        )
        try:
            host, port = self.schema_registry.start(*listener)
        except OSError as e:
            if not optional:
                raise
            self.schema_registry.stop()
            self.schema_registry = None
            log.warning(
                "odradek broker %d serves no schema registry: %s:%d: %s (set "
                "schema.registry.listener to serve it elsewhere, or empty to turn it off)",
                self.node_id,
                *listener,
                e.strerror or e,
            )
            return
        scheme = "https" if self.config.schema_registry_tls else "http"
        log.info(
            "odradek broker %d schema registry on %s://%s:%d/", self.node_id, scheme, host, port
        )
        registry = self.schema_registry
        self.services.replicas.schema_ids = KnownSchemaIds(
            lambda: registry.known_schema_ids, registry.refresh_ids
        )

    def _start_table_translation(self) -> None:
        """Topics with an iceberg.mode written to their Iceberg tables (odradek.iceberg): its
        worker process reads the registry as a client of this cluster, as the console does."""
        from odradek.iceberg.translator import TableTranslation

        bootstrap, security = console_client(self.config, self.bound)
        assert self._topics is not None
        self.tables = TableTranslation(
            self._topics, self.clock, self.config.iceberg_catalog(), bootstrap, security
        )
        self.tables.start()

    async def _stop_schema_registry(self) -> None:
        registry, self.schema_registry = self.schema_registry, None
        services = self._services
        known = None if services is None else services.replicas.schema_ids
        if services is not None:
            services.replicas.schema_ids = None
        if isinstance(known, KnownSchemaIds):
            await known.close()
        if registry is not None:
            # Its store may be waiting on this loop's broker (a write): stop off the loop.
            await stop_step(
                "schema registry", asyncio.to_thread(registry.stop), _STOP_STEP_TIMEOUT_S
            )

    @property
    def connection_count(self) -> int:
        """Client connections open now."""
        return len(self._open)

    def sessions(self) -> list[Session]:
        """The sessions of the client connections open now (who is connected, as whom)."""
        return [connection.session for connection in self._open]

    async def _accept(self, connection: Connection) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._open.add(connection)
        if self.counters is not None:
            self.counters.connection_opened(connection.listener.name)
        try:
            await connection.serve()
        finally:
            self._connections.discard(task)
            self._open.discard(connection)
            self.connection_quotas.closed(connection.listener.name, connection.peer_address)
            if self.counters is not None:
                self.counters.connection_ended(connection.listener.name)

    def _start_log_maintenance(self) -> None:
        """Retention checks (in :meth:`housekeeping_tick`) and the log cleaner."""
        interval = self.config.get_int("log.retention.check.interval.ms")
        self._next_retention_ms = self.clock.monotonic_ms() + min(
            interval, _FIRST_RETENTION_CHECK_MS
        )
        if self.config.get_bool("log.cleaner.enable"):
            io_limit = self.config.get("log.cleaner.io.max.bytes.per.second")
            assert isinstance(io_limit, float)
            cleaner_config = CleanerConfig(
                backoff_ms=self.config.get_int("log.cleaner.backoff.ms"),
                dedupe_buffer_bytes=self.config.get_int("log.cleaner.dedupe.buffer.size"),
                io_max_bytes_per_second=io_limit if io_limit < 1e300 else None,
            )
            self.cleaner = LogCleaner(self.logs, self.clock, cleaner_config)
            self.cleaner.start()

    async def _housekeep(self) -> None:
        checkpoint_every = self.config.get_int("log.flush.offset.checkpoint.interval.ms")
        last_checkpoint = self.clock.monotonic_ms()
        while True:
            await asyncio.sleep(_HOUSEKEEPING_INTERVAL_S)
            try:
                self.housekeeping_tick()
                retired = self.logs.take_retired()
                if retired:  # closing a deleted file's last fd frees its blocks: off the loop
                    await asyncio.to_thread(_close_segments, retired)
                now = self.clock.monotonic_ms()
                if self.tokens is not None and now >= self._next_token_check_ms:
                    self._next_token_check_ms = now + self.tokens.settings.expiry_check_interval_ms
                    await self.tokens.remove_expired()
                if now - last_checkpoint >= checkpoint_every:
                    # Written (fsync, rename, fsync of the directory) by the log flusher's
                    # thread, after the flushes before it, so that the loop does not wait on
                    # the disk; the recovery points in it are those already fsynced.
                    self.logs.checkpoint_in_background()
                    last_checkpoint = now
            except Exception:
                log.exception("housekeeping failed")

    def housekeeping_tick(self) -> None:
        """Periodic work that time drives: flushes due by ``flush.ms`` (handed to the log
        flusher's thread), idle connections, retention every
        ``log.retention.check.interval.ms``."""
        self.logs.flush_due()
        # The coordinators' timers have their own tasks; ticking here too lets a ManualClock
        # drive them.
        if self._groups is not None:
            self._groups.tick()
        if self._txns is not None:
            self._txns.tick()
        if self._share_states is not None:
            self._share_states.tick()
        if self.clock.monotonic_ms() >= self._next_retention_ms:
            self._next_retention_ms = self.clock.monotonic_ms() + self.config.get_int(
                "log.retention.check.interval.ms"
            )
            self.logs.apply_retention()
        idle_ms = self.config.get_int("connections.max.idle.ms")
        now = self.clock.monotonic_ms()
        for connection in list(self._open):
            connection.close_if_idle(now, idle_ms)

    def _fatal_dir_failure(self) -> str | None:
        """Why the broker cannot go on with its log dirs, None if it can.  As Kafka: with
        every dir offline it would serve nothing; and a lone broker's metadata (the local
        store, in the first log dir) is what KRaft keeps in its metadata log dir, whose failure
        stops a Kafka broker (in a cluster the metadata is in ZooKeeper, and the first dir is
        like the others)."""
        failures = self.logs.failures.offline_dirs()
        if not self.logs.online_dirs():
            return (
                "every log dir is offline ("
                + "; ".join(f"{d}: {reason}" for d, reason in failures.items())
                + ")"
            )
        metadata_dir = self.log_dirs[0]
        if self.node is None and metadata_dir in failures:
            return (
                f"log dir {metadata_dir} holds this broker's metadata and is offline "
                f"({failures[metadata_dir]})"
            )
        return None

    def _check_log_dirs(self) -> None:
        fatal = self._fatal_dir_failure()
        if fatal is not None:
            raise KafkaStorageError(self.log_dirs[0], fatal)

    def _log_dir_failed(self, log_dir: Path) -> None:
        """A log dir went offline (KIP-112): requests parked on its partitions are answered now
        (KAFKA_STORAGE_ERROR), and in a cluster the controller hears of it, to move their
        leaderships to replicas in healthy dirs.  A failure the broker cannot go on with
        (:meth:`_fatal_dir_failure`) halts it once it serves; before, :meth:`start` fails."""
        if self._halts_on_dir_failure:
            fatal = self._fatal_dir_failure()
            if fatal is not None:
                self.halt(fatal)
                return
        topics = self._topics
        if topics is None:
            return
        hosted = [p for p in topics.partitions.values() if p.log.log_dir == log_dir]
        log.error(
            "log dir %s failed: %d partitions hosted there are offline (%s)",
            log_dir,
            len(hosted),
            ", ".join(p.name for p in hosted[:20]) + (", ..." if len(hosted) > 20 else ""),
        )
        for partition in hosted:
            partition.wake_all()
        if self.node is not None:
            self.node.log_dir_failed(hosted)

    async def serve_forever(self) -> None:
        assert self._server is not None
        with contextlib.suppress(asyncio.CancelledError):
            await self._server.serve_forever()

    async def _stop_shares(self, services: BrokerServices) -> None:
        """The share-partitions' background writes, then the persister's connections."""
        if services.share_partitions is not None:
            await stop_step(
                "share-partitions", services.share_partitions.close(), _STOP_STEP_TIMEOUT_S
            )
        if services.share_persister is not None:
            await stop_step(
                "share state persister", services.share_persister.close(), _STOP_STEP_TIMEOUT_S
            )

    async def stop(self) -> None:
        """Stop listening, end connections, flush and checkpoint: a clean shutdown. In a
        cluster, first the controlled shutdown: the controller moves this broker's leaderships
        away while it still serves (clients are told NOT_LEADER_OR_FOLLOWER and move)."""
        if self.node is not None and self.config.get_bool("controlled.shutdown.enable"):
            await self.node.controlled_shutdown(_CONTROLLED_SHUTDOWN_TIMEOUT_S)
        if self.metrics is not None:
            await stop_step("metrics", self.metrics.stop(), _STOP_STEP_TIMEOUT_S)
            self.metrics = None
        await self._stop_schema_registry()
        if self.tables is not None:
            await stop_step("table translation", self.tables.stop(), _STOP_STEP_TIMEOUT_S)
            self.tables = None
        for server in self._servers:
            server.close()
        self.credentials.stop()
        self._connection_limits.stop()
        if self.tokens is not None:
            self.tokens.stop()
        if self._groups is not None:
            await stop_step("group coordinator", self._groups.stop(), _STOP_STEP_TIMEOUT_S)
            self._groups = None
        if self._txns is not None:
            await stop_step("transaction coordinator", self._txns.stop(), _STOP_STEP_TIMEOUT_S)
            self._txns = None
        if self._services is not None:
            await self._stop_shares(self._services)
        if self._share_states is not None:
            await stop_step("share coordinator", self._share_states.stop(), _STOP_STEP_TIMEOUT_S)
            self._share_states = None
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await stop_step(
                "connections",
                asyncio.gather(*self._connections, return_exceptions=True),
                _STOP_STEP_TIMEOUT_S,
            )
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            await stop_step("housekeeping", self._housekeeping, _STOP_STEP_TIMEOUT_S)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)
        if self.node is not None:
            await self.node.stop(_STOP_STEP_TIMEOUT_S)
        if self.cleaner is not None:
            await stop_step("log cleaner", self.cleaner.stop(), _STOP_STEP_TIMEOUT_S)
            self.cleaner = None
        if self._topics is not None:
            # Flushes of rolled segments and checkpoints still queued end in the flusher's
            # thread; waiting there rather than in close() keeps the loop free meanwhile.
            await asyncio.to_thread(self.logs.wait_for_flushes)
            for partition in self._topics.partitions.values():
                partition.wake_all()
            # Every log's fsyncs, on the manager's threads: the loop does not wait on the disk.
            await asyncio.to_thread(self.logs.close)
            self._topics = None
        log.info("odradek broker %d stopped cleanly", self.node_id)


def _close_segments(segments: list[LogSegment]) -> None:
    for segment in segments:
        segment.close()
