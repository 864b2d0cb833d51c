"""Transactional offset commits in a real ``__consumer_offsets`` log: the batch is the one Kafka's
coordinator writes, and a broker restarted over the same directory replays pending commits and
applies the COMMIT/ABORT control batches it meets, in log order."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.topics import TopicManager
from odradek.config import BrokerConfig
from odradek.coordinator.common.runtime import CoordinatorContext
from odradek.coordinator.group.messages import CommitRequest, OffsetCommit, TxnCommitRequest
from odradek.coordinator.group.runtime import GroupCoordinatorRuntime
from odradek.protocol.errors import ErrorCode
from odradek.protocol.record_batch import iter_headers, validate_batches
from odradek.protocol.records import NewRecord, encode_batch
from odradek.server.purgatory import Purgatory
from odradek.storage import LogManager

PID, EPOCH = 7000, 2
TP = ("t", 0)
NOW = 1_700_000_000_000


@contextmanager
def broker(path: Path) -> Iterator[GroupCoordinatorRuntime]:
    """A lone broker's group coordinator on ``path``, loaded as at start."""
    clock = ManualClock(NOW)
    config = BrokerConfig(
        {"log.dirs": str(path), "node.id": "1", "offsets.topic.num.partitions": "3"}
    )
    logs = LogManager(config.log_dirs, clock)
    store = LocalMetadataStore(config.log_dirs[0], node_id=1)
    topics = TopicManager(config, store, logs, clock)
    topics.open()
    runtime = GroupCoordinatorRuntime(
        CoordinatorContext(config, topics, clock, Purgatory().replicated)
    )
    runtime.load()
    try:
        yield runtime
    finally:
        runtime.shard.shutdown()
        logs.close()


def txn_commit(runtime: GroupCoordinatorRuntime, offset: int, tp: tuple[str, int] = TP) -> None:
    request = TxnCommitRequest("g", "txn", PID, EPOCH, (OffsetCommit(*tp, offset),))
    result = runtime.perform(
        lambda coordinator: coordinator.offsets.commit_transactional_offsets(request)
    )
    assert (result.response, result.error) == ({tp: ErrorCode.none}, ErrorCode.none)


def marker(runtime: GroupCoordinatorRuntime, commit: bool) -> None:
    """Append the producer's COMMIT or ABORT control batch to the group's partition, as
    WriteTxnMarkers does, and tell the coordinator."""
    index = runtime.shard.partition_for("g")
    partition = runtime.offsets_topic.partition(index)
    assert partition is not None
    batch = bytearray(
        encode_batch(
            [NewRecord(struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0))],
            producer_id=PID,
            producer_epoch=EPOCH,
            transactional=True,
            control=True,
            now_ms=NOW,
        )
    )
    partition.append(batch, validate_batches(batch, 1 << 20), None)
    runtime.transaction_completed(index, PID, commit)


def offset_of(runtime: GroupCoordinatorRuntime, tp: tuple[str, int] = TP) -> int | None:
    fetched = runtime.shard.offsets.fetch_offsets("g", [tp])
    ((_, found),) = fetched.offsets
    return None if found is None else found.offset


def test_the_batch_is_transactional_as_kafka_writes_it(tmp_path: Path) -> None:
    with broker(tmp_path) as runtime:
        txn_commit(runtime, 5)
        marker(runtime, commit=True)
        # The producer's next transaction, same epoch, same base sequence 0: still appended.
        txn_commit(runtime, 6)
        partition = runtime.offsets_topic.partition(runtime.shard.partition_for("g"))
        assert partition is not None
        piece = partition.log.read(0, 1 << 20)
        assert piece is not None
        headers = list(iter_headers(piece.read_bytes()))
        data = [h for h in headers if not h.is_control]
        assert len(data) == 2
        for h in data:
            assert h.is_transactional
            assert (h.producer_id, h.producer_epoch, h.base_sequence) == (PID, EPOCH, 0)
        assert [h.is_control for h in headers] == [False, True, False]


def test_a_restart_replays_markers_and_keeps_open_commits_pending(tmp_path: Path) -> None:
    with broker(tmp_path) as runtime:
        plain = CommitRequest("g", -1, "", None, (OffsetCommit("t", 1, 100),))
        result = runtime.perform(lambda coordinator: coordinator.offsets.commit_offsets(plain))
        assert (result.response, result.error) == ({("t", 1): ErrorCode.none}, ErrorCode.none)
        txn_commit(runtime, 5)
        marker(runtime, commit=True)
        assert offset_of(runtime) == 5
        txn_commit(runtime, 6)
        marker(runtime, commit=False)
        assert offset_of(runtime) == 5
        txn_commit(runtime, 7)
        txn_commit(runtime, 50, ("t", 1))
        assert offset_of(runtime) == 5

    with broker(tmp_path) as runtime:
        assert offset_of(runtime) == 5
        assert offset_of(runtime, ("t", 1)) == 100
        unstable = runtime.shard.offsets.fetch_offsets("g", None, require_stable=True).unstable
        assert unstable == {TP, ("t", 1)}
        # The transaction still open at the stop ends after the restart.
        marker(runtime, commit=True)
        assert offset_of(runtime) == 7
        assert offset_of(runtime, ("t", 1)) == 50

    with broker(tmp_path) as runtime:
        assert offset_of(runtime) == 7
        assert offset_of(runtime, ("t", 1)) == 50
        assert runtime.shard.offsets.fetch_offsets("g", None, require_stable=True).unstable == set()
