"""Every metadata-store scenario, run against each engine: the local file store and ZooKeeper."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import itertools
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from odradek.cluster.features import FinalizedFeatures
from odradek.cluster.metadata import journal
from odradek.cluster.metadata import store as store_module
from odradek.cluster.metadata.store import (
    FILE_NAME,
    JOURNAL_NAME,
    LocalMetadataStore,
    MetadataChange,
    MetadataStore,
    PartitionState,
    StaleVersionError,
    TopicMetadata,
)
from odradek.cluster.metadata.zookeeper.store import ZooKeeperMetadataStore, ZooKeeperSession
from odradek.quotas.entities import CLIENT_ID, USER
from odradek.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.delegation_tokens import TokenInformation

NODE = 1


class Engine:
    """Opens stores of one engine on one backing (a directory, or a ZooKeeper chroot)."""

    def __init__(self, name: str, opener: Callable[[], MetadataStore]) -> None:
        self.name = name
        self._opener = opener
        self._opened: list[MetadataStore] = []

    def open(self) -> MetadataStore:
        store = self._opener()
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()


def zookeeper_store(connect: str) -> ZooKeeperMetadataStore:
    session = ZooKeeperSession(connect, session_timeout_ms=6000).start()
    return ZooKeeperMetadataStore(session, NODE, own_session=True)


@pytest.fixture(params=["local", "zookeeper"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "local":
        engine = Engine("local", lambda: LocalMetadataStore(tmp_path, node_id=NODE))
    else:
        connect: str = request.getfixturevalue("zookeeper_connect")
        engine = Engine("zookeeper", lambda: zookeeper_store(connect))
    yield engine
    engine.close_all()


def own(count: int) -> tuple[tuple[int, ...], ...]:
    return ((NODE,),) * count


async def test_topics_round_trip_and_survive_reopen(engine: Engine) -> None:
    store = engine.open()
    topic_id = uuid.uuid4()
    await store.put(TopicMetadata("orders", topic_id, 3, {"retention.ms": "1000"}, own(3)))
    grown = await store.set_partitions("orders", 5, [[NODE], [NODE]])
    assert grown.partitions == 5 and grown.replicas == own(5)
    await store.set_configs("orders", {"cleanup.policy": "compact"})
    await store.put(TopicMetadata("gone", uuid.uuid4(), 1, {}, own(1)))
    await store.remove("gone")
    expected = {
        "orders": TopicMetadata("orders", topic_id, 5, {"cleanup.policy": "compact"}, own(5))
    }
    assert dict(store.topics) == expected

    store.close()
    reopened = engine.open()
    assert reopened.cluster_id == store.cluster_id
    assert dict(reopened.topics) == expected
    assert reopened.topics["orders"].replicas_of(4) == (NODE,)


def test_cluster_id_is_kafka_shaped_and_kept(engine: Engine) -> None:
    first = engine.open()
    assert len(first.cluster_id) == 22
    first.close()
    assert engine.open().cluster_id == first.cluster_id


async def test_partition_state_compare_and_set(engine: Engine) -> None:
    store = engine.open()
    await store.put(TopicMetadata("t", uuid.uuid4(), 1, {}, own(1)))
    assert await store.partition_state("t", 0) is None

    created = await store.write_partition_state("t", 0, PartitionState(NODE, 0, (NODE,), 1), None)
    assert created.version == 0
    with pytest.raises(StaleVersionError):
        await store.write_partition_state("t", 0, PartitionState(NODE, 0, (NODE,), 1), None)

    moved = await store.write_partition_state(
        "t", 0, PartitionState(2, 1, (2,), 1), created.version
    )
    assert moved.version == created.version + 1
    with pytest.raises(StaleVersionError):  # written from a stale read
        await store.write_partition_state("t", 0, PartitionState(3, 1, (3,), 1), created.version)
    with pytest.raises(StaleVersionError):  # no state yet: nothing to compare with
        await store.write_partition_state("t", 1, PartitionState(3, 1, (3,), 1), 0)

    store.close()
    assert await engine.open().partition_state("t", 0) == PartitionState(
        2, 1, (2,), 1, moved.version
    )


async def test_producer_id_blocks_never_repeat_across_stores(engine: Engine) -> None:
    first = engine.open()
    a = await first.reserve_producer_ids(1000)
    b = await first.reserve_producer_ids(1000)
    first.close()
    c = await engine.open().reserve_producer_ids(1000)
    starts = [a, b, c]
    assert starts == sorted(set(starts))
    assert all(y - x >= 1000 for x, y in itertools.pairwise(starts))


async def test_acls_round_trip_and_survive_reopen(engine: Engine) -> None:
    store = engine.open()
    orders = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
    fin = ResourcePattern(ResourceType.GROUP, "fin-", PatternType.PREFIXED)
    read = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    deny = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)
    assert await store.change_acls(orders, add=[read, deny]) == {read, deny}
    await store.change_acls(fin, add=[read])
    assert await store.change_acls(orders, remove=[deny]) == {read}
    gone = ResourcePattern(ResourceType.TOPIC, "gone", PatternType.LITERAL)
    await store.change_acls(gone, add=[read])
    assert await store.change_acls(gone, remove=[read]) == frozenset()
    expected = {orders: frozenset({read}), fin: frozenset({read})}
    assert dict(store.acls) == expected

    store.close()
    assert dict(engine.open().acls) == expected


def test_changes_are_told_on_the_loop(engine: Engine) -> None:
    store = engine.open()

    async def scenario() -> list[tuple[MetadataChange, bool]]:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        seen: list[tuple[MetadataChange, bool]] = []
        got = asyncio.Event()

        def listener(change: MetadataChange) -> None:
            seen.append((change, threading.get_ident() == loop_thread))
            if change.kind == "partition_state":
                got.set()

        store.add_listener(loop, listener)
        await store.put(TopicMetadata("t", uuid.uuid4(), 1, {}, own(1)))
        await _until(lambda: any(c.topic == "t" for c, _ in seen))
        await store.write_partition_state("t", 0, PartitionState(NODE, 0, (NODE,), 0), None)
        await asyncio.wait_for(got.wait(), 10)
        await store.change_acls(
            ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
            add=[AccessControlEntry("User:a", "*", AclOperation.READ, AclPermissionType.ALLOW)],
        )
        await _until(lambda: any(c.kind == "acls" for c, _ in seen))
        return seen

    seen = asyncio.run(scenario())
    # A partition-state change carries the state as the store saw it: nobody reads it again.
    written = PartitionState(NODE, 0, (NODE,), 0, 0)
    assert MetadataChange("partition_state", "t", 0, written) in [c for c, _ in seen]
    assert all(on_loop for _, on_loop in seen)


def test_client_quotas_are_stored_and_told_to_every_listener(engine: Engine) -> None:
    store = engine.open()
    alice = ((USER, "alice"),)
    pair = ((USER, None), (CLIENT_ID, "app"))

    async def scenario() -> list[MetadataChange]:
        seen: list[MetadataChange] = []
        store.add_listener(asyncio.get_running_loop(), seen.append)
        await store.set_user_configs("alice", {"SCRAM-SHA-256": "credential"})
        await store.set_quota_configs(alice, {"producer_byte_rate": "1024"})
        await store.set_quota_configs(pair, {"request_percentage": "12.5"})
        await store.set_quota_configs(((CLIENT_ID, None),), {"consumer_byte_rate": "10"})
        await _until(lambda: any(c.kind == "client_quotas" for c in seen))
        return seen

    asyncio.run(scenario())
    expected = {
        alice: {"producer_byte_rate": "1024"},
        pair: {"request_percentage": "12.5"},
        ((CLIENT_ID, None),): {"consumer_byte_rate": "10"},
    }
    store.close()
    reopened = engine.open()
    assert asyncio.run(reopened.quota_configs()) == expected

    async def remove() -> None:
        await reopened.set_quota_configs(alice, {})
        await reopened.set_quota_configs(pair, {})

    asyncio.run(remove())
    assert asyncio.run(reopened.quota_configs()) == {
        ((CLIENT_ID, None),): {"consumer_byte_rate": "10"}
    }
    assert asyncio.run(reopened.user_configs("alice")) == {"SCRAM-SHA-256": "credential"}


def test_delegation_tokens_are_stored_and_told_to_every_store(engine: Engine) -> None:
    store = engine.open()
    other = engine.open() if engine.name == "zookeeper" else store
    token = TokenInformation("tok-1", "User:alice", "User:admin", ("User:bob",), 1000, 9000, 5000)

    async def scenario() -> list[MetadataChange]:
        seen: list[MetadataChange] = []
        other.add_listener(asyncio.get_running_loop(), seen.append)
        await store.put_delegation_token(token)
        await _until(lambda: any(c.kind == "delegation_tokens" for c in seen))
        assert await other.delegation_tokens() == [token]
        renewed = dataclasses.replace(token, expiry_ms=7000)
        await store.put_delegation_token(renewed)
        assert await other.delegation_tokens() == [renewed]
        return seen

    asyncio.run(scenario())
    store.close()
    reopened = engine.open()
    assert asyncio.run(reopened.delegation_tokens()) == [dataclasses.replace(token, expiry_ms=7000)]

    async def remove() -> None:
        await reopened.remove_delegation_token("tok-1")
        await reopened.remove_delegation_token("tok-1")  # gone already: no error

    asyncio.run(remove())
    assert asyncio.run(reopened.delegation_tokens()) == []
    reopened.close()
    assert asyncio.run(engine.open().delegation_tokens()) == []


async def _until(condition: Callable[[], bool], timeout: float = 10) -> None:
    """Wait (on the loop) for what another thread will make true."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


