"""TableStore on real files: the offsets in snapshot summaries, the check that fences a second
writer, the dead-letter table's own offsets."""

from __future__ import annotations

from pathlib import Path

from odradek.iceberg.columns import DEAD_LETTER_SCHEMA
from odradek.iceberg.tables import TableSpec, TableStore
from tests.iceberg.support import SPEC
from tests.iceberg.support import rows_of as _rows
from tests.iceberg.support import table_store as _store


def _offsets(store: TableStore, spec: TableSpec) -> list[tuple[int, int]]:
    rows = store.table(spec).scan().to_arrow().column("kafka").to_pylist()
    return sorted((r["partition"], r["offset"]) for r in rows)


def test_each_partition_resumes_where_its_rows_end(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.committed(SPEC, 0) is None
    assert store.commit(SPEC, 0, None, 10, _rows(0, range(10)), None)
    assert store.commit(SPEC, 1, None, 5, _rows(1, range(5)), None)
    assert store.commit(SPEC, 0, 10, 12, _rows(0, range(10, 12)), None)
    fresh = _store(tmp_path)  # as after a restart
    assert fresh.committed(SPEC, 0) == 12
    assert fresh.committed(SPEC, 1) == 5
    assert fresh.committed(SPEC, 2) is None
    assert store.table(SPEC).spec().fields[0].name == "kafka_timestamp_hour"


def test_a_writer_behind_the_table_adds_nothing(tmp_path: Path) -> None:
    old_leader, new_leader = _store(tmp_path), _store(tmp_path)
    assert old_leader.commit(SPEC, 0, None, 10, _rows(0, range(10)), None)
    assert new_leader.commit(SPEC, 0, 10, 20, _rows(0, range(10, 20)), None)
    # The old leader still thinks the table ends at 10.
    assert not old_leader.commit(SPEC, 0, 10, 15, _rows(0, range(10, 15)), None)
    assert _offsets(new_leader, SPEC) == [(0, o) for o in range(20)]


def test_dead_letters_are_not_added_twice_by_a_retried_commit(tmp_path: Path) -> None:
    store = _store(tmp_path)
    dead = _rows(0, range(3, 5), DEAD_LETTER_SCHEMA)
    assert store.commit(SPEC, 0, None, 5, _rows(0, range(3)), dead)
    # A second writer got there first: the main commit is refused...
    assert not store.commit(
        SPEC, 0, None, 8, _rows(0, range(3)), _rows(0, range(3, 8), DEAD_LETTER_SCHEMA)
    )
    # ...and the dead letters it had are kept only from the dead-letter table's own offset on.
    assert _offsets(store, SPEC.dead_letters()) == [(0, o) for o in range(3, 8)]


def test_offsets_outlive_snapshot_expiry_and_others_snapshots(tmp_path: Path) -> None:
    import datetime

    store = _store(tmp_path)
    assert store.commit(SPEC, 0, None, 10, _rows(0, range(10)), None)
    assert store.commit(SPEC, 0, 10, 12, _rows(0, range(10, 12)), None)
    table = store.table(SPEC)
    table.append(_rows(5, range(1)))  # someone else's snapshot, with no offsets in it
    table.maintenance.expire_snapshots().older_than(
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
    ).commit()
    assert len(table.metadata.snapshots) == 1
    assert _store(tmp_path).committed(SPEC, 0) == 12


def test_a_commit_that_loses_the_race_to_another_partitions_is_tried_again(
    tmp_path: Path,
) -> None:
    broker_a, broker_b = _store(tmp_path), _store(tmp_path)
    assert broker_a.commit(SPEC, 0, None, 3, _rows(0, range(3)), None)
    evolve = broker_a._evolve
    raced = []

    def evolve_then_lose_the_race(table: object, schema: object) -> None:
        if not raced:  # between broker A's check and its commit, broker B commits partition 1
            raced.append(broker_b.commit(SPEC, 1, None, 4, _rows(1, range(4)), None))
        evolve(table, schema)  # type: ignore[arg-type]

    broker_a._evolve = evolve_then_lose_the_race  # type: ignore[method-assign]
    assert broker_a.commit(SPEC, 0, 3, 5, _rows(0, range(3, 5)), None)
    assert raced == [True]
    assert _store(tmp_path).committed(SPEC, 0) == 5
    assert _store(tmp_path).committed(SPEC, 1) == 4
    assert _offsets(broker_a, SPEC) == [(0, o) for o in range(5)] + [(1, o) for o in range(4)]


def test_two_leaders_of_a_partition_racing_add_its_records_once(tmp_path: Path) -> None:
    old_leader, new_leader = _store(tmp_path), _store(tmp_path)
    assert old_leader.commit(SPEC, 0, None, 3, _rows(0, range(3)), None)
    evolve = old_leader._evolve
    raced = []

    def evolve_then_lose_the_race(table: object, schema: object) -> None:
        if not raced:  # the new leader commits the same records after the old one's check
            raced.append(new_leader.commit(SPEC, 0, 3, 6, _rows(0, range(3, 6)), None))
        evolve(table, schema)  # type: ignore[arg-type]

    old_leader._evolve = evolve_then_lose_the_race  # type: ignore[method-assign]
    assert not old_leader.commit(SPEC, 0, 3, 6, _rows(0, range(3, 6)), None)
    assert raced == [True]
    assert _offsets(new_leader, SPEC) == [(0, o) for o in range(6)]
