"""The plain counters the hot path bumps: histogram buckets, per-topic and per-API counts."""

from __future__ import annotations

from odradek.counters import BrokerCounters, Histogram, RequestCounters


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


def test_requests_count_per_api_key_with_their_times_and_errors() -> None:
    requests = RequestCounters()
    requests.handled(0, 200_000)
    requests.handled(0, 300_000)
    requests.parked(0, 5_000_000)
    requests.error(0, 7)
    requests.error(0, 7)
    assert requests.requests[0] == 2
    assert requests.requests[1] == 0
    total = requests.total_time[0]
    assert total is not None and sum(total.counts) == 2 and total.sum_ns == 500_000
    remote = requests.remote_time[0]
    assert remote is not None and sum(remote.counts) == 1
    assert requests.total_time[1] is None
    assert requests.errors == {(0, 7): 2}


def test_a_deleted_topic_loses_its_counters() -> None:
    counters = BrokerCounters()
    counters.topic("a").bytes_in += 10
    assert counters.topic("a").bytes_in == 10
    counters.topic_deleted("a")
    assert counters.topic("a").bytes_in == 0
