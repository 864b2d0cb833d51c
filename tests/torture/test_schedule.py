"""The nemesis's plan is a pure function of the seed."""

from __future__ import annotations

import itertools

import pytest

from odradek.torture import schedule


def test_one_seed_gives_one_plan() -> None:
    assert schedule.plan(7, 600, 3) == schedule.plan(7, 600, 3)


def test_other_seeds_give_other_plans() -> None:
    plans = {tuple(schedule.plan(seed, 600, 3)) for seed in range(10)}
    assert len(plans) == 10


def test_faults_fit_the_campaign_one_at_a_time() -> None:
    for seed in range(20):
        faults = schedule.plan(seed, 300, 3)
        assert faults[0].at >= schedule.WARMUP_S
        for fault, following in itertools.pairwise(faults):
            assert following.at >= fault.at + fault.duration + schedule.GAP_S[0] - 0.1
        last = faults[-1]
        assert last.at + last.duration <= 300 - schedule.COOLDOWN_S


def test_every_kind_comes_in_each_round() -> None:
    faults = schedule.plan(3, 3600, 3)
    kinds = [f.kind for f in faults]
    rounds = len(schedule.KINDS)
    assert sorted(kinds[:rounds]) == sorted(schedule.KINDS)
    assert sorted(kinds[rounds : 2 * rounds]) == sorted(schedule.KINDS)


def test_targets_are_brokers_of_the_cluster() -> None:
    for fault in schedule.plan(11, 3600, 5):
        assert set(fault.brokers) <= {1, 2, 3, 4, 5}
        if fault.kind == schedule.PAUSE_ZOOKEEPER:
            assert fault.brokers == ()
        elif fault.kind == schedule.SPLIT:
            assert len(fault.brokers) == 2  # a minority of five
        else:
            assert len(fault.brokers) == 1
        if fault.kind == schedule.LOSSY:
            assert schedule.LOSS_PROBABILITY[0] <= fault.probability <= schedule.LOSS_PROBABILITY[1]
        assert 0 <= fault.pick < 1


def test_one_broker_has_no_partitions_or_followers_to_fault() -> None:
    kinds = {f.kind for f in schedule.plan(1, 3600, 1)}
    assert kinds == set(schedule.KINDS) - {schedule.ISOLATE, schedule.SPLIT, schedule.CORRUPT}


def test_too_short_a_campaign_has_no_faults() -> None:
    assert schedule.plan(1, schedule.WARMUP_S + schedule.COOLDOWN_S, 3) == []


def test_no_brokers_is_refused() -> None:
    with pytest.raises(ValueError):
        schedule.plan(1, 60, 0)


def test_a_slow_link_has_a_delay_and_only_it() -> None:
    faults = schedule.plan(4, 3600, 3)
    slow = [f for f in faults if f.kind == schedule.SLOW]
    assert slow
    for fault in faults:
        if fault.kind == schedule.SLOW:
            assert schedule.DELAY_MS[0] <= fault.delay_ms <= schedule.DELAY_MS[1]
            assert f"delay={fault.delay_ms}ms" in fault.describe()
        else:
            assert fault.delay_ms == 0


def test_a_full_disk_is_one_brokers() -> None:
    full = [f for f in schedule.plan(4, 3600, 3) if f.kind == schedule.FULL_DISK]
    assert full
    assert all(len(f.brokers) == 1 for f in full)


def test_only_the_kinds_asked_for_are_dealt() -> None:
    kinds = (schedule.SLOW, schedule.FULL_DISK)
    faults = schedule.plan(5, 600, 3, kinds)
    assert {f.kind for f in faults} == set(kinds)


def test_the_order_kinds_are_asked_in_does_not_change_the_plan() -> None:
    asked = (schedule.SLOW, schedule.KILL, schedule.FULL_DISK)
    assert schedule.plan(6, 600, 3, asked) == schedule.plan(6, 600, 3, reversed(asked))


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="flood"):
        schedule.plan(1, 60, 3, ["flood"])


def test_kinds_are_read_from_a_list() -> None:
    assert schedule.parse_kinds("slow,kill") == (schedule.KILL, schedule.SLOW)
    assert schedule.parse_kinds("all") == schedule.KINDS
    without = tuple(k for k in schedule.KINDS if k != schedule.FULL_DISK)
    assert schedule.parse_kinds("all,-full-disk") == without
    assert schedule.parse_kinds("-full-disk") == without
    with pytest.raises(ValueError, match="unknown"):
        schedule.parse_kinds("kill,flood")
    with pytest.raises(ValueError, match="no kind"):
        schedule.parse_kinds("kill,-kill")
