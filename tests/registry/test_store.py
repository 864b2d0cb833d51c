"""The Kafka-backed store against a real broker: replay, and two stores (as two brokers'
registries) that register at once."""

from __future__ import annotations

import pytest

from odradek.clock import ManualClock
from odradek.registry.errors import RegistryError
from odradek.registry.state import SchemaRequest
from odradek.registry.store import SchemaStore
from odradek.testing import RunningBroker

INT = SchemaRequest('"int"')
LONG = SchemaRequest('"long"')


def test_a_fresh_store_replays_what_others_wrote(odradek_broker: RunningBroker) -> None:
    writer = SchemaStore(odradek_broker.bootstrap)
    try:
        assert writer.register("a", INT).id == 1
        assert writer.register("b", LONG).id == 2
        assert writer.register("a", INT).id == 1  # already there: nothing written
        writer.change(lambda s: s.plan_config("a", "NONE"))
    finally:
        writer.close()
    reader = SchemaStore(odradek_broker.bootstrap)
    try:
        assert reader.read(lambda s: s.subject_names()) == ["a", "b"]
        assert reader.read(lambda s: s.schema_by_id(2)).schema == '"long"'
        assert reader.read(lambda s: s.compatibility("a")) == "NONE"
    finally:
        reader.close()


def test_two_stores_registering_at_once_agree(
    odradek_broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``late`` plans on a state that misses ``early``'s registration (as when both write at
    once): its record loses on replay, it writes the winner's record again and registers as
    the next version with the next id."""
    early, late = SchemaStore(odradek_broker.bootstrap), SchemaStore(odradek_broker.bootstrap)
    try:
        late.catch_up()
        assert early.register("s", INT).id == 1
        catch_up = late.catch_up
        skipped: list[bool] = []

        def stale_once() -> None:
            if not skipped:
                skipped.append(True)
                return
            catch_up()

        monkeypatch.setattr(late, "catch_up", stale_once)
        registered = late.register("s", LONG)  # long reads int: BACKWARD
        assert (registered.version, registered.id) == (2, 2)
        early.catch_up()
        assert early.state.subjects == late.state.subjects
        assert [v.content.schema for v in early.state.subjects["s"].values()] == [
            '"int"',
            '"long"',
        ]
        fresh = SchemaStore(odradek_broker.bootstrap)
        try:
            fresh.catch_up()
            assert fresh.state.subjects == early.state.subjects
        finally:
            fresh.close()
    finally:
        early.close()
        late.close()


def test_reads_are_answered_from_the_replay_while_the_cluster_is_away(
    odradek_broker: RunningBroker,
) -> None:
    clock = ManualClock()
    store = SchemaStore(odradek_broker.bootstrap, clock=clock, timeout_s=5)
    try:
        assert store.register("a", INT).id == 1
        odradek_broker.stop()
        clock.advance(10_000)  # the replay is stale: a read tries to catch up, and cannot
        assert store.read(lambda s: s.schema_by_id(1)).schema == '"int"'
        with pytest.raises(RegistryError) as missing:
            store.read(lambda s: s.schema_by_id(2))
        assert missing.value.code == 40403
        with pytest.raises(RegistryError) as refused:
            store.register("b", LONG)
        assert refused.value.code in (50001, 50002)
    finally:
        store.close()
