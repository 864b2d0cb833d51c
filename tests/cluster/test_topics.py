"""Topic creation on a single broker: logs made off the event loop, in batches, and hosted."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.cluster import topics as topics_module
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.storage import LogConfig, LogManager, PartitionLog
from odradek.storage.formats import LEADER_EPOCH_CHECKPOINT, partition_dir_name

NODE = 1


@pytest.fixture
def topics(tmp_path: Path) -> Iterator[TopicManager]:
    clock = ManualClock()
    config = BrokerConfig({"log.dirs": str(tmp_path), "node.id": str(NODE)})
    logs = LogManager(config.log_dirs, clock)
    store = LocalMetadataStore(tmp_path, node_id=NODE)
    manager = TopicManager(config, store, logs, clock)
    manager.open()
    yield manager
    logs.close()


def _spy_on_prepare(
    topics: TopicManager, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[int, list[int]]]:
    """(thread id, partitions) of each call that makes logs."""
    calls: list[tuple[int, list[int]]] = []
    prepare = topics.logs.prepare

    def spy(
        topic: str, partitions: list[int], config: LogConfig, **kw: int | None
    ) -> list[PartitionLog]:
        calls.append((threading.get_ident(), list(partitions)))
        return prepare(topic, partitions, config, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(topics.logs, "prepare", spy)
    return calls


async def test_logs_are_made_off_the_loop_in_batches_and_all_hosted(
    topics: TopicManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(topics_module, "_CREATE_BATCH", 7)
    calls = _spy_on_prepare(topics, monkeypatch)
    loop_thread = threading.get_ident()
    created = await asyncio.gather(
        *(topics.create_topic(f"t{i}", 20, 1) for i in range(5)),
        topics.create_topic("one", 1, 1),
    )
    assert [t.partitions for t in created] == [20] * 5 + [1]
    assert all(thread != loop_thread for thread, _ in calls)
    assert max(len(batch) for _, batch in calls) == 7
    assert sorted(topics.partitions) == sorted(
        [(f"t{i}", p) for i in range(5) for p in range(20)] + [("one", 0)]
    )
    for (name, index), partition in topics.partitions.items():
        assert topics.logs.get(name, index) is partition.log
        assert partition.is_leader and partition.leader_epoch == 0
        assert partition.log.leader_epochs[0].epoch == 0
        # Kept in memory until the log's first flush: no file per partition as it is made.
        assert not (tmp_path / partition_dir_name(name, index) / LEADER_EPOCH_CHECKPOINT).exists()


async def test_partitions_added_are_made_off_the_loop(
    topics: TopicManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    await topics.create_topic("grows", 2, 1)
    calls = _spy_on_prepare(topics, monkeypatch)
    await topics.create_partitions("grows", 5)
    assert [batch for _, batch in calls] == [[2, 3, 4]]
    assert all(thread != threading.get_ident() for thread, _ in calls)
    assert sorted(i for t, i in topics.partitions if t == "grows") == [0, 1, 2, 3, 4]


async def test_a_topic_deleted_while_its_logs_are_made_leaves_none(
    topics: TopicManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = threading.Event(), threading.Event()
    prepare = topics.logs.prepare

    def slow(
        topic: str, partitions: list[int], config: LogConfig, **kw: int | None
    ) -> list[PartitionLog]:
        started.set()
        release.wait(10)
        return prepare(topic, partitions, config, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(topics.logs, "prepare", slow)
    creating = asyncio.ensure_future(topics.create_topic("brief", 3, 1))
    await asyncio.to_thread(started.wait, 10)
    await topics.delete_topic("brief")
    release.set()
    await creating
    assert not [key for key in topics.partitions if key[0] == "brief"]
    assert topics.logs.get("brief", 0) is None
    assert not list(tmp_path.glob("brief-*"))


async def test_a_request_that_stops_waiting_still_gets_every_partition(
    topics: TopicManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store holds the topic once written: its logs are made to the end regardless."""
    started, release = threading.Event(), threading.Event()
    prepare = topics.logs.prepare

    def slow(
        topic: str, partitions: list[int], config: LogConfig, **kw: int | None
    ) -> list[PartitionLog]:
        started.set()
        release.wait(10)
        return prepare(topic, partitions, config, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(topics.logs, "prepare", slow)
    creating = asyncio.ensure_future(topics.create_topic("kept", 4, 1))
    await asyncio.to_thread(started.wait, 10)
    creating.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await creating
    await asyncio.wait_for(_hosted(topics, "kept", 4), 10)


async def _hosted(topics: TopicManager, name: str, count: int) -> None:
    while len([k for k in topics.partitions if k[0] == name]) < count:
        await asyncio.sleep(0)
