"""The replica manager's delayed operations on real logs, with a manual clock and no sockets:
when a DelayedProduce and a DelayedFetch complete, what they answer, and that a fetch's wakes
compare offsets while its segments are read once, at completion."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.cluster.replication.delayed import (
    DelayedFetch,
    DelayedProduce,
    FetchParams,
    FetchResult,
)
from odradek.cluster.replication.partition import FetchIsolation, Partition
from odradek.cluster.replication.purgatory import Purgatory
from odradek.cluster.replication.replica_manager import (
    ProduceEntry,
    single_broker_replica_manager,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, encode_batch
from odradek.server.fetch_sessions import SessionPartition
from odradek.storage import LogConfig, PartitionLog

NOW = 1_700_000_000_000
LEADER, FOLLOWER = 1, 2


class Hosted:
    """Partitions ``t-0``, ``t-1``, … led here on real logs, as the topic manager hosts them."""

    def __init__(self, directory: Path, clock: ManualClock) -> None:
        self.directory = directory
        self.clock = clock
        self.partitions: dict[tuple[str, int], Partition] = {}

    def add(self, index: int, *, follower: bool = False) -> Partition:
        log = PartitionLog.open(self.directory / f"t-{index}", LogConfig(), self.clock)
        partition = Partition("t", index, log, local_id=LEADER, clock=self.clock)
        replicas = (LEADER, FOLLOWER) if follower else (LEADER,)
        partition.make_leader(0, replicas, replicas, 0)
        self.partitions[("t", index)] = partition
        return partition

    def __call__(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def close(self) -> None:
        for partition in self.partitions.values():
            partition.log.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def hosted(tmp_path: Path, clock: ManualClock) -> Iterator[Hosted]:
    made = Hosted(tmp_path, clock)
    yield made
    made.close()


def batch(size: int = 10, *, transactional: bool = False) -> bytes:
    if transactional:
        return encode_batch(
            [NewRecord(b"k", b"v" * size)],
            now_ms=NOW,
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
    return encode_batch([NewRecord(b"k", b"v" * size)], now_ms=NOW)


def params(min_bytes: int = 1, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK) -> Any:
    return FetchParams(-1, isolation, max_wait_ms=500, min_bytes=min_bytes, max_bytes=1 << 20)


def fetch(hosted: Hosted, indexes: list[int], **kwargs: Any) -> tuple[DelayedFetch, list[int]]:
    """A DelayedFetch from offset 0 of each partition, and the partitions it reads, in order."""
    wanted = [(("t", i), SessionPartition(0, 1 << 20)) for i in indexes]
    reads: list[int] = []

    def counting(topic: str, index: int) -> Partition | None:
        partition = hosted(topic, index)
        if partition is not None and not hasattr(partition, "_counted"):
            read = partition.read

            def counted(*args: Any, **kw: Any) -> Any:
                reads.append(index)
                return read(*args, **kw)

            partition.read = counted  # type: ignore[method-assign]
            partition._counted = True  # type: ignore[attr-defined]
        return partition

    return DelayedFetch(kwargs.pop("params", params()), wanted, counting, **kwargs), reads


def sizes(result: FetchResult) -> dict[int, int]:
    return {p.index: p.records_size for t in result.topics for p in t.partitions}


# -- DelayedProduce -------------------------------------------------------------------------------


def test_a_delayed_produce_completes_once_the_high_watermark_passes_every_append(
    hosted: Hosted,
) -> None:
    alone, replicated = hosted.add(0), hosted.add(1, follower=True)
    waits = []
    for partition in (alone, replicated):
        info = partition.append_as_leader(batch(), -1, NOW)
        waits.append((partition, info.last_offset + 1))
    delayed = DelayedProduce(waits)
    assert not delayed.try_complete()  # the follower does not have t-1's record yet
    replicated.follower_fetched(FOLLOWER, 1)
    assert delayed.try_complete()
    assert delayed.outcomes() == [ErrorCode.none, ErrorCode.none]


def test_a_delayed_produce_that_runs_out_of_time_answers_request_timed_out(
    hosted: Hosted,
) -> None:
    partition = hosted.add(0, follower=True)
    info = partition.append_as_leader(batch(), -1, NOW)
    delayed = DelayedProduce([(partition, info.last_offset + 1)])
    assert not delayed.try_complete()
    assert delayed.outcomes() == [ErrorCode.request_timed_out]


def test_a_delayed_produce_ends_when_leadership_moves(hosted: Hosted) -> None:
    partition = hosted.add(0, follower=True)
    info = partition.append_as_leader(batch(), -1, NOW)
    delayed = DelayedProduce([(partition, info.last_offset + 1)])
    partition.make_follower(FOLLOWER, 1, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    assert delayed.try_complete()
    assert delayed.outcomes() == [ErrorCode.not_leader_or_follower]


# -- DelayedFetch ---------------------------------------------------------------------------------


def test_a_wake_that_moved_nothing_reads_nothing(hosted: Hosted) -> None:
    p0 = hosted.add(0)
    hosted.add(1)
    p0.append_as_leader(batch(), 1, NOW)
    delayed, reads = fetch(hosted, [0, 1], params=params(min_bytes=10_000))
    first = delayed.read()
    assert reads == [0]  # t-1 is at its end: nothing to read there
    assert not delayed.satisfied(first)
    for _ in range(3):
        assert not delayed.try_complete()
    assert reads == [0]


def test_appends_are_counted_without_reading_and_read_once_at_completion(
    hosted: Hosted,
) -> None:
    p0, p1 = hosted.add(0), hosted.add(1)
    delayed, reads = fetch(hosted, [0, 1], params=params(min_bytes=300))
    assert sizes(delayed.read()) == {0: 0, 1: 0}
    p0.append_as_leader(batch(100), 1, NOW)
    assert not delayed.try_complete()  # ~170 bytes: below min.bytes
    p1.append_as_leader(batch(100), 1, NOW)
    assert delayed.try_complete()  # both partitions' bytes together
    assert reads == []
    result = delayed.read()
    assert reads == [0, 1]
    assert delayed.satisfied(result)
    assert sizes(result) == {0: len(batch(100)), 1: len(batch(100))}


def test_a_consumer_waits_for_the_high_watermark_not_the_log_end(hosted: Hosted) -> None:
    partition = hosted.add(0, follower=True)
    delayed, _ = fetch(hosted, [0])
    delayed.read()
    partition.append_as_leader(batch(), 1, NOW)
    assert not delayed.try_complete()  # appended, not yet committed
    partition.follower_fetched(FOLLOWER, 1)
    assert delayed.try_complete()
    assert sizes(delayed.read()) == {0: len(batch())}


def test_a_follower_reads_to_the_log_end(hosted: Hosted) -> None:
    partition = hosted.add(0, follower=True)
    follower = FetchParams(FOLLOWER, FetchIsolation.LOG_END, 500, 1, 1 << 20)
    delayed, _ = fetch(hosted, [0], params=follower)
    delayed.read()
    partition.append_as_leader(batch(), 1, NOW)
    assert delayed.try_complete()


def test_a_read_committed_consumer_waits_for_the_last_stable_offset(hosted: Hosted) -> None:
    partition = hosted.add(0)
    committed = params(isolation=FetchIsolation.TXN_COMMITTED)
    delayed, _ = fetch(hosted, [0], params=committed)
    delayed.read()
    partition.append_as_leader(batch(transactional=True), 1, NOW)
    assert partition.high_watermark == 1 and partition.last_stable_offset == 0
    assert not delayed.try_complete()
    partition.write_txn_marker(7, 0, 0, commit=True, now_ms=NOW)
    assert delayed.try_complete()
    assert sizes(delayed.read())[0] > 0


def test_leadership_lost_ends_the_wait_with_its_error(hosted: Hosted) -> None:
    partition = hosted.add(0, follower=True)
    delayed, reads = fetch(hosted, [0])
    delayed.read()
    partition.make_follower(FOLLOWER, 1, (LEADER, FOLLOWER), (LEADER, FOLLOWER))
    assert delayed.try_complete()
    (topic,) = delayed.read().topics
    assert [p.error_code for p in topic.partitions] == [ErrorCode.not_leader_or_follower]
    assert reads == []


def test_records_from_before_the_log_was_opened_are_counted_by_reading(
    hosted: Hosted, clock: ManualClock
) -> None:
    partition = hosted.add(0)
    partition.append_as_leader(batch(), 1, NOW)
    # The log opened again (a broker restart): it knows where no batch of it starts.
    partition.log.close()
    log = PartitionLog.open(hosted.directory / "t-0", LogConfig(), clock)
    again = Partition("t", 0, log, local_id=LEADER, clock=clock)
    again.make_leader(1, (LEADER,), (LEADER,), 0)
    hosted.partitions[("t", 0)] = again
    delayed, reads = fetch(hosted, [0], params=params(min_bytes=10_000))
    delayed.read()
    again.append_as_leader(batch(), 1, NOW)
    assert not delayed.try_complete()
    assert reads == [0, 0]  # the first pass, and the count from offset 0


# -- through the replica manager and its purgatory -------------------------------------------------


def test_append_records_answers_acks_all_with_request_timed_out_once_its_time_is_up(
    hosted: Hosted, tmp_path: Path, clock: ManualClock
) -> None:
    hosted.add(0, follower=True)
    manager = single_broker_replica_manager(
        LEADER, LocalMetadataStore(tmp_path), hosted, lambda: None, clock, Purgatory()
    )
    entries = [ProduceEntry("t", 0, batch()), ProduceEntry("t", 9, batch())]
    (waited, unknown) = asyncio.run(manager.append_records(entries, -1, 0))
    assert waited.error == ErrorCode.request_timed_out
    assert waited.appended is not None and waited.appended.first_offset == 0  # the log has it
    assert unknown.error == ErrorCode.unknown_topic_or_partition
    (refused,) = asyncio.run(manager.append_records(entries[:1], 2, 0))
    assert refused.error == ErrorCode.invalid_required_acks


def test_fetch_records_completes_a_parked_fetch_when_records_arrive(
    hosted: Hosted, tmp_path: Path, clock: ManualClock
) -> None:
    partition = hosted.add(0)
    manager = single_broker_replica_manager(
        LEADER, LocalMetadataStore(tmp_path), hosted, lambda: None, clock, Purgatory()
    )
    wanted = [(("t", 0), SessionPartition(0, 1 << 20))]
    long_poll = FetchParams(-1, FetchIsolation.HIGH_WATERMARK, 60_000, 1, 1 << 20)

    async def scenario() -> FetchResult:
        parked = asyncio.ensure_future(manager.fetch_records(long_poll, wanted))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not parked.done()
        assert manager.purgatory.parked == 1
        partition.append_as_leader(batch(), 1, NOW)
        return await asyncio.wait_for(parked, 10)

    assert sizes(asyncio.run(scenario())) == {0: len(batch())}
    assert manager.purgatory.parked == 0
