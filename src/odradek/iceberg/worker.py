"""The translation worker: a process of its own beside the broker (see :mod:`.translator`),
which decodes the records the broker hands it, keeps each partition's rows until their commit,
and does every catalog and file write.

A process rather than a thread of the broker: decoding and pyiceberg are partly Python, and a
thread would hold the broker's GIL while it runs them, taking the event loop's turns whatever
its CPU priority. In a process at the lowest priority (nice 19) translation uses a core the
broker leaves idle, and gives way when the broker needs the CPU.

State: per partition, the rows decoded since the last commit, under the token of the
translator that sent them; a call with another token (a translator that started again, or a
worker that did: the state is gone) raises :class:`StaleTranslation`, and the translator
starts again from the table's offset. Crash: what is lost is only uncommitted rows.

Threads: the functions here run in the worker process, one call at a time.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from odradek.client.data import AbortedTransaction, aborted_batches
from odradek.protocol.record_batch import iter_headers
from odradek.security.client_settings import ClientSecurity

if TYPE_CHECKING:
    import pyarrow as pa

    from odradek.iceberg.columns import ValueSchema
    from odradek.iceberg.tables import TableSpec, TableStore
    from odradek.registry.state import RegistryState
    from odradek.registry.store import SchemaStore

T = TypeVar("T")

_PARENT_CHECK_S = 0.5
# Below this many pending bytes a partition's rows wait for the commit interval.
MAX_PENDING_BYTES = 64 << 20
# Past this many pending bytes of all partitions together, each translation asks for a commit:
# the worker's memory is bounded however many partitions it translates.
MAX_TOTAL_PENDING_BYTES = 256 << 20


class StaleTranslation(LookupError):
    """The worker holds no rows for this translator (it, or the worker, started again)."""


class SchemaSource:
    """Value schemas (Avro, JSON Schema, Protobuf) from the broker's schema registry (its
    ``_schemas`` topic, read as a client of the cluster), parsed once per id."""

    def __init__(self, make_store: Callable[[], SchemaStore]) -> None:
        self._make_store = make_store
        self._store: SchemaStore | None = None
        self._by_id: dict[int, ValueSchema] = {}

    @property
    def store(self) -> SchemaStore:
        if self._store is None:
            self._store = self._make_store()
        return self._store

    def by_id(self, schema_id: int) -> ValueSchema:
        from odradek.iceberg.columns import ValueSchema

        found = self._by_id.get(schema_id)
        if found is None:
            content, references = self._read(
                lambda state: (
                    (content := state.schema_by_id(schema_id)),
                    list(state.referenced(content.references)),
                )
            )
            found = ValueSchema.of(schema_id, content.schema, content.schema_type, references)
            self._by_id[schema_id] = found
        return found

    def latest(self, subject: str) -> ValueSchema:
        version = self._read(lambda state: state.version(subject, "latest"))
        return self.by_id(version.id)

    def _read(self, query: Callable[[RegistryState], T]) -> T:
        """``query`` of the registry; SchemaMissing when it has no such schema or one of its
        references (other errors, such as a registry that cannot be reached, as they are)."""
        from odradek.iceberg.columns import SchemaMissing
        from odradek.registry.errors import RegistryError

        try:
            return self.store.read(query)
        except RegistryError as e:
            if e.status in (404, 422):
                raise SchemaMissing(e.message) from e
            raise

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


@dataclass(slots=True)
class _Pending:
    token: str
    rows: list[pa.Table] = field(default_factory=list)
    dead: list[pa.Table] = field(default_factory=list)
    size: int = 0
    count: int = 0
    dead_count: int = 0


@dataclass(frozen=True, slots=True)
class Translated:
    """What one slice added to a partition's pending rows."""

    next_offset: int
    rows: int
    dead: int
    pending_bytes: int


@dataclass(frozen=True, slots=True)
class Committed:
    """A commit's outcome: whether it happened, and the rows it added (0 when refused)."""

    done: bool
    rows: int
    dead: int


