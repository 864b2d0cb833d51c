"""Tables in an Iceberg REST catalog (``iceberg.catalog.type=rest``): Apache Iceberg's own REST
catalog server (:mod:`tests.iceberg.rest_catalog`), the broker's translation and a reader both
going through pyiceberg's REST client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from odradek.config import BrokerConfig
from odradek.iceberg.tables import TableSpec, TableStore, committed_offsets
from odradek.testing import wait_until
from tests.iceberg.rest_catalog import RestCatalogServer
from tests.iceberg.support import (
    SPEC,
    assert_rows_are_the_records,
    create_topic,
    log_ends,
    produce_keyed,
    rows_of,
    start_broker,
)

PARTITIONS = 3


@pytest.fixture(scope="module")
def rest_catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestCatalogServer]:
    with RestCatalogServer(tmp_path_factory.mktemp("rest-catalog")) as server:
        yield server


def _store(server: RestCatalogServer, tmp_path: Path) -> TableStore:
    settings = dict(s.split("=", 1) for s in server.broker_settings())
    return TableStore(BrokerConfig({"log.dirs": str(tmp_path), **settings}).iceberg_catalog())


def _table(server: RestCatalogServer, topic: str) -> Any:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return server.catalog().load_table(("odradek", topic))
    except NoSuchTableError:
        return None


def _offsets(server: RestCatalogServer, topic: str) -> dict[int, int]:
    table = _table(server, topic)
    return {} if table is None else committed_offsets(table)


def test_offsets_and_the_second_writer_check_hold_over_rest(
    rest_catalog: RestCatalogServer, tmp_path: Path
) -> None:
    spec = TableSpec("odradek", "store", SPEC.mode, SPEC.partition_spec)
    old_leader, new_leader = _store(rest_catalog, tmp_path), _store(rest_catalog, tmp_path)
    assert old_leader.committed(spec, 0) is None
    assert old_leader.commit(spec, 0, None, 10, rows_of(0, range(10)), None)
    assert new_leader.commit(spec, 0, 10, 20, rows_of(0, range(10, 20)), None)
    assert new_leader.commit(spec, 1, None, 5, rows_of(1, range(5)), None)
    # The old leader still thinks the table ends at 10: the catalog's table says 20.
    assert not old_leader.commit(spec, 0, 10, 15, rows_of(0, range(10, 15)), None)
    fresh = _store(rest_catalog, tmp_path)
    assert (fresh.committed(spec, 0), fresh.committed(spec, 1)) == (20, 5)
    table = _table(rest_catalog, "store")
    assert table.location().startswith(rest_catalog.warehouse.rstrip("/"))
    rows = table.scan().to_arrow().column("kafka").to_pylist()
    assert sorted((r["partition"], r["offset"]) for r in rows) == [
        *((0, o) for o in range(20)),
        *((1, o) for o in range(5)),
    ]
    # The offsets are in the snapshot's summary too, as the REST catalog returns it.
    summary = table.current_snapshot().summary.additional_properties
    assert summary["odradek.next-offset.0"] == "20" and summary["odradek.next-offset.1"] == "5"


def test_a_topic_in_a_rest_catalog_resumes_exactly_after_a_kill(
    rest_catalog: RestCatalogServer, tmp_path: Path
) -> None:
    settings = rest_catalog.broker_settings()
    broker = start_broker(tmp_path, 0, *settings)
    try:
        create_topic(broker.bootstrap, "orders", PARTITIONS)
        produce_keyed(broker.bootstrap, "orders", 3000)
        ends = log_ends(broker.bootstrap, "orders", PARTITIONS)
        assert sum(ends.values()) == 3000
        wait_until(lambda: _offsets(rest_catalog, "orders") == ends, what=f"the table at {ends}")
        table = _table(rest_catalog, "orders")
        assert_rows_are_the_records(
            table.scan().to_arrow(), broker.bootstrap, "orders", PARTITIONS, ends
        )
        # Records the translator has read but not committed when the broker dies, then the
        # catalog restarted as well (its state is in its database): the new broker resumes
        # from the offsets the catalog's table holds.
        produce_keyed(broker.bootstrap, "orders", 1000, first=3000)
        broker.kill()
        rest_catalog.restart()
        broker = start_broker(tmp_path, broker.port, *settings)
        produce_keyed(broker.bootstrap, "orders", 1000, first=4000)
        ends = log_ends(broker.bootstrap, "orders", PARTITIONS)
        assert sum(ends.values()) == 5000
        wait_until(lambda: _offsets(rest_catalog, "orders") == ends, what=f"the table at {ends}")
        table = _table(rest_catalog, "orders")
        rows = table.scan().to_arrow()
        assert rows.num_rows == 5000
        assert_rows_are_the_records(rows, broker.bootstrap, "orders", PARTITIONS, ends)
    finally:
        broker.kill()


def test_a_topic_made_again_sets_the_old_table_aside_over_rest(
    rest_catalog: RestCatalogServer, tmp_path: Path
) -> None:
    old = TableSpec("odradek", "again", SPEC.mode, SPEC.partition_spec, "AAAAAAAAAAAAAAAAAAAAAA")
    new = replace(old, topic_id="BBBBBBBBBBBBBBBBBBBBBB")
    assert _store(rest_catalog, tmp_path).commit(old, 0, None, 10, rows_of(0, range(10)), None)
    store = _store(rest_catalog, tmp_path)
    assert store.committed(new, 0) is None
    assert store.commit(new, 0, None, 3, rows_of(0, range(3)), None)
    assert _offsets(rest_catalog, "again") == {0: 3}
    assert _offsets(rest_catalog, f"again~{old.topic_id}") == {0: 10}
