"""Which quota applies to a client, and the throttle time, by an injected clock."""

from __future__ import annotations

from odradek.clock import ManualClock
from odradek.quotas.entities import CLIENT_ID, USER, entity_from_path, entity_path
from odradek.quotas.manager import ClientQuotaManager

RATE = "producer_byte_rate"


def manager(clock: ManualClock, configs: dict[str, dict[str, str]]) -> ClientQuotaManager:
    quotas = ClientQuotaManager(clock, RATE, samples=2, sample_ms=1000)
    quotas.update({entity_from_path(path): values for path, values in configs.items()})
    return quotas


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    quotas = manager(
        ManualClock(),
        {
            "users/alice/clients/app": {RATE: "1"},
            "users/alice/clients/<default>": {RATE: "2"},
            "users/alice": {RATE: "3"},
            "users/<default>/clients/app": {RATE: "4"},
            "users/<default>/clients/<default>": {RATE: "5"},
            "users/<default>": {RATE: "6"},
            "clients/app": {RATE: "7"},
            "clients/<default>": {RATE: "8", "consumer_byte_rate": "99"},
        },
    )
    assert quotas.quota_for("alice", "app") == (1.0, ("alice", "app"))
    assert quotas.quota_for("alice", "other") == (2.0, ("alice", "other"))
    assert quotas.quota_for("bob", "app") == (4.0, ("bob", "app"))
    assert quotas.quota_for("bob", "other") == (5.0, ("bob", "other"))
    only_users = manager(ManualClock(), {"users/alice": {RATE: "3"}, "clients/app": {RATE: "7"}})
    # A user's quota is shared by all its clients; a client's by that id across users.
    assert only_users.quota_for("alice", "app") == (3.0, ("alice", ""))
    assert only_users.quota_for("bob", "app") == (7.0, ("", "app"))
    assert only_users.quota_for("bob", "other") is None


def test_past_the_quota_the_throttle_brings_the_rate_back() -> None:
    clock = ManualClock()
    quotas = manager(clock, {"users/alice": {RATE: "1000"}})
    assert quotas.record("alice", "a", 1000) == 0  # 1000 B over a one-second span
    assert quotas.record("alice", "b", 1000) == 1000  # the user's clients share it
    assert quotas.record("bob", "a", 10**9) == 0  # no quota for bob
    clock.advance(1000)
    assert quotas.rate("alice", "a") == 2000.0  # a full sample's span now: no padding
    assert quotas.record("alice", "a", 1) > 0
    clock.advance(3000)  # the samples have left the window
    assert quotas.rate("alice", "b") == 0.0
    assert quotas.record("alice", "b", 500) == 0


def test_the_throttle_is_at_most_the_window() -> None:
    quotas = manager(ManualClock(), {"clients/<default>": {RATE: "1"}})
    assert quotas.record("", "flood", 10**9) == 2000


def test_entity_paths_round_trip_with_sanitized_names() -> None:
    for entity in (
        ((USER, "CN=alice,O=example/x"),),
        ((USER, None), (CLIENT_ID, "my app")),
        ((CLIENT_ID, None),),
    ):
        assert entity_from_path(entity_path(entity)) == entity
    assert entity_path(((USER, None), (CLIENT_ID, "app"))) == "users/<default>/clients/app"
