"""Short fault campaigns against a real three-broker cluster (ZooKeeper and ``odradek serve``
processes, each broker in a network namespace of its own), with fixed seeds whose plans hold
every kind of fault: the checker must find no violation, and faults must really have been
injected and records acknowledged and read. Needs root, ``ip``, ``iptables-legacy`` and Debian's
ZooKeeper (``scripts/setup.sh --test``).

Also: what a campaign makes is removed when it is interrupted."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from odradek.cli.torture import missing_requirements
from odradek.torture import schedule
from odradek.torture.network import Network
from odradek.torture.runner import Campaign, Options, run_campaign

pytestmark = pytest.mark.slow

DURATION_S = 75
SEEDS = (12, 20)  # each plan holds all eight kinds of fault


@pytest.fixture(autouse=True)
def requirements() -> None:
    missing = missing_requirements()
    assert not missing, f"a campaign cannot run here: {missing} (scripts/setup.sh --test)"


@pytest.mark.parametrize("seed", SEEDS)
def test_the_seeds_plans_hold_every_kind_of_fault(seed: int) -> None:
    kinds = {fault.kind for fault in schedule.plan(seed, DURATION_S, 3)}
    assert kinds == set(schedule.KINDS)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_short_campaign_finds_no_violation(seed: int, tmp_path: Path) -> None:
    out = io.StringIO()
    history = tmp_path / "history.jsonl"  # kept with the brokers' logs for a failure's diagnosis
    try:
        report = run_campaign(Options(duration_s=DURATION_S, seed=seed, history_path=history), out)
    finally:
        print(out.getvalue())
    print(report.describe())
    print(f"history and brokers' logs: {history}*")
    assert report.violations == [], report.describe()
    assert report.summary is not None
    assert report.summary.acknowledged > 0
    assert report.summary.read > 0
    assert report.summary.commits_acknowledged > 0
    assert report.summary.transactions_committed > 0
    assert report.summary.transactions_aborted > 0
    assert sum(report.injected.values()) >= len(schedule.KINDS) - 1, report.injected
    assert Network(range(1, 4)).leftovers() == []
    assert history.exists()
    for broker in (1, 2, 3):
        assert "listening on" in (tmp_path / f"history.jsonl.broker-{broker}.log").read_text()


class _InterruptedCampaign(Campaign):
    """Ctrl-C once the clients run."""

    def _nemesis(self) -> None:
        assert self.clients is not None and self.clients.alive()
        raise KeyboardInterrupt


def test_an_interrupted_campaign_removes_what_it_made() -> None:
    campaign = _InterruptedCampaign(Options(duration_s=30, seed=1), io.StringIO())
    with pytest.raises(KeyboardInterrupt):
        campaign.run()
    assert campaign.network.leftovers() == []
    assert not campaign.directory.exists()
    assert campaign.cluster is not None and campaign.zookeeper is not None
    processes = [b.process for b in campaign.cluster.brokers.values()]
    processes += [campaign.zookeeper.process]
    assert all(p is None or p.poll() is not None for p in processes)
    assert campaign.clients is not None and not campaign.clients.alive()
    assert os.getpid()  # the test's own process is untouched
