"""Cluster metadata in ZooKeeper, in Kafka's own ZooKeeper layout.

Znodes (JSON as Kafka writes it, so ZooKeeper's ``zkCli.sh`` and Kafka's tools read them)::

    /cluster/id                                   {"version":"1","id":"<22-char cluster id>"}
    /brokers/topics/<topic>                       {"version":3,"partitions":{"0":[1,2,3]},
                                                   "adding_replicas":{},"removing_replicas":{},
                                                   "topic_id":"<22-char base64 topic id>"}
    /brokers/topics/<topic>/partitions/<p>/state  {"controller_epoch":1,"leader":1,"version":1,
                                                   "leader_epoch":0,"isr":[1,2,3]} (and
                                                   "eligible_leader_replicas":[...] when any)
    /config/topics/<topic>                        {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id>                          {"version":1,"config":{
                                                   "leader.replication.throttled.rate":"1000"}}
    /config/users/<user>                          {"version":1,"config":{"SCRAM-SHA-512":
                                                   "salt=…,stored_key=…,server_key=…,
                                                   iterations=4096"}}
    /config/groups/<group>                        {"version":1,"config":{
                                                   "share.auto.offset.reset":"earliest"}}
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/<topic>"}
    /config/clients/<client-id>                   {"version":1,"config":{"producer_byte_rate":...}}
    /config/users/<user>/clients/<client-id>      (quotas; <default> for a default, as Kafka)
                                                  (or "users/<user>", "brokers/<id>")
    /config/client-metrics/<subscription>         {"version":1,"config":{"metrics":...}} (KIP-714)
    /admin/delete_topics/<topic>                  (empty: the topic is being deleted)
    /latest_producer_id_block                     {"version":1,"broker":1,"block_start":"0",
                                                   "block_end":"999"}  (both ends inclusive)
    /kafka-acl/<ResourceType>/<name>              {"version":1,"acls":[{"principal":"User:alice",
                                                   "permissionType":"Allow","operation":"Read",
                                                   "host":"*"}]}  (LITERAL patterns)
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   (PREFIXED patterns, the same JSON)
    /kafka-acl-changes/acl_changes_<seq>          "TOPIC:<name>" (a literal resource changed)
    /kafka-acl-extended-changes/acl_changes_<seq> {"version":1,"resourceType":"TOPIC","name":…,
                                                   "patternType":"PREFIXED"}
    /feature                                      {"version":2,"status":1,"features":{
                                                   "transaction.version":{
                                                   "max_version_level":2}}}  (finalized features;
                                                   epoch: the znode version + 1)
    /log_dir_event_notification/log_dir_event_<seq>  {"version":1,"broker":1,"event":1,
                                                   "partitions":[{"topic":"t","partition":0}]}
    /delegation_token/tokens/<tokenId>            {"version":3,"owner":"User%3Aalice",
                                                   "tokenRequester":"User%3Aalice","renewers":[],
                                                   "issueTimestamp":…,"maxTimestamp":…,
                                                   "expiryTimestamp":…,"tokenId":"<tokenId>"}
    /delegation_token/token_changes/token_change_<seq>  <tokenId> (a token made, changed or
                                                   removed: every broker reads the tokens again)

Change notifications (``config_change_``, ``acl_changes_``, ``token_change_``) older than 15
minutes are deleted by whichever broker lists them next, as Kafka's notification listeners purge
them (by the znode's creation time): a broker that starts reads the whole state, not the changes.

A log dir event (KIP-112, event 1: a log dir failed) is what a Kafka broker writes for its
controller, plus ``partitions``, the partitions the failed dir held: Kafka's controller learns
them from the brokers' LeaderAndIsr answers, which odradek has not.  The controller deletes each
event once it has acted on it.

``<ResourceType>`` is Kafka's name (``Topic``, ``Group``, ``Cluster``, ``TransactionalId``). A
resource's ACL znode is written by compare-and-set on its version and deleted when its last entry
goes, then a sequential change znode is made: every broker watches the two change paths and
re-reads the ACLs (Kafka's ZooKeeper-mode AclAuthorizer does the same; like Kafka's tools, the
layout lets ``kafka-acls.sh --authorizer-properties zookeeper.connect=…`` read them).

The topic znode is at version 3, as Kafka 3.x writes it with a topic id (2.8 wrote version 2
with the same fields; both are read). All paths are under the chroot of ``zookeeper.connect``
(``host:port/chroot``), created if absent.

Crashes: a topic is created by one multi-op (its config and its assignment together); a topic's
deletion first marks it under ``/admin/delete_topics``, and opening a store finishes deletions a
crash interrupted (the store deletes a topic's znodes itself; the controller only forgets the
topic). Partition states and producer-id blocks are written by compare-and-set on the znode
version, so two writers never both succeed; the controller's partition-state writes also check
the version of ``/controller_epoch`` in the same multi-op, so a controller whose term ended
writes nothing (Kafka's fencing).

Threads: nothing here blocks the broker's event loop. :class:`ZooKeeperMetadataStore`'s calls
are coroutines whose kazoo calls (with their retries) run on the store's thread pool, so a slow or
absent ZooKeeper delays only the coroutines that wait for it (their callers bound that wait).
kazoo runs watches on its own threads: they re-read what changed on the store's watch thread and
hand the result to the loop with ``call_soon_threadsafe``; the caches are read and written on
the loop alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry, RetryFailedError

from odradek.cluster.features import FinalizedFeatures
from odradek.cluster.metadata.store import (
    ChangeListener,
    ChangeListeners,
    MetadataChange,
    MetadataStoreError,
    PartitionState,
    StaleVersionError,
    TopicExistsError,
    TopicMetadata,
    kafka_uuid,
    new_cluster_id,
)
from odradek.config import BrokerConfig
from odradek.quotas.entities import (
    QUOTA_KEYS,
    InvalidQuota,
    QuotaEntity,
    entity_from_path,
    entity_path,
)
from odradek.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_entries,
    encode_entries,
    zk_name,
)
from odradek.security.delegation_tokens import TokenInformation
from odradek.topic_partition import TopicPartition

log = logging.getLogger(__name__)

T = TypeVar("T")

CLUSTER_ID_PATH = "/cluster/id"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIGS_PATH = "/config/topics"
USER_CONFIGS_PATH = "/config/users"
BROKER_CONFIGS_PATH = "/config/brokers"
CLIENT_METRICS_PATH = "/config/client-metrics"
GROUP_CONFIGS_PATH = "/config/groups"
CONFIG_CHANGES_PATH = "/config/changes"
DELETE_TOPICS_PATH = "/admin/delete_topics"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
# Where Kafka's ZooKeeper-era tools (2.x kafka-reassign-partitions --zookeeper) ask for moves:
# {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}.
ADMIN_REASSIGN_PATH = "/admin/reassign_partitions"
LOG_DIR_EVENT_PATH = "/log_dir_event_notification"
DELEGATION_TOKENS_PATH = "/delegation_token/tokens"
TOKEN_CHANGES_PATH = "/delegation_token/token_changes"
# Finalized features, as ZooKeeper-mode Kafka kept them (KIP-584's FeatureZNode, version 2).
FEATURE_PATH = "/feature"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
# The store's calls in flight at once (each a thread waiting for its answers).
ZOOKEEPER_THREADS = 16
# How long a change notification is kept (Kafka's ZkNodeChangeNotificationListener's default).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ACL_PATHS = {
    PatternType.LITERAL: "/kafka-acl",
    PatternType.PREFIXED: "/kafka-acl-extended/prefixed",
}
ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
_ACL_RESOURCE_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)


class ZooKeeperUnreachableError(MetadataStoreError):
    """No ZooKeeper server answered within ``zookeeper.connection.timeout.ms``."""


class ControllerMovedError(MetadataStoreError):
    """A controller's write was refused: ``/controller_epoch`` is no longer at the version the
    controller's election left it at, so another controller was elected since (Kafka's
    ControllerMovedException)."""


# -- Kafka's znode formats -----------------------------------------------------------------------


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def acl_path(pattern: ResourcePattern) -> str:
    return f"{ACL_PATHS[pattern.pattern_type]}/{zk_name(pattern.resource_type)}/{pattern.name}"


def encode_acl_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """The change path and the notification Kafka writes there for a change of ``pattern``."""
    if pattern.pattern_type is PatternType.LITERAL:
        return ACL_CHANGES_PATH, f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return EXTENDED_ACL_CHANGES_PATH, _json(event)


def encode_log_dir_failure(broker: int, partitions: Iterable[TopicPartition]) -> bytes:
    return _json(
        {
            "version": 1,
            "broker": broker,
            "event": LOG_DIR_FAILURE_EVENT,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
        }
    )


def decode_log_dir_failure(data: bytes) -> tuple[int, list[TopicPartition]] | None:
    """``(broker, partitions)`` of a log dir failure event; None for anything else."""
    try:
        event = json.loads(data)
        if event.get("event") != LOG_DIR_FAILURE_EVENT:
            return None
        partitions = [
            TopicPartition(str(p["topic"]), int(p["partition"]))
            for p in event.get("partitions", [])
        ]
        return int(event["broker"]), partitions
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def encode_topic(topic: TopicMetadata) -> bytes:
    return _json(
        {
            "version": 3,
            "partitions": {str(p): list(r) for p, r in enumerate(topic.replicas)},
            "adding_replicas": {str(p): list(r) for p, r in sorted(topic.adding.items()) if r},
            "removing_replicas": {str(p): list(r) for p, r in sorted(topic.removing.items()) if r},
            "topic_id": kafka_uuid(topic.topic_id),
        }
    )


def decode_topic(name: str, data: bytes, configs: dict[str, str]) -> TopicMetadata:
    """A topic znode; one written without a topic id (Kafka before 2.8) gets a fresh one."""
    state = json.loads(data)
    partitions = {int(p): tuple(r) for p, r in state.get("partitions", {}).items()}
    replicas = tuple(partitions[p] for p in sorted(partitions))
    topic_id = state.get("topic_id")
    return TopicMetadata(
        name,
        parse_kafka_uuid(topic_id) if topic_id else uuid.uuid4(),
        len(replicas),
        configs,
        replicas,
        {int(p): tuple(r) for p, r in (state.get("adding_replicas") or {}).items() if r},
        {int(p): tuple(r) for p, r in (state.get("removing_replicas") or {}).items() if r},
    )


def encode_partition_state(state: PartitionState) -> bytes:
    return _json(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            # KIP-966, which ZooKeeper-era Kafka never wrote: present only when not empty.
            **({"eligible_leader_replicas": list(state.elr)} if state.elr else {}),
        }
    )


def decode_partition_state(data: bytes, version: int, written_zxid: int = -1) -> PartitionState:
    state = json.loads(data)
    return PartitionState(
        state["leader"],
        state["leader_epoch"],
        tuple(state["isr"]),
        state["controller_epoch"],
        version,
        written_zxid,
        tuple(state.get("eligible_leader_replicas", ())),
    )


def encode_features(levels: Mapping[str, int]) -> bytes:
    return _json(
        {
            "version": 2,
            "status": 1,
            "features": {
                name: {"max_version_level": level}
                for name, level in sorted(levels.items())
                if level > 0
            },
        }
    )


def decode_features(data: bytes, znode_version: int) -> FinalizedFeatures:
    """A ``/feature`` znode; its epoch is the znode version + 1 (0 is the defaults')."""
    features = json.loads(data).get("features") or {}
    levels = {name: int(f["max_version_level"]) for name, f in features.items()}
    return FinalizedFeatures({n: v for n, v in levels.items() if v > 0}, znode_version + 1)


def encode_topic_configs(configs: Mapping[str, str]) -> bytes:
    return _json({"version": 1, "config": dict(configs)})


def decode_topic_configs(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {k: str(v) for k, v in json.loads(data).get("config", {}).items()}


# -- the session ---------------------------------------------------------------------------------


class ZooKeeperSession:
    """One broker's ZooKeeper session (a kazoo client), under the chroot of ``zookeeper.connect``.

    :meth:`start` waits up to the connection timeout for a server, then fails with
    :class:`ZooKeeperUnreachableError`. When the session expires (kazoo's LOST state: its
    ephemeral znodes are gone), kazoo opens a new one; the hooks given to :meth:`on_new_session`
    then run on a thread of kazoo's, to register again what the lost session held. :meth:`start`
    and :meth:`close` block (connecting, and joining kazoo's threads): the broker calls them off
    its loop. :meth:`call` blocks for up to the connection timeout and is safe from any thread
    but the loop's: the store runs it on its pool.
    """

    def __init__(
        self,
        connect: str,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
    ) -> None:
        self.connect = connect
        hosts, slash, chroot = connect.partition("/")
        self.hosts = hosts
        self.chroot = (slash + chroot).rstrip("/")
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.client = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            # Kafka's client reconnects for as long as the broker runs, quickly: kazoo's default
            # backoff grows to an hour between attempts.
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
        )
        self._hooks: list[Callable[[], None]] = []
        self._lost_hooks: list[Callable[[], None]] = []
        self._lost = threading.Event()
        self._closing = threading.Event()
        self.client.add_listener(self._state_changed)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ZooKeeperSession:
        connect = config.raw("zookeeper.connect")
        if not connect:
            raise MetadataStoreError("zookeeper.connect is not set")
        return cls(
            connect,
            config.get_int("zookeeper.session.timeout.ms"),
            config.zookeeper_connection_timeout_ms,
        )

    def start(self) -> ZooKeeperSession:
        timeout_s = self.connection_timeout_ms / 1000
        if self.chroot:
            # Kafka creates a missing chroot; a client inside it cannot, so one outside does.
            outside = KazooClient(hosts=self.hosts, timeout=self.session_timeout_ms / 1000)
            self._start_client(outside, timeout_s)
            try:
                outside.ensure_path(self.chroot)
            finally:
                outside.stop()
                outside.close()
        self._start_client(self.client, timeout_s)
        return self

    def _start_client(self, client: KazooClient, timeout_s: float) -> None:
        try:
            client.start(timeout=timeout_s)  # kazoo retries the servers until then
        except KazooTimeoutError:
            client.stop()
            client.close()
            raise ZooKeeperUnreachableError(
                f"could not connect to ZooKeeper at {self.hosts} within "
                f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)"
            ) from None

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, retried while the connection is down (a ZooKeeper restart, a
        network blip), for up to the connection timeout; then :class:`ZooKeeperUnreachableError`.
        A retried write may have landed before the connection broke: callers of writes check.

        A request made while kazoo has no connection would wait, unbounded, for one: such an
        attempt is not made but counted as a lost connection, so that the deadline holds (the
        caller is often the broker's event loop, which must not wait for ZooKeeper forever)."""
        retry = KazooRetry(
            max_tries=-1, delay=0.05, max_delay=1.0, deadline=self.connection_timeout_ms / 1000
        )

        def attempt() -> T:
            if self._closing.is_set():
                raise ZooKeeperUnreachableError("the ZooKeeper session is closed")
            if not self.client.connected:
                raise ConnectionLoss("not connected to ZooKeeper")
            return fn(*args, **kwargs)

        try:
            result: T = retry(attempt)
        except RetryFailedError as e:
            raise ZooKeeperUnreachableError(
                f"ZooKeeper at {self.hosts} did not answer within "
                f"{self.connection_timeout_ms} ms (zookeeper.connection.timeout.ms)"
            ) from e
        return result

    @property
    def session_id(self) -> int:
        session_id: int = self.client.client_id[0]
        return session_id

    def on_new_session(self, hook: Callable[[], None]) -> None:
        self._hooks.append(hook)

    def on_session_lost(self, hook: Callable[[], None]) -> None:
        """``hook`` runs on kazoo's connection thread when the session expires (its ephemeral
        znodes are gone): it must not block, only hand the news on."""
        self._lost_hooks.append(hook)

    def _state_changed(self, state: str) -> None:
        # kazoo's connection thread: nothing here may block.
        if state == KazooState.LOST:
            if not self._closing.is_set():
                log.warning(
                    "ZooKeeper session expired: its ephemeral znodes are gone; "
                    "waiting for a new session to register again"
                )
                self._lost.set()
                for hook in self._lost_hooks:
                    hook()
        elif state == KazooState.CONNECTED and self._lost.is_set():
            self._lost.clear()
            for hook in self._hooks:
                self.client.handler.spawn(hook)

    def close(self) -> None:
        """End the session: its ephemeral znodes (registration, controller) go at once."""
        self._closing.set()
        self.client.stop()
        self.client.close()


# -- the store -----------------------------------------------------------------------------------


class ZooKeeperMetadataStore:
    """The cluster's metadata in ZooKeeper (layout and rules in the module doc).

    ``topics`` and ``acls`` are caches, filled at open, updated by this store's writes and, once
    a listener is added, by watches. Every call that talks to ZooKeeper is a coroutine: its
    kazoo calls (and their retries, up to ``zookeeper.connection.timeout.ms``) run on the
    store's thread pool, so that several calls of the loop are in flight at once (the
    controller's writes of one event, an ISR change, an admin request) and none holds the loop.

    Threads: the coroutines and the caches belong to the broker's event loop. The pool's
    threads make kazoo calls only and touch no cache: results come back to the loop through the
    awaited future. Watches fire on kazoo's threads; one watch thread re-reads what changed, in
    the order the watches fired, and hands the result to the loop, which updates the caches and
    tells the listeners. The constructor blocks (it reads the whole tree): call it off the loop
    (:meth:`open_async`).
    """

    def __init__(
        self,
        session: ZooKeeperSession,
        node_id: int,
        cluster_id: str | None = None,
        *,
        own_session: bool = False,
        wall_clock_ms: Callable[[], float] = lambda: time.time() * 1000,
    ) -> None:
        self.session = session
        # ZooKeeper stamps a znode's creation with its server's wall clock: so is its age read.
        self._wall_clock_ms = wall_clock_ms
        self.zk = session.client
        self._call = session.call
        self.node_id = node_id
        self._own_session = own_session
        self._topics: dict[str, TopicMetadata] = {}
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._features: FinalizedFeatures | None = None
        self._listeners = ChangeListeners()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Calls of the loop in flight at once; kazoo pipelines them on its one connection.
        self._pool = ThreadPoolExecutor(max_workers=ZOOKEEPER_THREADS, thread_name_prefix="zk")
        # Watch events re-read one at a time, in order, so that an older read never lands last.
        self._watch_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zk-watch")
        # A topic's watches stop when its token is replaced (deleted, grown, or made again).
        # These three belong to the watch thread.
        self._watch_tokens: dict[str, object] = {}
        self._listed: set[str] = set()
        self._watched_partitions: dict[str, int] = {}
        for path in (
            TOPICS_PATH,
            TOPIC_CONFIGS_PATH,
            DELETE_TOPICS_PATH,
            BROKER_IDS_PATH,
            *ACL_PATHS.values(),
            ACL_CHANGES_PATH,
            EXTENDED_ACL_CHANGES_PATH,
            LOG_DIR_EVENT_PATH,
            CONFIG_CHANGES_PATH,
            DELEGATION_TOKENS_PATH,
            TOKEN_CHANGES_PATH,
        ):
            self._call(self.zk.ensure_path, path)
        self._cluster_id = self._read_or_create_cluster_id(cluster_id or new_cluster_id())
        for name in self._call(self.zk.get_children, DELETE_TOPICS_PATH):
            log.warning("finishing the deletion of topic %s that a crash interrupted", name)
            self._delete_topic_znodes(name)
        for name in self._call(self.zk.get_children, TOPICS_PATH):
            topic = self._read_topic(name)
            if topic is not None:
                self._topics[name] = topic
        self._acls = self._read_acls()
        self._features = self._read_features()

    @classmethod
    def open(cls, config: BrokerConfig) -> ZooKeeperMetadataStore:
        """Connect to ``zookeeper.connect`` with a session of the store's own (blocks: not on
        the loop)."""
        session = ZooKeeperSession.from_config(config).start()
        try:
            return cls(session, config.node_id, config.raw("cluster.id"), own_session=True)
        except BaseException:
            session.close()
            raise

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the pool; the loop goes on meanwhile."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def _read_or_create_cluster_id(self, proposed: str) -> str:
        try:
            self._call(
                self.zk.create,
                CLUSTER_ID_PATH,
                _json({"version": "1", "id": proposed}),
                makepath=True,
            )
            return proposed
        except NodeExistsError:
            data, _ = self._call(self.zk.get, CLUSTER_ID_PATH)
            cluster_id: str = json.loads(data)["id"]
            return cluster_id

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def topics(self) -> Mapping[str, TopicMetadata]:
        return self._topics

    @property
    def answers_at_once(self) -> bool:
        return False

    # -- topics ----------------------------------------------------------------------------------

    def _read_topic(self, name: str) -> TopicMetadata | None:
        """One topic as ZooKeeper holds it (None if it is gone). Blocks."""
        try:
            data, stat = self._call(self.zk.get, topic_path(name))
        except NoNodeError:
            return None
        try:
            configs = decode_topic_configs(
                self._call(self.zk.get, f"{TOPIC_CONFIGS_PATH}/{name}")[0]
            )
        except NoNodeError:
            configs = {}
        topic = decode_topic(name, data, configs)
        if "topic_id" not in json.loads(data):
            # As Kafka's controller does for topics made before topic ids: write one down.
            with contextlib.suppress(BadVersionError):
                self._call(self.zk.set, topic_path(name), encode_topic(topic), version=stat.version)
        return topic

    def _read_all_topics(self) -> dict[str, TopicMetadata]:
        topics = {}
        for name in self._call(self.zk.get_children, TOPICS_PATH):
            topic = self._read_topic(name)
            if topic is not None:
                topics[name] = topic
        return topics

    async def reload(self) -> None:
        """Re-read every topic (the cache is otherwise kept by writes and watches)."""
        self._topics = await self._run(self._read_all_topics)

    async def topic_exists(self, name: str) -> bool:
        """Whether the topic's znode is there now (the cache may lag behind a deletion)."""
        return await self._run(self._call, self.zk.exists, topic_path(name)) is not None

    async def put(self, topic: TopicMetadata) -> None:
        if len(topic.replicas) != topic.partitions:
            raise MetadataStoreError(
                f"topic {topic.name} has {topic.partitions} partitions but "
                f"{len(topic.replicas)} replica assignments"
            )
        await self._run(self._put, topic)
        self._topics[topic.name] = topic

    def _put(self, topic: TopicMetadata) -> None:
        config_path = f"{TOPIC_CONFIGS_PATH}/{topic.name}"

        def create() -> list[object]:
            tx = self.zk.transaction()
            # Config first, as Kafka writes them: a topic znode is never seen without its config.
            tx.create(config_path, encode_topic_configs(topic.configs))
            tx.create(topic_path(topic.name), encode_topic(topic))
            results: list[object] = tx.commit()
            return results

        results = self._call(create)
        if any(isinstance(r, NodeExistsError) for r in results):
            # Ours, if a retry found the create that landed before the connection broke (the
            # znode holds this very topic, its id included); else another broker's, made
            # meanwhile (a Metadata request's auto-creation, say), which is never overwritten.
            try:
                data, _ = self._call(self.zk.get, topic_path(topic.name))
            except NoNodeError:
                data = b""
            if data != encode_topic(topic):
                raise TopicExistsError(f"topic {topic.name} already exists")
        elif any(isinstance(r, Exception) for r in results):
            raise MetadataStoreError(f"could not create topic {topic.name}: {results}")

    async def remove(self, name: str) -> None:
        await self._run(self._remove, name)
        self._topics.pop(name, None)

    def _remove(self, name: str) -> None:
        with contextlib.suppress(NodeExistsError):
            self._call(self.zk.create, f"{DELETE_TOPICS_PATH}/{name}", b"")
        self._delete_topic_znodes(name)

    def _delete_topic_znodes(self, name: str) -> None:
        for _ in range(10):
            try:
                self._call(self.zk.delete, topic_path(name), recursive=True)
                break
            except NoNodeError:
                break
            except NotEmptyError:
                continue  # a partition's znode was made while the tree went: delete it too
        else:
            raise MetadataStoreError(f"znodes of topic {name} kept appearing while deleted")
        with contextlib.suppress(NoNodeError):
            self._call(self.zk.delete, f"{TOPIC_CONFIGS_PATH}/{name}")
        with contextlib.suppress(NoNodeError):
            self._call(self.zk.delete, f"{DELETE_TOPICS_PATH}/{name}")

    async def set_partitions(
        self, name: str, count: int, new_replicas: Sequence[Sequence[int]] = ()
    ) -> TopicMetadata:
        updated = await self._run(
            self._set_partitions, name, count, new_replicas, self._topics.get(name)
        )
        self._topics[name] = updated
        return updated

    def _set_partitions(
        self,
        name: str,
        count: int,
        new_replicas: Sequence[Sequence[int]],
        cached: TopicMetadata | None,
    ) -> TopicMetadata:
        data, stat = self._call(self.zk.get, topic_path(name))
        topic = cached or decode_topic(name, data, {})
        current = decode_topic(name, data, topic.configs)
        added = tuple(tuple(r) for r in new_replicas)
        if current.partitions + len(added) != count:
            raise MetadataStoreError(
                f"topic {name} has {current.partitions} partitions: growing it to {count} "
                f"needs {count - current.partitions} replica assignments, not {len(added)}"
            )
        updated = replace(
            current, topic_id=topic.topic_id, partitions=count, replicas=current.replicas + added
        )
        path = topic_path(name)
        data = encode_topic(updated)
        if not self._conditional_write(
            path, data, stat.version, self.zk.set, path, data, version=stat.version
        ):
            raise StaleVersionError(f"topic {name} changed while adding partitions")
        return updated

    async def write_assignments(
        self,
        name: str,
        changes: Mapping[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]],
        *,
        controller_epoch_zk_version: int,
    ) -> TopicMetadata:
        """The controller's change of some partitions' (replicas, adding, removing) in the
        topic znode (a reassignment), the rest of the znode kept: read, change, and write at the
        version read, in one multi-op with the check of ``/controller_epoch`` (a controller
        whose term ended writes nothing: :class:`ControllerMovedError`). A partition grown or
        a topic recreated meanwhile is read again; a topic deleted meanwhile raises
        :class:`StaleVersionError`."""
        cached = self._topics.get(name)
        configs = dict(cached.configs) if cached else {}
        updated = await self._run(
            self._write_assignments, name, changes, configs, controller_epoch_zk_version
        )
        self._topics[name] = updated
        return updated

    def _write_assignments(
        self,
        name: str,
        changes: Mapping[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]],
        configs: dict[str, str],
        controller_epoch_zk_version: int,
    ) -> TopicMetadata:
        path = topic_path(name)
        for _ in range(10):
            try:
                data, stat = self._call(self.zk.get, path)
            except NoNodeError:
                raise StaleVersionError(f"topic {name} does not exist") from None
            current = decode_topic(name, data, configs)
            replicas = list(current.replicas)
            adding, removing = dict(current.adding), dict(current.removing)
            for partition, (rs, ars, rrs) in changes.items():
                if partition >= len(replicas):
                    raise StaleVersionError(f"topic {name} has no partition {partition}")
                replicas[partition] = tuple(rs)
                adding[partition], removing[partition] = tuple(ars), tuple(rrs)
            updated = replace(
                current,
                replicas=tuple(replicas),
                adding={p: r for p, r in adding.items() if r},
                removing={p: r for p, r in removing.items() if r},
            )
            encoded = encode_topic(updated)
            if self._conditional_write(
                path,
                encoded,
                stat.version,
                self._fenced_write,
                path,
                encoded,
                stat.version,
                controller_epoch_zk_version,
            ):
                return updated
        raise StaleVersionError(f"topic {name} kept changing while its assignment was written")

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicMetadata:
        topic = self._topics.get(name) or await self._run(self._read_topic, name)
        if topic is None:
            raise MetadataStoreError(f"topic {name} does not exist")
        await self._run(
            self._set_entity_configs, f"{TOPIC_CONFIGS_PATH}/{name}", f"topics/{name}", configs
        )
        updated = replace(self._topics.get(name) or topic, configs=dict(configs))
        self._topics[name] = updated
        return updated

    # -- ACLs ------------------------------------------------------------------------------------

    @property
    def acls(self) -> Mapping[ResourcePattern, frozenset[AccessControlEntry]]:
        return self._acls

    def _read_acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type, root in ACL_PATHS.items():
            for resource_type in _ACL_RESOURCE_TYPES:
                parent = f"{root}/{zk_name(resource_type)}"
                try:
                    names = self._call(self.zk.get_children, parent)
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries, _ = self._read_acl(pattern)
                    if entries:
                        acls[pattern] = entries
        return acls

    def _read_acl(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """The pattern's entries and znode version (-1: no znode)."""
        try:
            data, stat = self._call(self.zk.get, acl_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return (decode_entries(json.loads(data)) if data else frozenset()), stat.version

    async def change_acls(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry] = (),
        remove: Iterable[AccessControlEntry] = (),
    ) -> frozenset[AccessControlEntry]:
        entries = await self._run(self._change_acls, pattern, frozenset(add), frozenset(remove))
        if entries:
            self._acls[pattern] = entries
        else:
            self._acls.pop(pattern, None)
        return entries

    def _change_acls(
        self,
        pattern: ResourcePattern,
        added: frozenset[AccessControlEntry],
        removed: frozenset[AccessControlEntry],
    ) -> frozenset[AccessControlEntry]:
        path = acl_path(pattern)
        while True:
            current, version = self._read_acl(pattern)
            entries = (current | added) - removed
            if entries == current:
                return entries
            try:
                if not entries:
                    self._call(self.zk.delete, path, version=version)
                elif version < 0:
                    self._call(self.zk.create, path, _json(encode_entries(entries)), makepath=True)
                else:
                    self._call(self.zk.set, path, _json(encode_entries(entries)), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed this resource meanwhile: apply ours to theirs
            change_path, change = encode_acl_change(pattern)
            self._call(self.zk.create, f"{change_path}/acl_changes_", change, sequence=True)
            return entries

    # -- features --------------------------------------------------------------------------------

    @property
    def finalized_features(self) -> FinalizedFeatures | None:
        return self._features

    def _read_features(self) -> FinalizedFeatures | None:
        try:
            data, stat = self._call(self.zk.get, FEATURE_PATH)
        except NoNodeError:
            return None
        return decode_features(data, stat.version)

    async def write_finalized_features(
        self, levels: Mapping[str, int], expected_epoch: int
    ) -> FinalizedFeatures:
        written = await self._run(self._write_features, dict(levels), expected_epoch)
        if self._features is None or written.epoch > self._features.epoch:
            self._features = written
        return written

    def _write_features(self, levels: dict[str, int], expected_epoch: int) -> FinalizedFeatures:
        data = encode_features(levels)
        try:
            if expected_epoch == 0:
                self._call(self.zk.create, FEATURE_PATH, data, makepath=True)
                version = 0
            else:
                version = self._call(
                    self.zk.set, FEATURE_PATH, data, version=expected_epoch - 1
                ).version
        except (BadVersionError, NodeExistsError, NoNodeError) as e:
            raise StaleVersionError(f"features are no longer at epoch {expected_epoch}") from e
        return decode_features(data, version)

    # -- producer ids ----------------------------------------------------------------------------

    async def reserve_producer_ids(self, count: int) -> int:
        return await self._run(self._reserve_producer_ids, count)

    def _reserve_producer_ids(self, count: int) -> int:
        while True:
            try:
                data, stat = self._call(self.zk.get, PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    self._call(self.zk.create, PRODUCER_ID_BLOCK_PATH, b"")
                continue
            first = int(json.loads(data)["block_end"]) + 1 if data else 0
            block = {
                "version": 1,
                "broker": self.node_id,
                "block_start": str(first),
                "block_end": str(first + count - 1),
            }
            data = _json(block)
            path = PRODUCER_ID_BLOCK_PATH
            if self._conditional_write(
                path, data, stat.version, self.zk.set, path, data, version=stat.version
            ):
                return first
            # Another broker took this block: take the next.

    # -- partition state -------------------------------------------------------------------------

    async def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return await self._run(self._partition_state, topic, partition)

    def _partition_state(self, topic: str, partition: int) -> PartitionState | None:
        try:
            data, stat = self._call(self.zk.get, partition_state_path(topic, partition))
        except NoNodeError:
            return None
        return decode_partition_state(data, stat.version, stat.mzxid)

    async def controller_epoch(self) -> tuple[int, int] | None:
        """``/controller_epoch`` as (epoch, znode version); None before the first election."""
        return await self._run(self._controller_epoch)

    def _controller_epoch(self) -> tuple[int, int] | None:
        try:
            data, stat = self._call(self.zk.get, CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return None
        return int(data), int(stat.version)

    async def write_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        expected_version: int | None,
        *,
        controller_epoch_zk_version: int | None = None,
    ) -> PartitionState:
        """The store's compare-and-set; a controller names the version its election left
        ``/controller_epoch`` at, and the write is then one multi-op that also checks it, so a
        controller that lost its term writes nothing (:class:`ControllerMovedError`), as
        Kafka's controller does. Its create of a partition's first state never creates the
        topic's znode: on a topic deleted meanwhile it fails (:class:`StaleVersionError`)."""
        return await self._run(
            self._write_partition_state,
            topic,
            partition,
            state,
            expected_version,
            controller_epoch_zk_version,
        )

    def _write_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        expected_version: int | None,
        controller_epoch_zk_version: int | None,
    ) -> PartitionState:
        path = partition_state_path(topic, partition)
        data = encode_partition_state(state)
        if controller_epoch_zk_version is not None:
            if expected_version is None:
                self._make_partition_znode(topic, partition)
            written = self._conditional_write(
                path,
                data,
                -1 if expected_version is None else expected_version,
                self._fenced_write,
                path,
                data,
                expected_version,
                controller_epoch_zk_version,
            )
        elif expected_version is None:
            written = self._conditional_write(
                path, data, -1, self.zk.create, path, data, makepath=True
            )
        else:
            written = self._conditional_write(
                path, data, expected_version, self.zk.set, path, data, version=expected_version
            )
        if not written:
            raise StaleVersionError(
                f"partition state of {topic}-{partition} is not at version {expected_version}"
            )
        return replace(state, version=0 if expected_version is None else expected_version + 1)

    def _make_partition_znode(self, topic: str, partition: int) -> None:
        """``/brokers/topics/<t>/partitions/<p>``, the state's parent, if the topic exists."""
        for path in (
            f"{topic_path(topic)}/partitions",
            f"{topic_path(topic)}/partitions/{partition}",
        ):
            try:
                self._call(self.zk.create, path, b"")
            except NodeExistsError:
                pass
            except NoNodeError:
                raise StaleVersionError(f"topic {topic} does not exist") from None

    def _fenced_write(
        self, path: str, data: bytes, expected_version: int | None, epoch_zk_version: int
    ) -> None:
        tx = self.zk.transaction()
        tx.check(CONTROLLER_EPOCH_PATH, epoch_zk_version)
        if expected_version is None:
            tx.create(path, data)
        else:
            tx.set_data(path, data, version=expected_version)
        epoch_result, write_result = tx.commit()
        if isinstance(epoch_result, (BadVersionError, NoNodeError)):
            raise ControllerMovedError(
                f"/controller_epoch is no longer at version {epoch_zk_version}: "
                "another controller was elected"
            )
        if isinstance(write_result, Exception):
            raise write_result

    def _conditional_write(
        self,
        path: str,
        data: bytes,
        expected: int,
        fn: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> bool:
        """Run a create (``expected`` -1) or a versioned set of ``data`` at ``path``; False if
        another writer got there first. When the connection broke and the write was retried,
        its conflict may be with itself (applied before the break): the znode then holds our
        data at the next version, and that counts as written (Kafka checks the same way)."""
        attempts = 0

        def attempt() -> object:
            nonlocal attempts
            attempts += 1
            return fn(*args, **kwargs)

        try:
            self._call(attempt)
            return True
        except (NodeExistsError, BadVersionError, NoNodeError):
            if attempts == 1:
                return False
        try:
            current, stat = self._call(self.zk.get, path)
        except NoNodeError:
            return False
        return bool(current == data and stat.version == expected + 1)

    # -- brokers and the old tools' reassignments (for the controller) ---------------------------

    async def registered_brokers(self) -> frozenset[int]:
        """The ids under ``/brokers/ids`` now."""
        children = await self._run(self._call, self.zk.get_children, BROKER_IDS_PATH)
        return frozenset(int(c) for c in children)

    async def broker_registrations(self, ids: Iterable[int]) -> dict[int, tuple[bytes, int]]:
        """Each broker's registration znode as (JSON, creation zxid); one gone is left out."""
        return await self._run(self._broker_registrations, sorted(ids))

    def _broker_registrations(self, ids: list[int]) -> dict[int, tuple[bytes, int]]:
        found: dict[int, tuple[bytes, int]] = {}
        for broker_id in ids:
            try:
                data, stat = self._call(self.zk.get, f"{BROKER_IDS_PATH}/{broker_id}")
            except NoNodeError:
                continue
            found[broker_id] = (data, int(stat.czxid))
        return found

    async def admin_reassignments(self) -> tuple[bytes, int] | None:
        """``/admin/reassign_partitions`` as (JSON, znode version); None when absent."""
        return await self._run(self._admin_reassignments)

    def _admin_reassignments(self) -> tuple[bytes, int] | None:
        try:
            data, stat = self._call(self.zk.get, ADMIN_REASSIGN_PATH)
        except NoNodeError:
            return None
        return data, int(stat.version)

    async def set_admin_reassignments(self, data: bytes | None, version: int) -> bool:
        """Replace (``data``) or delete (None) ``/admin/reassign_partitions`` if it is still at
        ``version`` (-1: whatever it is); False when it changed or went meanwhile."""
        return await self._run(self._set_admin_reassignments, data, version)

    def _set_admin_reassignments(self, data: bytes | None, version: int) -> bool:
        try:
            if data is None:
                self._call(self.zk.delete, ADMIN_REASSIGN_PATH, version=version)
            else:
                self._call(self.zk.set, ADMIN_REASSIGN_PATH, data, version=version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    def watch_admin_reassignments(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the loop each time ``/admin/reassign_partitions`` holds data."""
        loop = asyncio.get_running_loop()

        def watched(data: bytes | None, stat: Any) -> None:
            # kazoo's thread: only hand it on.
            if data and not loop.is_closed():
                loop.call_soon_threadsafe(callback)

        self._watch_pool.submit(DataWatch, self.zk, ADMIN_REASSIGN_PATH, watched)

    # -- log dir failures (KIP-112) --------------------------------------------------------------

    async def notify_log_dir_failure(
        self, broker: int, partitions: Iterable[TopicPartition]
    ) -> None:
        """Tell the controller that a log dir of ``broker`` failed, holding ``partitions``."""
        data = encode_log_dir_failure(broker, partitions)
        path = f"{LOG_DIR_EVENT_PATH}/{LOG_DIR_EVENT_PREFIX}"
        await self._run(self._call, self.zk.create, path, data, sequence=True, makepath=True)

    async def log_dir_failures(self) -> list[tuple[str, int, list[TopicPartition]]]:
        """The log dir failure events not yet deleted, oldest first: ``(znode name, broker,
        partitions)``; anything else found there is deleted."""
        return await self._run(self._log_dir_failures)

    def _log_dir_failures(self) -> list[tuple[str, int, list[TopicPartition]]]:
        found: list[tuple[str, int, list[TopicPartition]]] = []
        for name in sorted(self._call(self.zk.get_children, LOG_DIR_EVENT_PATH)):
            try:
                data, _ = self._call(self.zk.get, f"{LOG_DIR_EVENT_PATH}/{name}")
            except NoNodeError:
                continue
            event = decode_log_dir_failure(data)
            if event is None:
                log.warning(
                    "deleting %s/%s, not a log dir failure: %r", LOG_DIR_EVENT_PATH, name, data
                )
                self._delete_log_dir_events([name])
                continue
            found.append((name, *event))
        return found

    async def delete_log_dir_events(self, names: Iterable[str]) -> None:
        await self._run(self._delete_log_dir_events, list(names))

    def _delete_log_dir_events(self, names: list[str]) -> None:
        for name in names:
            with contextlib.suppress(NoNodeError):
                self._call(self.zk.delete, f"{LOG_DIR_EVENT_PATH}/{name}")

    def watch_log_dir_events(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the loop each time log dir events are listed."""
        loop = asyncio.get_running_loop()

        def watched(children: list[str]) -> None:
            # kazoo's thread: only hand it on.
            if children and not loop.is_closed():
                loop.call_soon_threadsafe(callback)

        self._watch_pool.submit(ChildrenWatch, self.zk, LOG_DIR_EVENT_PATH, watched)

    # -- users and brokers' configs --------------------------------------------------------------

    async def user_configs(self, name: str) -> dict[str, str]:
        # Read at each use rather than cached: a login is rare, and another broker may have
        # changed the credential a moment ago.
        return await self._run(self._entity_configs, f"{USER_CONFIGS_PATH}/{name}")

    def _entity_configs(self, path: str) -> dict[str, str]:
        try:
            data, _ = self._call(self.zk.get, path)
        except NoNodeError:
            return {}
        return decode_topic_configs(data)

    async def broker_configs(self, broker: int) -> dict[str, str]:
        return await self._run(self._entity_configs, f"{BROKER_CONFIGS_PATH}/{broker}")

    async def set_broker_configs(self, broker: int, configs: Mapping[str, str]) -> None:
        await self._run(
            self._set_entity_configs,
            f"{BROKER_CONFIGS_PATH}/{broker}",
            f"brokers/{broker}",
            configs,
        )

    async def user_names(self) -> list[str]:
        return await self._run(self._user_names)

    async def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        return await self._run(self._client_metrics_configs)

    def _client_metrics_configs(self) -> dict[str, dict[str, str]]:
        found = {}
        for name in self._children(CLIENT_METRICS_PATH):
            configs = self._entity_configs(f"{CLIENT_METRICS_PATH}/{name}")
            if configs:
                found[name] = configs
        return found

    async def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        await self._run(
            self._set_entity_configs,
            f"{CLIENT_METRICS_PATH}/{name}",
            f"client-metrics/{name}",
            configs,
        )

    async def group_configs(self, group: str) -> dict[str, str]:
        return await self._run(self._entity_configs, f"{GROUP_CONFIGS_PATH}/{group}")

    async def set_group_configs(self, group: str, configs: Mapping[str, str]) -> None:
        await self._run(
            self._set_entity_configs, f"{GROUP_CONFIGS_PATH}/{group}", f"groups/{group}", configs
        )

    def _user_names(self) -> list[str]:
        try:
            names = self._call(self.zk.get_children, USER_CONFIGS_PATH)
        except NoNodeError:
            return []
        return sorted(n for n in names if self._entity_configs(f"{USER_CONFIGS_PATH}/{n}"))

    async def set_user_configs(self, name: str, configs: Mapping[str, str]) -> None:
        await self._run(
            self._set_entity_configs, f"{USER_CONFIGS_PATH}/{name}", f"users/{name}", configs
        )

    async def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        return await self._run(self._quota_configs)

    def _quota_configs(self) -> dict[QuotaEntity, dict[str, str]]:
        found: dict[QuotaEntity, dict[str, str]] = {}
        paths = []
        for kind in ("users", "clients", "ips"):
            for child in self._children(f"/config/{kind}"):
                paths.append(f"{kind}/{child}")
                if kind == "users":
                    nested = self._children(f"/config/users/{child}/clients")
                    paths.extend(f"users/{child}/clients/{c}" for c in nested)
        for path in paths:
            values = {
                k: v for k, v in self._entity_configs(f"/config/{path}").items() if k in QUOTA_KEYS
            }
            if values:
                try:
                    found[entity_from_path(path)] = values
                except InvalidQuota:
                    continue  # some other tool's znode: not a quota entity this broker knows
        return found

    def _children(self, path: str) -> list[str]:
        try:
            return list(self._call(self.zk.get_children, path))
        except NoNodeError:
            return []

    async def set_quota_configs(self, entity: QuotaEntity, configs: Mapping[str, str]) -> None:
        await self._run(self._set_quota_configs, entity, dict(configs))

    def _set_quota_configs(self, entity: QuotaEntity, configs: dict[str, str]) -> None:
        path = entity_path(entity)
        current = self._entity_configs(f"/config/{path}")
        kept = {k: v for k, v in current.items() if k not in QUOTA_KEYS}
        self._set_entity_configs(f"/config/{path}", path, {**kept, **configs})

    def _set_entity_configs(self, path: str, entity: str, configs: Mapping[str, str]) -> None:
        if configs or entity.startswith("topics/"):
            data = encode_topic_configs(configs)
            try:
                self._call(self.zk.set, path, data)
            except NoNodeError:
                self._call(self.zk.create, path, data, makepath=True)
        else:
            try:
                self._call(self.zk.delete, path)
            except NoNodeError:
                pass
            except NotEmptyError:
                # A user whose client-level quotas live below it: emptied, not removed.
                self._call(self.zk.set, path, encode_topic_configs({}))
        # Kafka's brokers learn of a changed entity config from this sequential znode.
        self._call(
            self.zk.create,
            f"{CONFIG_CHANGES_PATH}/config_change_",
            _json({"version": 2, "entity_path": entity}),
            sequence=True,
            makepath=True,
        )

    # -- delegation tokens -----------------------------------------------------------------------

    async def delegation_tokens(self) -> list[TokenInformation]:
        return await self._run(self._delegation_tokens)

    def _delegation_tokens(self) -> list[TokenInformation]:
        found = []
        for token_id in self._children(DELEGATION_TOKENS_PATH):
            try:
                data, _ = self._call(self.zk.get, f"{DELEGATION_TOKENS_PATH}/{token_id}")
                found.append(TokenInformation.from_json(data))
            except NoNodeError:
                continue  # removed since the listing
            except ValueError as e:
                log.warning("skipping delegation token znode %s: %s", token_id, e)
        return found

    async def put_delegation_token(self, token: TokenInformation) -> None:
        await self._run(self._put_delegation_token, token)

    def _put_delegation_token(self, token: TokenInformation) -> None:
        path = f"{DELEGATION_TOKENS_PATH}/{token.token_id}"
        try:
            self._call(self.zk.set, path, token.to_json())
        except NoNodeError:
            self._call(self.zk.create, path, token.to_json(), makepath=True)
        self._token_changed(token.token_id)

    async def remove_delegation_token(self, token_id: str) -> None:
        await self._run(self._remove_delegation_token, token_id)

    def _remove_delegation_token(self, token_id: str) -> None:
        with contextlib.suppress(NoNodeError):
            self._call(self.zk.delete, f"{DELEGATION_TOKENS_PATH}/{token_id}")
        self._token_changed(token_id)

    def _token_changed(self, token_id: str) -> None:
        # Kafka's brokers learn of a token made, renewed or removed from this sequential znode.
        self._call(
            self.zk.create,
            f"{TOKEN_CHANGES_PATH}/token_change_",
            token_id.encode(),
            sequence=True,
            makepath=True,
        )

    # -- change notification ---------------------------------------------------------------------

    def add_listener(self, loop: asyncio.AbstractEventLoop, listener: ChangeListener) -> None:
        self._listeners.add(loop, listener)
        if self._loop is None:
            self._loop = loop
            self._watch_pool.submit(self._start_watching, set(self._topics))

    def _start_watching(self, known: set[str]) -> None:
        """On the watch thread: watch the topic list, and each topic's znodes."""
        if self._loop is None:
            return  # closed before it got here (a broker whose start failed)
        try:
            self._listed = set(known)
            for name in self._listed:
                self._watch_topic(name)
            ChildrenWatch(self.zk, TOPICS_PATH, self._topic_list_changed)
            DataWatch(
                self.zk, f"{BROKER_CONFIGS_PATH}/{self.node_id}", self._broker_configs_changed
            )
            for path, listed in (
                (ACL_CHANGES_PATH, self._acl_changes_listed),
                (EXTENDED_ACL_CHANGES_PATH, self._acl_changes_listed),
                (CONFIG_CHANGES_PATH, self._config_changes_listed),
                (TOKEN_CHANGES_PATH, self._token_changes_listed),
            ):
                ChildrenWatch(self.zk, path, functools.partial(self._changes_listed, path, listed))
            DataWatch(self.zk, FEATURE_PATH, self._features_changed)
        except Exception:
            log.exception("could not set the metadata watches")

    def _to_watch_thread(self, change: MetadataChange) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the pool is shut down: closing
                self._watch_pool.submit(self._read_change, change)

    def _topic_list_changed(self, children: list[str]) -> None:
        self._to_watch_thread(MetadataChange("topics"))

    def _changes_listed(
        self, path: str, listed: Callable[[list[str]], None], children: list[str]
    ) -> None:
        listed(children)
        if children and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the pool is shut down: closing
                self._watch_pool.submit(self._purge_obsolete, path, children)

    def _purge_obsolete(self, path: str, children: list[str]) -> None:
        """On the watch thread: delete the notifications of ``path`` past their expiration."""
        if self._loop is None:
            return
        oldest = self._wall_clock_ms() - CHANGE_EXPIRATION_MS
        try:
            for child in sorted(children):
                stat = self._call(self.zk.exists, f"{path}/{child}")
                if stat is not None and stat.ctime < oldest:
                    with contextlib.suppress(NoNodeError):  # another broker purged it
                        self._call(self.zk.delete, f"{path}/{child}")
        except Exception as e:
            log.warning("could not purge the change notifications of %s: %r", path, e)

    def _broker_configs_changed(self, data: bytes | None, stat: Any) -> None:
        self._to_watch_thread(MetadataChange("broker_configs"))

    def _config_changes_listed(self, children: list[str]) -> None:
        # Any entity's configs changed (Kafka's brokers read the notification's entity path;
        # the quotas are few enough to be read again whole).
        self._to_watch_thread(MetadataChange("client_quotas"))

    def _token_changes_listed(self, children: list[str]) -> None:
        self._to_watch_thread(MetadataChange("delegation_tokens"))

    def _acl_changes_listed(self, children: list[str]) -> None:
        self._to_watch_thread(MetadataChange("acls"))

    def _features_changed(self, data: bytes | None, stat: Any) -> None:
        self._to_watch_thread(MetadataChange("features"))

    def _read_change(self, change: MetadataChange) -> None:
        """On the watch thread: read what changed, then hand it to the loop."""
        if self._loop is None:
            return  # closed since the watch fired: the session may be gone
        try:
            read = self._read_for(change)
        except Exception as e:
            if self._loop is not None:  # else: closed meanwhile, and nobody is told
                log.warning("could not read the metadata change %s: %r", change, e)
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._apply, change, read)

    def _read_for(self, change: MetadataChange) -> Any:
        if change.kind == "acls":
            return self._read_acls()
        if change.kind == "features":
            return self._read_features()
        if change.kind != "topics":
            return None
        if change.topic is None:
            listed = set(self._call(self.zk.get_children, TOPICS_PATH))
            added, removed = listed - self._listed, self._listed - listed
            self._listed = listed
            loaded = {}
            for name in sorted(added):
                topic = self._read_topic(name)
                if topic is not None:
                    loaded[name] = topic
                    self._watch_topic(name)
            for name in sorted(removed):
                self._unwatch_topic(name)
            return loaded, removed
        topic = self._read_topic(change.topic)
        if topic is None:
            self._unwatch_topic(change.topic)
            # The topic list may already have been read with the topic made again under the
            # same name (same children, so no news there): list again, where it is new.
            self._listed.discard(change.topic)
            self._to_watch_thread(MetadataChange("topics"))
        elif topic.partitions != self._watched_partitions.get(change.topic):
            self._watch_topic(change.topic)  # watches for the new partitions' states
        return topic

    def _apply(self, change: MetadataChange, read: Any) -> None:
        """On the loop: bring the cache up to date with what the watch thread read, then tell
        the listeners."""
        if self._loop is None:
            return
        if change.kind == "acls":
            self._acls = read
        elif change.kind == "features":
            if read is None or self._features is None or read.epoch >= self._features.epoch:
                self._features = read
        elif change.kind == "topics":
            if change.topic is None:
                loaded, removed = read
                self._topics.update(loaded)
                for name in removed:
                    self._topics.pop(name, None)
                for name in sorted(set(loaded) | removed):
                    self._listeners.notify(MetadataChange("topics", name))
                return
            if read is None:
                self._topics.pop(change.topic, None)
            else:
                self._topics[change.topic] = read
        self._listeners.notify(change)

    def _unwatch_topic(self, name: str) -> None:
        self._watch_tokens.pop(name, None)
        self._watched_partitions.pop(name, None)

    def _watch_topic(self, name: str) -> None:
        """On the watch thread (kazoo's watches read their znode as they are set)."""
        token = object()
        self._watch_tokens[name] = token
        try:
            data, _ = self._call(self.zk.get, topic_path(name))
            partitions = decode_topic(name, data, {}).partitions
        except NoNodeError:
            partitions = 0
        self._watched_partitions[name] = partitions

        def topic_changed(data: bytes | None, stat: Any) -> None:
            self._to_watch_thread(MetadataChange("topics", name))

        for path in (topic_path(name), f"{TOPIC_CONFIGS_PATH}/{name}"):
            # What the topic's znodes held when the watch was set is known: changes only.
            self._data_watch(path, name, token, topic_changed, report_first=False)
        for partition in range(partitions):

            def state_changed(data: bytes | None, stat: Any, partition: int = partition) -> None:
                # A partition state may have been written before its watch was set (the
                # controller is quick): nobody has read it yet, so it is news. Its data comes
                # with the change: nobody needs to read it again.
                state = None if data is None else decode_partition_state(data, stat.version)
                self._listeners.notify(MetadataChange("partition_state", name, partition, state))

            self._data_watch(partition_state_path(name, partition), name, token, state_changed)

    def _data_watch(
        self,
        path: str,
        name: str,
        token: object,
        changed: Callable[[bytes | None, Any], None],
        *,
        report_first: bool = True,
    ) -> None:
        """A watch of ``path`` that stops when the topic's token is replaced; ``changed`` is
        called on kazoo's thread for each change and, when ``report_first``, for what the znode
        holds when the watch is set (unless it is absent)."""
        first = True

        def watched(data: bytes | None, stat: Any) -> bool | None:
            nonlocal first
            if self._watch_tokens.get(name) is not token:
                return False  # the topic is gone (or made anew, with watches of its own)
            was_first, first = first, False
            if not was_first or (report_first and data is not None):
                changed(data, stat)
            return None

        DataWatch(self.zk, path, watched)

    def close(self) -> None:
        self._loop = None
        self._watch_tokens.clear()
        self._watched_partitions.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._watch_pool.shutdown(wait=False, cancel_futures=True)
        if self._own_session:
            self.session.close()