# -- the local store's file --------------------------------------------------------------------


def _everything(store: LocalMetadataStore) -> tuple[object, ...]:
    """What a reopened store must agree on."""
    return (
        store.cluster_id,
        dict(store.topics),
        dict(store._states),
        dict(store._users),
        dict(store._brokers),
        dict(store.acls),
        store.next_producer_id_block,
    )


async def _changes(store: LocalMetadataStore) -> list[tuple[object, ...]]:
    """A change of each kind, and the state after each."""
    read = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    orders = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
    steps = [
        store.put(TopicMetadata("orders", uuid.uuid4(), 3, {"retention.ms": "1"}, own(3))),
        store.set_partitions("orders", 5, [[NODE], [NODE]]),
        store.put(TopicMetadata("gone", uuid.uuid4(), 2, {}, own(2))),
        store.write_partition_state("gone", 1, PartitionState(NODE, 0, (NODE,), 1), None),
        store.remove("gone"),
        store.reserve_producer_ids(1000),
        store.change_acls(orders, add=[read]),
        store.set_user_configs("alice", {"SCRAM-SHA-256": "salt=..."}),
        store.set_broker_configs(NODE, {"leader.replication.throttled.rate": "10"}),
        store.set_configs("orders", {"cleanup.policy": "compact"}),
    ]
    states = []
    for step in steps:
        await step
        states.append(_everything(store))
    return states


