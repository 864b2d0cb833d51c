"""Replication throttling's quota and throttled-replica configs, on a manual clock."""

from __future__ import annotations

from odradek.clock import ManualClock
from odradek.cluster.replication.quota import (
    ReplicationQuota,
    ReplicationQuotas,
    ThrottledPartitions,
)


def test_the_rate_is_bytes_over_the_window_at_least_all_but_one_sample_long() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock, 1000, samples=11, sample_ms=1000)
    quota.record(5000)
    # A burst right after a quiet spell is spread over 10 samples: 500 B/s, within 1000 B/s.
    assert quota.rate() == 500
    assert not quota.is_exceeded()
    quota.record(6000)
    assert quota.rate() == 1100
    assert quota.is_exceeded()


def test_old_samples_leave_the_window_and_the_quota_recovers() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock, 1000, samples=3, sample_ms=1000)
    quota.record(3000)
    assert quota.is_exceeded()  # 3000 B over 2 s
    clock.advance(1000)
    quota.record(100)
    assert quota.rate() == 3100 / 2
    clock.advance(3000)  # the first sample is now older than the 3 s window
    assert quota.rate() == 100 / 3
    assert not quota.is_exceeded()


def test_bytes_recorded_within_one_sample_add_up() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock, 10, samples=2, sample_ms=1000)
    for _ in range(4):
        quota.record(5)
        clock.advance(200)
    # One sample, 0.8 s old, short of the one full sample Kafka's Rate counts: 0.8 + 1 s.
    assert quota.rate() == 20 / 1.8
    assert quota.is_exceeded()


def test_an_unlimited_quota_is_never_exceeded() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(clock)
    quota.record(10**12)
    assert not quota.limited and not quota.is_exceeded()


def test_throttled_replicas_count_on_the_broker_they_name() -> None:
    assert ThrottledPartitions.parse("0:1,0:2,1:2,junk,2:x", 2) == ThrottledPartitions(
        partitions=frozenset({0, 1})
    )
    assert 1 not in ThrottledPartitions.parse("0:1,0:2,1:2", 1)
    assert 7 in ThrottledPartitions.parse("*", 3)
    assert 0 not in ThrottledPartitions.parse("", 3)
    assert 0 in ThrottledPartitions.parse(["0:3"], 3)


def test_only_out_of_sync_throttled_replicas_are_held_back_and_only_past_the_rate() -> None:
    clock = ManualClock()
    quotas = ReplicationQuotas(2, clock, samples=2, sample_ms=1000)
    quotas.set_rates({"leader.replication.throttled.rate": "100"})
    quotas.set_topics(
        {
            "t": {
                "leader.replication.throttled.replicas": "0:1,0:2",
                "follower.replication.throttled.replicas": "0:3",
            },
            "u": {},
        }
    )
    assert quotas.leader_throttled("t", 0) and not quotas.leader_throttled("t", 1)
    assert not quotas.follower_throttled("t", 0)  # 0:3 names broker 3
    assert not quotas.leader_holds_back("t", 0, follower_in_sync=False)  # nothing sent yet
    quotas.leader.record(1000)
    assert quotas.leader_holds_back("t", 0, follower_in_sync=False)
    assert not quotas.leader_holds_back("t", 0, follower_in_sync=True)
    assert not quotas.leader_holds_back("u", 0, follower_in_sync=False)
    # The follower quota is unlimited here.
    assert not quotas.follower_holds_back("t", 0, in_sync=False)
    quotas.set_rates({})
    assert not quotas.leader_holds_back("t", 0, follower_in_sync=False)


def test_the_follower_quota_holds_back_its_throttled_partitions() -> None:
    clock = ManualClock()
    quotas = ReplicationQuotas(3, clock, samples=2, sample_ms=1000)
    quotas.set_rates({"follower.replication.throttled.rate": "1000"})
    quotas.set_topics({"t": {"follower.replication.throttled.replicas": "0:3"}})
    quotas.follower.record(5000)
    assert quotas.follower_holds_back("t", 0, in_sync=False)
    assert not quotas.follower_holds_back("t", 1, in_sync=False)
    clock.advance(10_000)
    assert not quotas.follower_holds_back("t", 0, in_sync=False)


def test_a_rate_that_is_not_a_number_leaves_that_side_unlimited() -> None:
    quotas = ReplicationQuotas(1, ManualClock())
    quotas.set_rates(
        {"leader.replication.throttled.rate": "fast", "follower.replication.throttled.rate": "7"}
    )
    assert quotas.follower.bytes_per_second == 7
    assert quotas.leader.bytes_per_second > 2**62
