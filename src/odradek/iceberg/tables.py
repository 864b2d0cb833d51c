"""The Iceberg tables of topics, in the catalog the broker's ``iceberg.*`` settings name.

Table ``<iceberg.namespace>.<topic>`` holds the topic's rows (:mod:`.columns`), and
``<iceberg.namespace>.<topic>~dlq`` the records that could not be decoded (``~`` is never in a
topic name). Partitioned as ``iceberg.partition.spec`` says when the table is created.

Format of the progress: every snapshot this class commits carries, in its summary, the property
``odradek.next-offset.<partition>`` = the offset after the last record of that partition in the
table, for the partition committed and carried over from the parent snapshot for the others;
the same commit sets the same properties on the table itself. A partition's committed offset is
the table's property: it outlives snapshot expiry and snapshots others make (a compaction),
which carry no such summary; for a table without them, that of the newest snapshot that has it.
Old metadata files are deleted after commits (100 kept); expiring snapshots and compacting
small files are left to the catalog's maintenance.

Whose table: the table's property ``odradek.topic-id`` names the topic (Kafka's topic id) whose
rows and offsets it holds, set when the table is made and by every commit. A topic deleted and
made again under the same name is another topic (another id) whose offsets start again: when
its translator finds the table of the earlier topic, it renames that table (and its
dead-letter table) aside, to ``<topic>~<earlier topic id>`` (``<topic>~dlq~<id>``), rows and
history kept, and the new topic's records go to a new table of the topic's name, from the new
log's start. A translator whose own id is already the name of a table set aside is of a topic
that is gone (a call still under way when it was deleted): it is refused, and changes nothing.
A table without the property (made by an older odradek) is taken as the topic's own, and gets
it at the next commit.

Crash: a commit is one atomic swap of the table's metadata pointer in the catalog, the rows and
the offset together, so after a crash the table holds either both or neither; data files
written for a commit that did not happen are orphans, never rows. :meth:`TableStore.commit`
checks that the partition's offset is still the one its rows start from, against the very
metadata it commits on (the catalog refuses the swap if another commit came first), so two
writers of a partition (an old leader and a new one) cannot both add the same records. The
dead-letter table is committed first, its rows below its own offset left out, so a retry after
a crash between the two commits does not add them twice. Setting a table aside is a rename,
then a table made anew: a crash between the two leaves no table of the name, made at the next
look; one before the dead-letter table's rename leaves it to be set aside when the new topic's
first dead letter finds it.

Threads: one thread (the translation thread) calls it; pyiceberg's own pool writes the files.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from odradek.config import parse_partition_spec
from odradek.iceberg.columns import DEAD_LETTER_SCHEMA, KAFKA_TYPE, KEY_VALUE_SCHEMA

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

OFFSET_PREFIX = "odradek.next-offset."
TOPIC_ID = "odradek.topic-id"
DEAD_LETTER_SUFFIX = "~dlq"
# Between a topic's name and the id of the earlier topic whose table was set aside.
SET_ASIDE_SEPARATOR = "~"
# Tries of one commit that lose the race to other partitions' commits (other brokers').
_COMMIT_ATTEMPTS = 5
# pyiceberg retries a commit that lost the race on the newer metadata by itself; ours must not
# be: its offset check was made against the metadata it lost to. TableStore tries again, check
# included.
_NO_REBASE = {"commit.retry.num-retries": "0"}


@dataclass(frozen=True, slots=True)
class TableSpec:
    """What a topic's table is: its name and how it is made (from the topic's settings)."""

    namespace: str
    topic: str
    mode: str
    partition_spec: str
    # Kafka's id of the topic (22 characters); "" where unknown (then any table is taken).
    topic_id: str = ""

    @property
    def identifier(self) -> tuple[str, ...]:
        return (*self.namespace.split("."), self.topic)

    def set_aside(self, topic_id: str) -> tuple[str, ...]:
        """Where the table of the earlier topic ``topic_id`` of this name goes."""
        return (*self.namespace.split("."), f"{self.topic}{SET_ASIDE_SEPARATOR}{topic_id}")

    def dead_letters(self) -> TableSpec:
        return TableSpec(
            self.namespace, self.topic + DEAD_LETTER_SUFFIX, "dead_letters", "()", self.topic_id
        )

    def initial_schema(self) -> pa.Schema:
        if self.mode == "key_value":
            return KEY_VALUE_SCHEMA
        if self.mode == "dead_letters":
            return DEAD_LETTER_SCHEMA
        # The Avro modes: the value's columns come with its schemas (schema evolution).
        return pa.schema([pa.field("kafka", KAFKA_TYPE)])


def open_catalog(properties: dict[str, str]) -> Catalog:
    """pyiceberg's catalog for the broker's (or the CLI's) ``iceberg.*`` properties; for the
    SQL catalog, the SQLite file's and the local warehouse's directories are made if missing
    (a REST catalog makes its own)."""
    from pyiceberg.catalog import load_catalog

    if properties.get("type") == "rest":
        return load_catalog("odradek", **properties)
    uri, warehouse = properties.get("uri", ""), properties.get("warehouse", "")
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if warehouse.startswith("file://"):
        Path(warehouse.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    elif warehouse and "://" not in warehouse:
        Path(warehouse).mkdir(parents=True, exist_ok=True)
    return load_catalog("odradek", **properties)


def _offsets_in(properties: dict[str, str]) -> dict[int, int]:
    return {
        int(name.removeprefix(OFFSET_PREFIX)): int(value)
        for name, value in properties.items()
        if name.startswith(OFFSET_PREFIX)
    }


def committed_offsets(table: Table) -> dict[int, int]:
    """Each partition's committed offset (see the module doc)."""
    from pyiceberg.table.snapshots import ancestors_of

    found = _offsets_in(table.properties)
    if found:
        return found
    current = table.current_snapshot()
    if current is None:
        return found
    for snapshot in ancestors_of(current, table.metadata):
        summary = snapshot.summary
        if summary is None:
            continue
        found = _offsets_in(summary.additional_properties)
        if found:
            # The newest snapshot of ours carries every partition over: no need to go on.
            break
    return found


class TopicGone(LookupError):
    """The table's name belongs to a newer topic than the translator's: its topic was deleted."""


class TableStore:
    """The topics' tables: made on first use, read for committed offsets, appended to."""

    def __init__(self, properties: dict[str, str]) -> None:
        self._properties = properties
        self._catalog: Catalog | None = None
        self._tables: dict[tuple[str, ...], Table] = {}

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = open_catalog(self._properties)
        return self._catalog

    def table(self, spec: TableSpec) -> Table:
        """The topic's table, made if missing (another broker may make it at the same time);
        an earlier topic's table of the same name set aside first (see the module doc)."""
        from pyiceberg.exceptions import CommitFailedException

        cached = self._tables.get(spec.identifier)
        if cached is not None:
            return cached
        for _ in range(_COMMIT_ATTEMPTS):
            table = self._load_or_create(spec)
            owner = table.properties.get(TOPIC_ID)
            if not spec.topic_id or owner is None or owner == spec.topic_id:
                break
            self._set_aside(spec, owner)
        else:
            raise CommitFailedException(f"{spec.topic}: the table of another topic stays")
        if any(table.properties.get(k) != v for k, v in _NO_REBASE.items()):
            with table.transaction() as transaction:  # a table made by someone else
                transaction.set_properties(_NO_REBASE)
        self._tables[spec.identifier] = table
        return table

    def _load_or_create(self, spec: TableSpec) -> Table:
        from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

        catalog = self.catalog
        try:
            return catalog.load_table(spec.identifier)
        except NoSuchTableError:
            catalog.create_namespace_if_not_exists(tuple(spec.namespace.split(".")))
            try:
                return self._create(catalog, spec)
            except TableAlreadyExistsError:
                return catalog.load_table(spec.identifier)

    def _set_aside(self, spec: TableSpec, owner: str) -> None:
        """The table of topic ``owner`` renamed aside for ``spec``'s topic, unless ``spec``'s
        topic is the one gone (:class:`TopicGone`)."""
        from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

        catalog = self.catalog
        if catalog.table_exists(spec.set_aside(spec.topic_id)):
            raise TopicGone(
                f"{spec.topic}: topic id {spec.topic_id} was deleted; the table is topic {owner}'s"
            )
        try:
            catalog.rename_table(spec.identifier, spec.set_aside(owner))
        except (NoSuchTableError, TableAlreadyExistsError):
            return  # another broker set it aside first (the next look finds out)
        if spec.mode != "dead_letters":
            # Its dead letters go with it, not left for the new topic's first one to find.
            dead = spec.dead_letters()
            try:
                if catalog.load_table(dead.identifier).properties.get(TOPIC_ID) == owner:
                    catalog.rename_table(dead.identifier, dead.set_aside(owner))
            except (NoSuchTableError, TableAlreadyExistsError):
                pass
        log.warning(
            "%s: the table held topic id %s, a deleted topic of the same name: renamed to %s; "
            "topic id %s starts a new table from its log start",
            ".".join(spec.identifier),
            owner,
            ".".join(spec.set_aside(owner)),
            spec.topic_id,
        )

    def _current(self, spec: TableSpec) -> Table:
        """The table as the catalog has it now. Loaded again rather than refreshed: another
        broker may have set it aside and made a new one of the name since it was looked up
        (which pyiceberg's refresh refuses: another table UUID)."""
        self._tables.pop(spec.identifier, None)
        return self.table(spec)

    @staticmethod
    def _create(catalog: Catalog, spec: TableSpec) -> Table:
        from pyiceberg.transforms import (
            BucketTransform,
            DayTransform,
            HourTransform,
            IdentityTransform,
            MonthTransform,
            Transform,
            TruncateTransform,
            YearTransform,
        )

        # One transaction: the table never exists without its partitioning.
        creation = catalog.create_table_transaction(
            spec.identifier,
            spec.initial_schema(),
            properties={
                # One metadata file per commit, a commit a minute per partition: keep 100.
                "write.metadata.delete-after-commit.enabled": "true",
                "write.metadata.previous-versions-max": "100",
                **_NO_REBASE,
                **({TOPIC_ID: spec.topic_id} if spec.topic_id else {}),
            },
        )
        fields = parse_partition_spec(spec.partition_spec)
        if fields:
            with creation.update_spec() as update:
                for fn, column, width in fields:
                    transform: Transform[Any, Any]
                    if fn == "bucket":
                        transform = BucketTransform(width or 1)
                    elif fn == "truncate":
                        transform = TruncateTransform(width or 1)
                    else:
                        transform = {
                            "year": YearTransform,
                            "month": MonthTransform,
                            "day": DayTransform,
                            "hour": HourTransform,
                            "identity": IdentityTransform,
                        }[fn]()
                    name = column.replace(".", "_") + ("" if fn == "identity" else f"_{fn}")
                    update.add_field(column, transform, name)
        creation.commit_transaction()
        return catalog.load_table(spec.identifier)

    def committed(self, spec: TableSpec, partition: int) -> int | None:
        """The partition's committed offset, read fresh from the catalog (None: none yet)."""
        # Looked up again: after a failure the table may have been dropped or made anew.
        return committed_offsets(self._current(spec)).get(partition)

    def commit(
        self,
        spec: TableSpec,
        partition: int,
        expected: int | None,
        end: int,
        rows: pa.Table,
        dead: pa.Table | None,
    ) -> bool:
        """Append ``rows`` (the partition's records from ``expected`` to ``end``) and record
        ``end`` as committed, if the committed offset is still ``expected``; False (nothing
        added) when it is not. A commit of another partition that came first (another broker's)
        is no reason to give up: the check and the commit are tried again on the new metadata."""
        from pyiceberg.exceptions import CommitFailedException

        if dead is not None and dead.num_rows:
            self._commit_dead_letters(spec.dead_letters(), partition, end, dead)
        for _ in range(_COMMIT_ATTEMPTS):
            table = self._current(spec)
            offsets = committed_offsets(table)
            if offsets.get(partition) != expected:
                log.warning(
                    "%s-%d: the table's offset is %s, not %s: another writer committed",
                    spec.topic,
                    partition,
                    offsets.get(partition),
                    expected,
                )
                return False
            offsets[partition] = end
            try:
                self._evolve(table, rows.schema)
                _append(table, rows, offsets, spec.topic_id)
                return True
            except CommitFailedException as e:
                log.info("%s-%d: another commit came first (%s)", spec.topic, partition, e)
                self._tables.pop(spec.identifier, None)
        return False

    def _commit_dead_letters(
        self, spec: TableSpec, partition: int, end: int, dead: pa.Table
    ) -> None:
        from pyiceberg.exceptions import CommitFailedException

        for _ in range(_COMMIT_ATTEMPTS):
            table = self._current(spec)
            offsets = committed_offsets(table)
            done = offsets.get(partition)
            fresh = dead
            if done is not None:
                kept = pc.greater_equal(pc.struct_field(dead["kafka"], "offset"), done)
                fresh = dead.filter(kept)
            if not fresh.num_rows:
                return
            offsets[partition] = end
            try:
                _append(table, fresh, offsets, spec.topic_id)
                return
            except CommitFailedException as e:
                log.info("%s-%d: another commit came first (%s)", spec.topic, partition, e)
                self._tables.pop(spec.identifier, None)
        raise CommitFailedException(f"{spec.topic}-{partition}: {_COMMIT_ATTEMPTS} commits lost")

    @staticmethod
    def _evolve(table: Table, schema: pa.Schema) -> None:
        """New columns of ``schema`` added to the table (a new optional Avro field)."""
        known = set(table.schema().as_arrow().names)
        if all(name in known for name in schema.names):
            return
        with table.update_schema() as update:
            update.union_by_name(schema)

    def close(self) -> None:
        self._tables.clear()
        self._catalog = None


def _append(table: Table, rows: pa.Table, offsets: dict[int, int], topic_id: str) -> None:
    """One commit: the rows, and the offsets (and whose they are) in the snapshot's summary and
    the table's properties."""
    properties = {f"{OFFSET_PREFIX}{p}": str(o) for p, o in sorted(offsets.items())}
    if topic_id:
        properties[TOPIC_ID] = topic_id
    with table.transaction() as transaction:
        transaction.set_properties(properties)
        transaction.append(rows, snapshot_properties=properties)


def list_tables(catalog: Catalog) -> Iterator[tuple[str, ...]]:
    """Every table of every namespace of the catalog."""
    for namespace in catalog.list_namespaces():
        yield from catalog.list_tables(namespace)