async def test_a_change_appends_one_record_and_leaves_the_snapshot(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    snapshot = (tmp_path / FILE_NAME).read_bytes()
    await store.put(TopicMetadata("a", uuid.uuid4(), 10_000))
    await store.put(TopicMetadata("b", uuid.uuid4(), 1))
    assert (tmp_path / FILE_NAME).read_bytes() == snapshot
    records = journal.read_records(tmp_path / JOURNAL_NAME)
    assert not records.torn
    assert [sorted(json.loads(p)["topics"]) for p in records.payloads] == [["a"], ["b"]]
    assert _everything(LocalMetadataStore(tmp_path)) == _everything(store)


async def test_every_cut_of_the_last_record_reopens_as_before_it(tmp_path: Path) -> None:
    """A crash mid-append leaves any prefix of the record: the change is gone, nothing else,
    and the journal is cut at the good records so that later changes follow them."""
    store = LocalMetadataStore(tmp_path / "store")
    states = await _changes(store)
    data = (tmp_path / "store" / JOURNAL_NAME).read_bytes()
    last = len(journal.frame(journal.read_records(tmp_path / "store" / JOURNAL_NAME).payloads[-1]))
    for cut in range(len(data) - last, len(data)):
        crashed = tmp_path / f"cut{cut}"
        crashed.mkdir()
        (crashed / FILE_NAME).write_bytes((tmp_path / "store" / FILE_NAME).read_bytes())
        (crashed / JOURNAL_NAME).write_bytes(data[:cut])
        reopened = LocalMetadataStore(crashed)
        assert _everything(reopened) == states[-2]
        assert (crashed / JOURNAL_NAME).stat().st_size == len(data) - last
        await reopened.put(TopicMetadata("later", uuid.uuid4(), 1))
        assert "later" in LocalMetadataStore(crashed).topics


async def test_a_damaged_record_ends_the_journal(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    states = await _changes(store)
    data = bytearray((tmp_path / JOURNAL_NAME).read_bytes())
    data[-2] ^= 0xFF  # inside the last record's payload: its CRC no longer matches
    (tmp_path / JOURNAL_NAME).write_bytes(bytes(data))
    assert _everything(LocalMetadataStore(tmp_path)) == states[-2]


async def test_compaction_writes_the_snapshot_and_empties_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "COMPACT_MIN_BYTES", 0)
    store = LocalMetadataStore(tmp_path)
    for i in range(30):
        await store.put(TopicMetadata(f"t{i}", uuid.uuid4(), 2))
    # The journal outgrew the (small) snapshot again and again.
    snapshot = json.loads((tmp_path / FILE_NAME).read_text())
    assert snapshot["version"] == 3 and snapshot["journal_seq"] > 0
    assert len(snapshot["topics"]) < 30
    assert (tmp_path / JOURNAL_NAME).stat().st_size < (tmp_path / FILE_NAME).stat().st_size
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()
    assert _everything(LocalMetadataStore(tmp_path)) == _everything(store)


async def test_a_crash_between_compaction_and_truncation_applies_nothing_twice(
    tmp_path: Path,
) -> None:
    store = LocalMetadataStore(tmp_path)
    await _changes(store)
    left_over = (tmp_path / JOURNAL_NAME).read_bytes()
    store.compact()
    # The crash: the new snapshot is in place, the journal was not emptied yet.
    (tmp_path / JOURNAL_NAME).write_bytes(left_over)
    reopened = LocalMetadataStore(tmp_path)
    assert _everything(reopened) == _everything(store)
    # Its records are not replayed over later changes (a producer-id block would go back).
    first = await reopened.reserve_producer_ids(10)
    await reopened.remove("orders")
    again = LocalMetadataStore(tmp_path)
    assert _everything(again) == _everything(reopened)
    assert await again.reserve_producer_ids(10) == first + 10


async def test_a_change_the_disk_refuses_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalMetadataStore(tmp_path)
    await store.put(TopicMetadata("kept", uuid.uuid4(), 1))
    size = (tmp_path / JOURNAL_NAME).stat().st_size

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdatasync", full)
    with pytest.raises(OSError):
        await store.put(TopicMetadata("lost", uuid.uuid4(), 1))
    assert list(store.topics) == ["kept"]
    assert (tmp_path / JOURNAL_NAME).stat().st_size == size
    monkeypatch.undo()
    await store.put(TopicMetadata("later", uuid.uuid4(), 1))
    assert sorted(LocalMetadataStore(tmp_path).topics) == ["kept", "later"]


async def test_version_2_files_load_and_journal_from_then_on(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    (tmp_path / FILE_NAME).write_text(
        json.dumps(
            {
                "version": 2,
                "cluster_id": "AAAAAAAAAAAAAAAAAAAAAA",
                "next_producer_id_block": 2000,
                "topics": {
                    "v2": {"id": str(topic_id), "partitions": 1, "replicas": [[3]], "configs": {}}
                },
                "partition_states": {},
            },
            indent=1,
        )
    )
    store = LocalMetadataStore(tmp_path, node_id=3)
    assert store.topics["v2"] == TopicMetadata("v2", topic_id, 1, {}, ((3,),))
    await store.put(TopicMetadata("v3", uuid.uuid4(), 1))
    reopened = LocalMetadataStore(tmp_path, node_id=3)
    assert sorted(reopened.topics) == ["v2", "v3"]
    assert await reopened.reserve_producer_ids(1) == 2000


async def test_version_1_files_load_with_every_partition_on_this_node(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    (tmp_path / FILE_NAME).write_text(
        json.dumps(
            {
                "version": 1,
                "cluster_id": "AAAAAAAAAAAAAAAAAAAAAA",
                "next_producer_id_block": 2000,
                "topics": {"old": {"id": str(topic_id), "partitions": 2, "configs": {}}},
            }
        )
    )
    store = LocalMetadataStore(tmp_path, node_id=7)
    assert store.topics["old"] == TopicMetadata("old", topic_id, 2, {}, ((7,), (7,)))
    assert await store.partition_state("old", 0) is None
    assert await store.reserve_producer_ids(10) == 2000


async def test_group_configs_round_trip_and_survive_reopen(engine: Engine) -> None:
    store = engine.open()
    assert await store.group_configs("g") == {}
    await store.set_group_configs("g", {"share.auto.offset.reset": "earliest"})
    assert await engine.open().group_configs("g") == {"share.auto.offset.reset": "earliest"}
    assert await store.group_configs("other") == {}
    await store.set_group_configs("g", {})
    assert await engine.open().group_configs("g") == {}


async def test_broker_configs_round_trip_and_survive_reopen(engine: Engine) -> None:
    store = engine.open()
    assert await store.broker_configs(2) == {}
    await store.set_broker_configs(2, {"follower.replication.throttled.rate": "500"})
    assert await engine.open().broker_configs(2) == {"follower.replication.throttled.rate": "500"}
    assert await store.broker_configs(3) == {}
    await store.set_broker_configs(2, {})
    assert await engine.open().broker_configs(2) == {}


def test_finalized_features_compare_and_set_and_are_told(engine: Engine) -> None:
    store = engine.open()
    # Another broker of the same cluster (the local store is a single broker's).
    other = engine.open() if engine.name == "zookeeper" else store
    assert store.finalized_features is None

    async def scenario() -> list[MetadataChange]:
        seen: list[MetadataChange] = []
        other.add_listener(asyncio.get_running_loop(), seen.append)
        first = await store.write_finalized_features({"group.version": 1, "off": 0}, 0)
        assert first == FinalizedFeatures({"group.version": 1}, 1)
        with pytest.raises(StaleVersionError):
            await store.write_finalized_features({"group.version": 0}, 0)
        second = await store.write_finalized_features({"transaction.version": 2}, 1)
        assert second == FinalizedFeatures({"transaction.version": 2}, 2)
        assert store.finalized_features == second
        if engine.name == "zookeeper":
            await _until(lambda: other.finalized_features == second)
            assert any(c.kind == "features" for c in seen)
        return seen

    asyncio.run(scenario())
    store.close()
    assert engine.open().finalized_features == FinalizedFeatures({"transaction.version": 2}, 2)


async def test_eligible_leader_replicas_are_stored_with_the_partition_state(
    engine: Engine,
) -> None:
    store = engine.open()
    await store.put(TopicMetadata("t", uuid.uuid4(), 1, {}, own(1)))
    state = PartitionState(NODE, 3, (NODE,), 1, elr=(2, 3))
    written = await store.write_partition_state("t", 0, state, None)
    assert written.elr == (2, 3)
    store.close()
    reopened = await engine.open().partition_state("t", 0)
    assert reopened is not None and reopened.elr == (2, 3)
