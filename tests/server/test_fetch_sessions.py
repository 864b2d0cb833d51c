"""Fetch sessions (KIP-227): the cache's bookkeeping with a manual clock, then incremental
fetches over a real connection — the second response holds only what changed."""

from __future__ import annotations

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.server.fetch_sessions import FetchSessionCache, SessionPartition, changed
from odradek.testing import running_broker
from tests.server.conftest import FETCH, KafkaConnection, batch_of, unique_topic

A, B, C = ("t", 0), ("t", 1), ("t", 2)


def part(offset: int) -> SessionPartition:
    return SessionPartition(offset, 1 << 20)


def test_a_full_request_opens_a_session_and_increments_follow_it() -> None:
    cache = FetchSessionCache(ManualClock(0))
    full = cache.resolve(0, 0, [(A, part(0)), (B, part(5))], [])
    assert full.session_id != 0 and not full.incremental and len(cache) == 1
    step = cache.resolve(full.session_id, 1, [(B, part(7)), (C, part(0))], [A])
    assert step.incremental and step.error == ErrorCode.none
    assert [(k, p.fetch_offset) for k, p in step.partitions] == [(B, 7), (C, 0)]
    assert cache.partitions_cached() == 2
    # The epoch must be the next one; a stale or repeated one is refused, as is an unknown id.
    assert cache.resolve(full.session_id, 1, [], []).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.resolve(12345, 1, [], []).error == ErrorCode.fetch_session_id_not_found
    assert cache.resolve(full.session_id, 2, [], []).error == ErrorCode.none
    # Epoch -1 closes it.
    assert cache.resolve(full.session_id, -1, [(A, part(0))], []).session_id == 0
    assert len(cache) == 0
    assert (cache.full_requests, cache.incremental_requests) == (1, 4)


def test_a_full_cache_evicts_only_idle_sessions() -> None:
    clock = ManualClock(0)
    cache = FetchSessionCache(clock, slots=1, eviction_ms=1000)
    first = cache.resolve(0, 0, [(A, part(0))], [])
    clock.advance(999)
    assert cache.resolve(0, 0, [(B, part(0))], []).session_id == 0  # no room: sessionless
    clock.advance(1)
    second = cache.resolve(0, 0, [(B, part(0))], [])
    assert second.session_id not in (0, first.session_id) and cache.evictions == 1
    assert cache.resolve(first.session_id, 1, [], []).error == ErrorCode.fetch_session_id_not_found
    assert FetchSessionCache(clock, slots=0).resolve(0, 0, [(A, part(0))], []).session_id == 0


def test_only_changes_are_included() -> None:
    p = part(0)
    assert changed(p, 10, 10, 0, False, ErrorCode.none)  # never sent
    assert not changed(p, 10, 10, 0, False, ErrorCode.none)
    assert changed(p, 11, 10, 0, False, ErrorCode.none)
    assert changed(p, 11, 10, 0, True, ErrorCode.none)  # records
    assert changed(p, 11, 10, 0, False, ErrorCode.offset_out_of_range)


def _fetch(
    client: KafkaConnection, topic: str, session_id: int, epoch: int, offsets: dict[int, int]
):  # type: ignore[no-untyped-def]
    return client.request(
        FETCH,
        12,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": o,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p, o in offsets.items()
                ],
            }
        ]
        if offsets
        else [],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_incremental_fetches_over_a_connection() -> None:
    with running_broker() as broker, KafkaConnection(broker.bootstrap) as client:
        topic = unique_topic("sessions")
        client.create_topic(topic, partitions=3)
        for p in range(3):
            client.produce(topic, p, batch_of(b"a"))
        full = _fetch(client, topic, 0, 0, {0: 0, 1: 0, 2: 0})
        assert full.error_code == ErrorCode.none and full.session_id != 0
        assert sorted(p.partition_index for t in full.responses for p in t.partitions) == [0, 1, 2]
        # The fetcher moved its offsets past what it read; nothing else changed: no partition.
        quiet = _fetch(client, topic, full.session_id, 1, {0: 1, 1: 1, 2: 1})
        assert (quiet.error_code, quiet.session_id, list(quiet.responses)) == (
            ErrorCode.none,
            full.session_id,
            [],
        )
        client.produce(topic, 1, batch_of(b"b"))
        # An incremental fetch naming no partition reads the session's.
        moved = _fetch(client, topic, full.session_id, 2, {})
        (only,) = [
            (p.partition_index, p.high_watermark) for t in moved.responses for p in t.partitions
        ]
        assert only == (1, 2)  # the partition with a record; the others did not change
        stale = _fetch(client, topic, full.session_id, 2, {})  # epoch 3 was due
        assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
