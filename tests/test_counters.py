"""The plain counters the hot path bumps: histogram buckets, per-topic and per-API counts."""

from __future__ import annotations

import asyncio

from odradek.counters import (
    BrokerCounters,
    Histogram,
    RequestCounters,
    RequestTiming,
    current_request,
    remote_wait,
)


def test_an_observation_on_a_bound_counts_in_that_bucket() -> None:
    histogram = Histogram((0.001, 0.01))
    histogram.observe_ns(1_000_000)  # exactly 1 ms: le="0.001", as Prometheus' buckets are
    histogram.observe_ns(1_000_001)
    histogram.observe_ns(50_000_000)  # above every bound
    assert histogram.counts == [1, 1, 1]
    assert histogram.sum_ns == 52_000_001


def test_a_copy_does_not_move_with_the_original() -> None:
    histogram = Histogram((0.001,))
    histogram.observe_ns(10)
    copy = histogram.copy()
    histogram.observe_ns(10)
    assert copy.counts == [1, 0]
    assert histogram.counts == [2, 0]


def test_requests_count_per_api_key_with_the_parts_of_their_time_and_errors() -> None:
    requests = RequestCounters()
    requests.handled(0, queue_ns=10_000, local_ns=200_000)
    requests.handled(0, queue_ns=0, local_ns=100_000, remote_ns=5_000_000, send_ns=1_000)
    requests.error(0, 7)
    requests.error(0, 7)
    assert requests.requests[0] == 2
    assert requests.requests[1] == 0
    times = requests.times[0]
    assert times is not None
    assert sum(times.total.counts) == 2 and times.total.sum_ns == 5_311_000
    assert (times.queue.sum_ns, times.local.sum_ns) == (10_000, 300_000)
    assert (times.remote.sum_ns, times.send.sum_ns) == (5_000_000, 1_000)
    # Every request counts in every part, a part it did not spend time in as 0.
    assert sum(times.remote.counts) == 2 and times.remote.counts[0] == 1
    assert requests.times[1] is None
    assert requests.errors == {(0, 7): 2}


def test_a_requests_remote_time_is_the_union_of_its_waits() -> None:
    timing = RequestTiming()
    timing.park_began(100)
    timing.park_began(150)  # a second wait while the first goes on: counted once
    timing.park_ended(300)
    timing.park_ended(400)
    timing.park_began(1_000)
    timing.park_ended(1_050)
    assert timing.remote_ns == 350
    timing.reset()
    assert timing.remote_ns == 0


def test_connections_are_counted_per_listener() -> None:
    counters = BrokerCounters()
    counters.connection_opened("PLAINTEXT")
    counters.connection_opened("SASL_SSL")
    counters.connection_opened("PLAINTEXT")
    counters.connection_ended("PLAINTEXT")
    assert counters.connections_created == {"PLAINTEXT": 2, "SASL_SSL": 1}
    assert counters.connections_closed == {"PLAINTEXT": 1}


def test_a_deleted_topic_loses_its_counters() -> None:
    counters = BrokerCounters()
    counters.topic("a").bytes_in += 10
    assert counters.topic("a").bytes_in == 10
    counters.topic_deleted("a")
    assert counters.topic("a").bytes_in == 0


def test_a_wait_outside_the_purgatory_can_count_as_remote_time() -> None:
    """remote_wait: a JoinGroup held until its rebalance completes is RemoteTime (as Kafka's
    purgatory counts it); without metrics (no current request) it is a plain await."""

    async def held(timing: RequestTiming | None) -> str:
        current_request.set(timing)
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, "answer")
        return await remote_wait(future)

    timing = RequestTiming()
    assert asyncio.run(held(timing)) == "answer"
    assert timing.remote_ns > 0
    assert asyncio.run(held(None)) == "answer"
