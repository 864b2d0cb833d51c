"""TableStore on real files: the offsets in snapshot summaries, the check that fences a second
writer, the dead-letter table's own offsets, a table's topic id."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from odradek.iceberg.columns import DEAD_LETTER_SCHEMA
from odradek.iceberg.tables import TableSpec, TableStore, TopicGone, committed_offsets
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


OLD_TOPIC = replace(SPEC, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
NEW_TOPIC = replace(SPEC, topic_id="BBBBBBBBBBBBBBBBBBBBBB")


def test_a_topic_made_again_gets_a_new_table_and_the_old_one_is_set_aside(
    tmp_path: Path,
) -> None:
    old_leader = _store(tmp_path)
    dead = _rows(1, range(2, 3), DEAD_LETTER_SCHEMA)
    assert old_leader.commit(OLD_TOPIC, 0, None, 10, _rows(0, range(10)), None)
    assert old_leader.commit(OLD_TOPIC, 1, None, 3, _rows(1, range(2)), dead)
    # The topic is deleted and made again: its offsets start at 0 again.
    new_leader = _store(tmp_path)
    assert new_leader.committed(NEW_TOPIC, 0) is None
    assert new_leader.committed(NEW_TOPIC, 1) is None
    assert new_leader.commit(NEW_TOPIC, 0, None, 4, _rows(0, range(4)), None)
    assert _offsets(new_leader, NEW_TOPIC) == [(0, o) for o in range(4)]
    assert new_leader.table(NEW_TOPIC).properties["odradek.topic-id"] == NEW_TOPIC.topic_id
    # The earlier topic's rows, offsets and dead letters are kept, under its id.
    catalog = new_leader.catalog
    aside = catalog.load_table(("odradek", f"t~{OLD_TOPIC.topic_id}"))
    assert committed_offsets(aside) == {0: 10, 1: 3}
    assert aside.scan().to_arrow().num_rows == 12
    assert catalog.table_exists(("odradek", "t~dlq")) is False
    dead_aside = catalog.load_table(("odradek", f"t~dlq~{OLD_TOPIC.topic_id}"))
    assert dead_aside.scan().to_arrow().num_rows == 1


def test_a_translator_of_the_deleted_topic_changes_nothing(tmp_path: Path) -> None:
    old_leader, new_leader = _store(tmp_path), _store(tmp_path)
    assert old_leader.commit(OLD_TOPIC, 0, None, 10, _rows(0, range(10)), None)
    assert new_leader.commit(NEW_TOPIC, 0, None, 4, _rows(0, range(4)), None)
    # A call of the old topic's translator still under way: its table object is the old one.
    with pytest.raises(TopicGone):
        old_leader.commit(OLD_TOPIC, 0, 10, 12, _rows(0, range(10, 12)), None)
    with pytest.raises(TopicGone):
        _store(tmp_path).committed(OLD_TOPIC, 0)
    assert _offsets(new_leader, NEW_TOPIC) == [(0, o) for o in range(4)]
    aside = new_leader.catalog.load_table(("odradek", f"t~{OLD_TOPIC.topic_id}"))
    assert committed_offsets(aside) == {0: 10}


def test_two_leaders_of_the_new_topic_set_the_old_table_aside_once(tmp_path: Path) -> None:
    assert _store(tmp_path).commit(OLD_TOPIC, 0, None, 5, _rows(0, range(5)), None)
    first, second = _store(tmp_path), _store(tmp_path)
    old_table = second.table(OLD_TOPIC)  # the second looked before the first set it aside
    assert first.commit(NEW_TOPIC, 0, None, 2, _rows(0, range(2)), None)
    second._tables[NEW_TOPIC.identifier] = old_table
    assert second.commit(NEW_TOPIC, 1, None, 3, _rows(1, range(3)), None)
    assert _offsets(_store(tmp_path), NEW_TOPIC) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    namespace_tables = sorted(name for _, name in first.catalog.list_tables("odradek"))
    assert namespace_tables == ["t", f"t~{OLD_TOPIC.topic_id}"]


def test_a_table_made_before_topic_ids_is_the_topics_own(tmp_path: Path) -> None:
    assert _store(tmp_path).commit(SPEC, 0, None, 5, _rows(0, range(5)), None)
    store = _store(tmp_path)
    assert store.committed(NEW_TOPIC, 0) == 5
    assert store.commit(NEW_TOPIC, 0, 5, 7, _rows(0, range(5, 7)), None)
    assert store.table(NEW_TOPIC).properties["odradek.topic-id"] == NEW_TOPIC.topic_id
