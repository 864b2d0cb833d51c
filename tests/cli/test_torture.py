"""``odradek torture``'s command line: the plan it prints is the seed's (the campaign itself is
tested in tests/torture/test_campaign.py)."""

from __future__ import annotations

from odradek.torture import schedule

from .support import odradek


def test_the_plan_is_the_seeds() -> None:
    result = odradek("torture", "--plan", "--seed", "12", "--duration", "75")
    expected = [fault.describe() for fault in schedule.plan(12, 75, 3)]
    assert result.stdout.splitlines() == expected
    assert len(expected) > 3


def test_a_plan_for_other_brokers() -> None:
    result = odradek("torture", "--plan", "--seed", "5", "--duration", "600", "--brokers", "5")
    assert result.stdout.splitlines() == [f.describe() for f in schedule.plan(5, 600, 5)]


def test_torture_is_listed_among_the_commands() -> None:
    assert "torture" in odradek("--help").stdout


def test_broker_settings_for_the_campaign_are_taken() -> None:
    from odradek.cli.main import build_parser

    args = build_parser().parse_args(
        ["torture", "-o", "min.insync.replicas=1", "-o", "unclean.leader.election.enable=true"]
    )
    assert args.override == ["min.insync.replicas=1", "unclean.leader.election.enable=true"]


def test_a_plan_of_the_kinds_asked_for() -> None:
    result = odradek(
        "torture", "--plan", "--seed", "5", "--duration", "300", "--faults", "slow,full-disk"
    )
    kinds = (schedule.SLOW, schedule.FULL_DISK)
    assert result.stdout.splitlines() == [f.describe() for f in schedule.plan(5, 300, 3, kinds)]


def test_an_unknown_kind_of_fault_is_refused() -> None:
    result = odradek("torture", "--plan", "--faults", "kill,flood", check=False)
    assert result.returncode == 2
    assert "flood" in result.stderr