class Worker:
    """The worker's state: the tables, the schemas, the pending rows."""

    def __init__(
        self, catalog_properties: dict[str, str], bootstrap: str, security: ClientSecurity
    ) -> None:
        from odradek.iceberg.tables import TableStore

        self.store: TableStore = TableStore(catalog_properties)

        def schema_store() -> SchemaStore:
            from odradek.registry.store import SchemaStore

            return SchemaStore(bootstrap, security)

        self.schemas = SchemaSource(schema_store)
        self.pending: dict[tuple[str, int], _Pending] = {}

    def begin(self, spec: TableSpec, partition: int, token: str) -> int | None:
        """A translator (re)starts: its table's committed offset; rows of before dropped."""
        self.pending[(spec.topic, partition)] = _Pending(token)
        return self.store.committed(spec, partition)

    def _pending(self, spec: TableSpec, partition: int, token: str) -> _Pending:
        found = self.pending.get((spec.topic, partition))
        if found is None or found.token != token:
            raise StaleTranslation(f"{spec.topic}-{partition}: no rows of this translator")
        return found

    def translate(
        self,
        spec: TableSpec,
        partition: int,
        token: str,
        data: bytes,
        start: int,
        bound: int,
        aborted: tuple[AbortedTransaction, ...],
    ) -> Translated:
        """The records of ``data`` (whole batches from ``start`` on) below ``bound`` added to
        the partition's pending rows."""
        from odradek.iceberg.columns import decode_records

        pending = self._pending(spec, partition, token)
        end = start
        for header in iter_headers(data):
            if header.base_offset >= bound:
                break
            end = header.next_offset
        batch = decode_records(data, partition, start, end, aborted_batches(data, aborted))
        rows, dead = self._typed(spec, batch)
        if rows.num_rows:
            pending.rows.append(rows)
            pending.size += rows.nbytes
            pending.count += rows.num_rows
        if dead is not None and dead.num_rows:
            pending.dead.append(dead)
            pending.dead_count += dead.num_rows
        size = pending.size
        if sum(p.size for p in self.pending.values()) >= MAX_TOTAL_PENDING_BYTES:
            size = max(size, MAX_PENDING_BYTES)
        return Translated(end, rows.num_rows, 0 if dead is None else dead.num_rows, size)

    def _typed(self, spec: TableSpec, batch: pa.RecordBatch) -> tuple[pa.Table, pa.Table | None]:
        import pyarrow as pa

        from odradek.iceberg.columns import decode_values, key_value_dead_letters

        if spec.mode == "key_value":
            return pa.Table.from_batches([batch]), None
        latest = None
        if spec.mode == "value_schema_latest":
            try:
                latest = self.schemas.latest(f"{spec.topic}-value")
            except ValueError as e:  # none registered, or not one with columns
                return _empty_like(batch), key_value_dead_letters(batch, f"no latest schema: {e}")
        decoded = decode_values(batch, self.schemas.by_id, latest)
        if not decoded.tables:
            return _empty_like(batch), decoded.dead
        return pa.concat_tables(decoded.tables, promote_options="default"), decoded.dead

    def commit(
        self, spec: TableSpec, partition: int, token: str, expected: int | None, end: int
    ) -> Committed:
        """The partition's pending rows committed with ``end`` as its offset, if the table's
        offset is still ``expected``; pending rows are dropped either way."""
        import pyarrow as pa

        from odradek.iceberg.columns import KAFKA_TYPE

        pending = self._pending(spec, partition, token)
        self.pending[(spec.topic, partition)] = _Pending(token)
        if pending.rows:
            rows = pa.concat_tables(pending.rows, promote_options="default")
        else:
            rows = pa.table({"kafka": pa.array([], KAFKA_TYPE)})
        dead = pa.concat_tables(pending.dead) if pending.dead else None
        if not self.store.commit(spec, partition, expected, end, rows, dead):
            # The next call finds no rows of this token: the translator starts again.
            del self.pending[(spec.topic, partition)]
            return Committed(False, 0, 0)
        return Committed(True, pending.count, pending.dead_count)

    def forget(self, spec: TableSpec, partition: int) -> None:
        self.pending.pop((spec.topic, partition), None)

    def close(self) -> None:
        self.schemas.close()
        self.store.close()


def _empty_like(batch: pa.RecordBatch) -> pa.Table:
    import pyarrow as pa

    return pa.table({"kafka": batch.column("kafka").slice(0, 0)})


# -- the worker process's entry points (module functions: they cross the process boundary) ----

_worker: Worker | None = None


def start_worker(
    catalog_properties: dict[str, str], bootstrap: str, security: ClientSecurity
) -> None:
    """The process's initializer: the lowest CPU priority, then the worker's state."""
    global _worker
    with contextlib.suppress(OSError):
        os.nice(19)
    threading.Thread(
        target=_exit_with_parent, args=(os.getppid(),), name="parent-watch", daemon=True
    ).start()
    _worker = Worker(catalog_properties, bootstrap, security)


def _exit_with_parent(parent: int) -> None:
    """A broker killed (kill -9) leaves its worker waiting on a queue whose write end the
    worker holds too: it would never exit. A commit cut short here is no harm: a commit is
    whole or absent."""
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    os._exit(0)


def the_worker() -> Worker:
    assert _worker is not None, "start_worker was not called in this process"
    return _worker


def begin(spec: TableSpec, partition: int, token: str) -> int | None:
    return the_worker().begin(spec, partition, token)


def translate(
    spec: TableSpec,
    partition: int,
    token: str,
    data: bytes,
    start: int,
    bound: int,
    aborted: tuple[AbortedTransaction, ...],
) -> Translated:
    return the_worker().translate(spec, partition, token, data, start, bound, aborted)


def commit(
    spec: TableSpec, partition: int, token: str, expected: int | None, end: int
) -> Committed:
    return the_worker().commit(spec, partition, token, expected, end)


def forget(spec: TableSpec, partition: int) -> None:
    the_worker().forget(spec, partition)
