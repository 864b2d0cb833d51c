"""The ZooKeeper store's own behaviour: Kafka's znode layout, watches across brokers, reconnects."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState

from odradek.cluster.metadata.store import (
    MetadataChange,
    PartitionState,
    StaleVersionError,
    TopicMetadata,
)
from odradek.cluster.metadata.zookeeper.store import (
    CHANGE_EXPIRATION_MS,
    CONFIG_CHANGES_PATH,
    CONTROLLER_EPOCH_PATH,
    DELETE_TOPICS_PATH,
    TOKEN_CHANGES_PATH,
    ControllerMovedError,
    ZooKeeperMetadataStore,
    ZooKeeperSession,
    ZooKeeperUnreachableError,
)
from odradek.config import BrokerConfig
from odradek.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.delegation_tokens import TokenInformation
from odradek.testing import ZOOKEEPER_START_TIMEOUT_S, ZooKeeperServer, free_port, wait_until
from odradek.topic_partition import TopicPartition


@pytest.fixture
def raw(zookeeper_connect: str) -> Iterator[KazooClient]:
    """A plain kazoo client inside the test's chroot, to read znodes as Kafka's tools would."""
    hosts, _, chroot = zookeeper_connect.partition("/")
    outside = KazooClient(hosts=hosts)
    outside.start(timeout=10)
    outside.ensure_path("/" + chroot)
    outside.stop()
    outside.close()
    client = KazooClient(hosts=zookeeper_connect)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


def open_store(
    connect: str, node_id: int = 1, connection_timeout_ms: int = 6000
) -> ZooKeeperMetadataStore:
    config = BrokerConfig(
        {
            "zookeeper.connect": connect,
            "broker.id": str(node_id),
            "zookeeper.session.timeout.ms": "6000",
            "zookeeper.connection.timeout.ms": str(connection_timeout_ms),
        }
    )
    return ZooKeeperMetadataStore.open(config)


async def until(condition: Callable[[], bool], timeout_s: float = 15) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.01)


def znode(client: KazooClient, path: str) -> Any:
    data, _ = client.get(path)
    return json.loads(data)


async def test_znodes_are_kafkas(zookeeper_connect: str, raw: KazooClient) -> None:
    store = open_store(zookeeper_connect)
    try:
        topic_id = uuid.uuid4()
        await store.put(
            TopicMetadata("orders", topic_id, 2, {"retention.ms": "1000"}, ((1, 2, 3), (2, 3, 1)))
        )
        await store.write_partition_state("orders", 0, PartitionState(1, 4, (1, 2), 7), None)
        await store.set_configs("orders", {"retention.ms": "2000"})
        first = await store.reserve_producer_ids(1000)

        assert znode(raw, "/cluster/id") == {"version": "1", "id": store.cluster_id}
        assert znode(raw, "/brokers/topics/orders") == {
            "version": 3,  # Kafka 3.x's, with a topic id
            "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
            "adding_replicas": {},
            "removing_replicas": {},
            # Kafka's Uuid.toString: URL-safe base64, no padding.
            "topic_id": base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("="),
        }
        assert znode(raw, "/brokers/topics/orders/partitions/0/state") == {
            "controller_epoch": 7,
            "leader": 1,
            "version": 1,
            "leader_epoch": 4,
            "isr": [1, 2],
        }
        assert znode(raw, "/config/topics/orders") == {
            "version": 1,
            "config": {"retention.ms": "2000"},
        }
        [change] = raw.get_children("/config/changes")
        assert change.startswith("config_change_")
        assert znode(raw, f"/config/changes/{change}") == {
            "version": 2,
            "entity_path": "topics/orders",
        }
        assert znode(raw, "/latest_producer_id_block") == {
            "version": 1,
            "broker": 1,
            "block_start": str(first),
            "block_end": str(first + 999),
        }

        await store.remove("orders")
        assert not raw.exists("/brokers/topics/orders")
        assert not raw.exists("/config/topics/orders")
        assert raw.get_children(DELETE_TOPICS_PATH) == []
    finally:
        store.close()


def test_topics_written_by_kafka_are_read(zookeeper_connect: str, raw: KazooClient) -> None:
    """A topic as Kafka before 2.8 left it (no topic id): read, and given an id that sticks."""
    open_store(zookeeper_connect).close()  # makes the layout's parents
    raw.create("/config/topics/legacy", b'{"version":1,"config":{"cleanup.policy":"compact"}}')
    raw.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"1":[2],"0":[1]}}')
    store = open_store(zookeeper_connect)
    try:
        topic = store.topics["legacy"]
        assert topic.replicas == ((1,), (2,))
        assert topic.configs == {"cleanup.policy": "compact"}
        again = open_store(zookeeper_connect)
        assert again.topics["legacy"].topic_id == topic.topic_id
        again.close()
    finally:
        store.close()


async def test_an_interrupted_deletion_is_finished_at_open(
    zookeeper_connect: str, raw: KazooClient
) -> None:
    store = open_store(zookeeper_connect)
    await store.put(TopicMetadata("doomed", uuid.uuid4(), 1, {}, ((1,),)))
    store.close()
    raw.create(f"{DELETE_TOPICS_PATH}/doomed", b"")  # as if a crash came right after marking

    reopened = open_store(zookeeper_connect)
    try:
        assert "doomed" not in reopened.topics
        assert not raw.exists("/brokers/topics/doomed")
        assert raw.get_children(DELETE_TOPICS_PATH) == []
    finally:
        reopened.close()


async def test_a_controllers_write_is_fenced_by_the_controller_epoch(
    zookeeper_connect: str, raw: KazooClient
) -> None:
    store = open_store(zookeeper_connect)
    try:
        assert await store.controller_epoch() is None
        raw.create(CONTROLLER_EPOCH_PATH, b"1")
        epoch, version = await store.controller_epoch() or (0, -1)
        assert (epoch, version) == (1, 0)
        await store.put(TopicMetadata("t", uuid.uuid4(), 2, {}, ((1, 2), (2, 1))))
        first = PartitionState(1, 0, (1, 2), 1)
        written = await store.write_partition_state(
            "t", 0, first, None, controller_epoch_zk_version=0
        )
        assert written.version == 0 and await store.partition_state("t", 0) == written
        moved = PartitionState(2, 1, (2,), 1)
        with pytest.raises(StaleVersionError):  # the version check still applies
            await store.write_partition_state("t", 0, moved, 5, controller_epoch_zk_version=0)

        raw.set(CONTROLLER_EPOCH_PATH, b"2")  # another controller's election
        with pytest.raises(ControllerMovedError):
            await store.write_partition_state("t", 0, moved, 0, controller_epoch_zk_version=0)
        with pytest.raises(ControllerMovedError):
            await store.write_partition_state("t", 1, moved, None, controller_epoch_zk_version=0)
        assert await store.partition_state("t", 0) == written
        assert await store.partition_state("t", 1) is None

        # A first state for a deleted topic does not bring the topic's znode back.
        await store.remove("t")
        with pytest.raises(StaleVersionError):
            await store.write_partition_state("t", 0, first, None, controller_epoch_zk_version=1)
        assert not raw.exists("/brokers/topics/t")
    finally:
        store.close()


async def test_producer_id_blocks_unique_between_brokers_at_once(zookeeper_connect: str) -> None:
    stores = [open_store(zookeeper_connect, node_id) for node_id in (1, 2)]
    starts: list[int] = []

    async def reserve(store: ZooKeeperMetadataStore) -> None:
        for _ in range(15):
            starts.append(await store.reserve_producer_ids(1000))

    try:
        # Both brokers' reservations in flight at once: each compare-and-set races the other.
        await asyncio.gather(*(reserve(s) for s in stores))
    finally:
        for s in stores:
            s.close()
    assert sorted(starts) == [i * 1000 for i in range(30)]


def test_another_brokers_changes_reach_the_loop(zookeeper_connect: str) -> None:
    watcher = open_store(zookeeper_connect)
    writer = open_store(zookeeper_connect, node_id=2)

    async def scenario() -> list[MetadataChange]:
        loop = asyncio.get_running_loop()
        seen: list[MetadataChange] = []
        watcher.add_listener(loop, seen.append)
        await asyncio.sleep(0)

        async def until(condition: Callable[[], bool]) -> None:
            async with asyncio.timeout(15):
                while not condition():
                    await asyncio.sleep(0.01)

        await writer.put(TopicMetadata("t", uuid.uuid4(), 1, {}, ((1,),)))
        await until(lambda: "t" in watcher.topics)
        await writer.set_partitions("t", 2, [[2]])
        await until(lambda: watcher.topics["t"].partitions == 2)
        await writer.set_configs("t", {"retention.ms": "5"})
        await until(lambda: watcher.topics["t"].configs == {"retention.ms": "5"})
        # The grown partition's state is watched too.
        state = await writer.write_partition_state("t", 1, PartitionState(2, 0, (2,), 1), None)
        await until(lambda: MetadataChange("partition_state", "t", 1, state) in seen)
        await writer.remove("t")
        await until(lambda: "t" not in watcher.topics)
        return seen

    try:
        seen = asyncio.run(scenario())
    finally:
        watcher.close()
        writer.close()
    assert MetadataChange("topics", "t") in seen


async def test_acl_znodes_are_kafkas(zookeeper_connect: str, raw: KazooClient) -> None:
    store = open_store(zookeeper_connect)
    allow = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    deny = AccessControlEntry(
        "User:bob", "10.0.0.1", AclOperation.IDEMPOTENT_WRITE, AclPermissionType.DENY
    )
    try:
        await store.change_acls(
            ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL), [allow]
        )
        await store.change_acls(
            ResourcePattern(ResourceType.TOPIC, "fin-", PatternType.PREFIXED), [deny]
        )
    finally:
        store.close()
    assert znode(raw, "/kafka-acl/TransactionalId/tx") == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    assert znode(raw, "/kafka-acl-extended/prefixed/Topic/fin-")["acls"] == [
        {
            "principal": "User:bob",
            "permissionType": "Deny",
            "operation": "IdempotentWrite",
            "host": "10.0.0.1",
        }
    ]
    (literal,) = raw.get_children("/kafka-acl-changes")
    assert literal.startswith("acl_changes_")
    assert raw.get(f"/kafka-acl-changes/{literal}")[0] == b"TRANSACTIONAL_ID:tx"
    (extended,) = raw.get_children("/kafka-acl-extended-changes")
    assert znode(raw, f"/kafka-acl-extended-changes/{extended}") == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "fin-",
        "patternType": "PREFIXED",
    }


def test_another_brokers_acl_changes_reach_the_loop(zookeeper_connect: str) -> None:
    watcher = open_store(zookeeper_connect)
    writer = open_store(zookeeper_connect, node_id=2)
    topic = ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL)
    read = AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW)
    write = AccessControlEntry("User:a", "*", AclOperation.WRITE, AclPermissionType.ALLOW)

    async def scenario() -> None:
        watcher.add_listener(asyncio.get_running_loop(), lambda change: None)
        await asyncio.sleep(0)

        async def until(condition: Callable[[], bool]) -> None:
            async with asyncio.timeout(15):
                while not condition():
                    await asyncio.sleep(0.01)

        await writer.change_acls(topic, add=[read])
        await until(lambda: watcher.acls.get(topic) == {read})
        # Both brokers change one resource: each change is applied to the other's.
        await watcher.change_acls(topic, add=[write])
        assert await writer.change_acls(topic, remove=[read]) == {write}
        await until(lambda: watcher.acls.get(topic) == {write})
        await writer.change_acls(topic, remove=[write])
        await until(lambda: topic not in watcher.acls)

    try:
        asyncio.run(scenario())
    finally:
        watcher.close()
        writer.close()


def test_unreachable_zookeeper_fails_clearly_after_the_connection_timeout() -> None:
    port = free_port()
    session = ZooKeeperSession(f"127.0.0.1:{port}", 6000, connection_timeout_ms=700)
    started = time.monotonic()
    with pytest.raises(ZooKeeperUnreachableError, match=r"within 700 ms"):
        session.start()
    assert time.monotonic() - started < 10


async def test_store_reconnects_after_a_zookeeper_restart() -> None:
    with ZooKeeperServer() as server:
        store = open_store(server.connect_string("/restart"))
        states: list[str] = []
        store.zk.add_listener(states.append)
        try:
            await store.put(TopicMetadata("before", uuid.uuid4(), 1, {}, ((1,),)))
            server.restart()
            # A reconnect, to the old session or, when the restart outlived it (kazoo waits its
            # read timeout on a server still starting), to a new one: SUSPENDED (LOST) CONNECTED.
            wait_until(
                lambda: KazooState.SUSPENDED in states and states[-1] == KazooState.CONNECTED,
                30,
                0.02,
                "a reconnect",
            )
            await store.put(TopicMetadata("after", uuid.uuid4(), 1, {}, ((1,),)))
            other = open_store(server.connect_string("/restart"))
            assert set(other.topics) == {"before", "after"}
            other.close()
        finally:
            store.close()


async def test_a_write_while_zookeeper_is_down_waits_for_it() -> None:
    # The write's deadline (zookeeper.connection.timeout.ms) must not race ZooKeeper's start-up,
    # a JVM start that takes from one to many seconds: it is set above the longest start the
    # test server allows, and the server is started only once the write is known to wait.
    with ZooKeeperServer() as server:
        store = open_store(
            server.connect_string("/down"),
            connection_timeout_ms=int(ZOOKEEPER_START_TIMEOUT_S * 1000) + 30_000,
        )
        try:
            first = await store.reserve_producer_ids(1000)
            server.kill()
            await until(lambda: not store.session.connected)
            waiting = asyncio.ensure_future(store.reserve_producer_ids(1000))
            await asyncio.to_thread(server.start)
            # Retried until ZooKeeper is back (within zookeeper.connection.timeout.ms).
            second = await waiting
            assert second == first + 1000
            assert await store.partition_state("nothing", 0) is None
        finally:
            store.close()


async def test_a_reassignment_is_written_into_the_topic_znode_as_kafka_writes_it(
    zookeeper_connect: str, raw: KazooClient
) -> None:
    store = open_store(zookeeper_connect)
    try:
        raw.create(CONTROLLER_EPOCH_PATH, b"1")
        await store.put(TopicMetadata("t", uuid.uuid4(), 2, {}, ((1, 2), (2, 1))))
        written = await store.write_assignments(
            "t", {0: ((2, 3, 1), (3,), (1,))}, controller_epoch_zk_version=0
        )
        assert written.replicas == ((2, 3, 1), (2, 1))
        stored = znode(raw, "/brokers/topics/t")
        assert stored["partitions"] == {"0": [2, 3, 1], "1": [2, 1]}
        assert stored["adding_replicas"] == {"0": [3]}
        assert stored["removing_replicas"] == {"0": [1]}
        # Another store (a new controller) reads the move back.
        other = open_store(zookeeper_connect, node_id=2)
        try:
            topic = other.topics["t"]
            assert (topic.adding, topic.removing) == ({0: (3,)}, {0: (1,)})
        finally:
            other.close()
        done = await store.write_assignments(
            "t", {0: ((2, 3), (), ())}, controller_epoch_zk_version=0
        )
        assert done.adding == {} and done.removing == {}
        stored = znode(raw, "/brokers/topics/t")
        assert stored["partitions"]["0"] == [2, 3] and stored["adding_replicas"] == {}

        raw.set(CONTROLLER_EPOCH_PATH, b"2")  # another controller's election
        with pytest.raises(ControllerMovedError):
            await store.write_assignments("t", {1: ((3,), (), ())}, controller_epoch_zk_version=0)
        assert znode(raw, "/brokers/topics/t")["partitions"]["1"] == [2, 1]
        await store.remove("t")
        with pytest.raises(StaleVersionError):
            await store.write_assignments("t", {0: ((1,), (), ())}, controller_epoch_zk_version=1)
    finally:
        store.close()


async def test_broker_configs_are_kafkas_dynamic_broker_znodes(
    zookeeper_connect: str, raw: KazooClient
) -> None:
    store = open_store(zookeeper_connect)
    try:
        await store.set_broker_configs(2, {"leader.replication.throttled.rate": "1000"})
        assert znode(raw, "/config/brokers/2") == {
            "version": 1,
            "config": {"leader.replication.throttled.rate": "1000"},
        }
        changes = sorted(raw.get_children("/config/changes"))
        assert znode(raw, f"/config/changes/{changes[-1]}")["entity_path"] == "brokers/2"
    finally:
        store.close()


async def test_log_dir_failures_are_kafkas_notifications_taken_in_order(
    zookeeper_connect: str, raw: KazooClient
) -> None:
    broker, controller = open_store(zookeeper_connect, 2), open_store(zookeeper_connect, 1)
    try:
        listed = asyncio.Event()
        controller.watch_log_dir_events(listed.set)
        await broker.notify_log_dir_failure(2, [TopicPartition("t", 0), TopicPartition("u", 3)])
        await broker.notify_log_dir_failure(2, [])
        raw.create("/log_dir_event_notification/log_dir_event_9999999999", b"not json")
        async with asyncio.timeout(15):
            await listed.wait()

        (first, second, _) = sorted(raw.get_children("/log_dir_event_notification"))
        assert first.startswith("log_dir_event_")
        # Kafka's own fields, with the partitions the failed dir held.
        assert znode(raw, f"/log_dir_event_notification/{first}") == {
            "version": 1,
            "broker": 2,
            "event": 1,
            "partitions": [{"topic": "t", "partition": 0}, {"topic": "u", "partition": 3}],
        }
        events = await controller.log_dir_failures()
        assert events == [
            (first, 2, [TopicPartition("t", 0), TopicPartition("u", 3)]),
            (second, 2, []),
        ]
        # What is not a log dir failure is deleted at once; the others once acted on.
        assert len(raw.get_children("/log_dir_event_notification")) == 2
        await controller.delete_log_dir_events([first, second])
        assert raw.get_children("/log_dir_event_notification") == []
        assert await controller.log_dir_failures() == []
    finally:
        broker.close()
        controller.close()


def test_a_topic_removed_and_made_again_at_once_is_seen_anew(zookeeper_connect: str) -> None:
    """The topic's own watches read it gone; before the topic list is read, the topic is made
    again under the same name (so the list holds the same names as before): the new topic is
    still found, and watched."""
    watcher = open_store(zookeeper_connect)
    writer = open_store(zookeeper_connect, node_id=2)
    first = TopicMetadata("t", uuid.uuid4(), 1, {}, ((1,),))
    second = TopicMetadata("t", uuid.uuid4(), 1, {}, ((2,),))
    read_change = watcher._read_change
    removed = threading.Event()
    deferrals = 0

    def list_read_last(change: MetadataChange) -> None:
        # On the watch thread. The list's read waits until the deletion is done, then once more
        # behind the topic's own reads of it; then, just before it, the topic is made again.
        nonlocal deferrals
        if change == MetadataChange("topics") and deferrals < 2:
            if not removed.wait(0.01) or deferrals == 0:
                deferrals += removed.is_set()
                watcher._watch_pool.submit(list_read_last, change)
                return
            deferrals += 1
            writer._put(second)
        read_change(change)

    async def scenario() -> None:
        seen: list[MetadataChange] = []
        watcher.add_listener(asyncio.get_running_loop(), seen.append)
        await writer.put(first)
        await until(lambda: "t" in watcher.topics, timeout_s=10)
        watcher._read_change = list_read_last  # type: ignore[method-assign]
        await writer.remove("t")
        removed.set()
        await until(lambda: watcher.topics.get("t") == second, timeout_s=10)
        # The new topic's partition state is watched.
        state = await writer.write_partition_state("t", 0, PartitionState(2, 0, (2,), 1), None)
        await until(lambda: MetadataChange("partition_state", "t", 0, state) in seen, 10)

    try:
        asyncio.run(scenario())
    finally:
        watcher.close()
        writer.close()


def test_change_notifications_are_purged_once_expired(
    zookeeper_connect: str, raw: KazooClient
) -> None:
    """As Kafka's notification listeners: a change notification older than 15 minutes (by its
    znode's creation time) is deleted by the broker that lists it; a younger one is kept."""
    offset_ms = 0.0

    def wall_clock_ms() -> float:
        return time.time() * 1000 + offset_ms

    watcher = ZooKeeperMetadataStore(
        ZooKeeperSession(zookeeper_connect, 6000).start(),
        1,
        own_session=True,
        wall_clock_ms=wall_clock_ms,
    )
    writer = open_store(zookeeper_connect, node_id=2)

    async def scenario() -> None:
        seen: list[MetadataChange] = []
        watcher.add_listener(asyncio.get_running_loop(), seen.append)
        await writer.put(TopicMetadata("t", uuid.uuid4(), 1, {}, ((1,),)))
        await writer.set_configs("t", {"retention.ms": "5"})
        token = TokenInformation("tok-1", "User:alice", "User:admin", (), 1000, 9000, 5000)
        await writer.put_delegation_token(token)
        await until(lambda: MetadataChange("delegation_tokens") in seen)
        await until(lambda: watcher.topics["t"].configs == {"retention.ms": "5"})
        # Young: kept, for brokers that have not read them yet.
        assert raw.get_children(CONFIG_CHANGES_PATH) and raw.get_children(TOKEN_CHANGES_PATH)

        nonlocal offset_ms
        offset_ms = CHANGE_EXPIRATION_MS + 1000
        await writer.set_configs("t", {"retention.ms": "6"})
        await writer.put_delegation_token(token)
        # Listed again by the watcher: all of them are past their expiration now.
        await until(lambda: not raw.get_children(CONFIG_CHANGES_PATH))
        await until(lambda: not raw.get_children(TOKEN_CHANGES_PATH))
        await until(lambda: watcher.topics["t"].configs == {"retention.ms": "6"})

    try:
        asyncio.run(scenario())
    finally:
        watcher.close()
        writer.close()
