"""The translation of topics into their Iceberg tables (``iceberg.mode``).

:class:`TableTranslation` starts a :class:`PartitionTranslator` for each partition this broker
leads whose topic has a mode, and stops it when the leadership, the mode or the topic goes. A
translator reads what a read_committed consumer would (below the last stable offset, so only
records the in-sync replicas have, and no aborted transaction's), through the partition's own
read path, from the offset the table says it holds (:mod:`.tables`), or from the log start for
a table that holds none of the partition yet (the backfill of a topic that had data). It
decodes each slice into Arrow columns and, every ``iceberg.commit.interval.ms`` (or sooner, once
64 MiB are waiting), commits them with the offset after them as one Iceberg snapshot. A
crash loses only what was not committed, which the next leader reads again from the committed
offset: no record is missed or added twice. Retention deletes segments of the topic, never
rows of the table; records it removed before they were translated are skipped with a warning.

Threads: the translators are tasks on the broker's event loop, which owns the partitions; they
only look at the partition there (its bounds, a read that lends a segment's file descriptor,
its aborted transactions). Reading the bytes, decoding, the schema registry and every catalog
and file write run on one translation thread, its CPU priority lowered (nice 19), so that when
translation is behind it takes what the produce path leaves rather than competing with it: the
event loop never waits for that thread, each translator asks it for at most 1 MiB of records
at a time, and a translator yields the loop between its steps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from odradek.client.data import AbortedTransaction, aborted_batches
from odradek.clock import Clock
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_headers

if TYPE_CHECKING:
    import pyarrow as pa

    from odradek.cluster.replication.partition import Partition, RecordSlice
    from odradek.cluster.topics import TopicManager
    from odradek.iceberg.columns import ValueSchema
    from odradek.iceberg.tables import TableSpec, TableStore
    from odradek.registry.state import RegistryState
    from odradek.registry.store import SchemaStore

log = logging.getLogger(__name__)

T = TypeVar("T")

STEP_BYTES = 1 << 20
# Commit before the interval when this much is waiting: a translator's memory is bounded.
MAX_PENDING_BYTES = 64 << 20
_SYNC_INTERVAL_S = 1.0
_MAX_BACKOFF_S = 5.0


@dataclass(frozen=True, slots=True)
class TranslatorFigures:
    """One partition's translation at the time of a scrape."""

    topic: str
    partition: int
    lag_records: int  # between the table's offset and the high watermark
    lag_seconds: float  # since the table last held everything the log had
    translated: int  # records committed to the table by this broker since it started
    dead_letters: int
    errors: int


@dataclass(slots=True)
class _Decoded:
    rows: pa.Table
    dead: pa.Table | None
    next_offset: int


@dataclass(slots=True)
class _Pending:
    rows: list[pa.Table] = field(default_factory=list)
    dead: list[pa.Table] = field(default_factory=list)
    size: int = 0
    count: int = 0
    dead_count: int = 0


def _lower_priority() -> None:
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class SchemaSource:
    """Avro value schemas from the broker's schema registry (its ``_schemas`` topic, read as
    a client of this cluster), parsed once per id. Translation thread only."""

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
        from odradek.iceberg.columns import SchemaUnsupported, ValueSchema

        found = self._by_id.get(schema_id)
        if found is None:
            content = self._read(lambda state: state.schema_by_id(schema_id))
            if content.schema_type.upper() != "AVRO":
                raise SchemaUnsupported(f"schema {schema_id} is {content.schema_type}, not Avro")
            found = self._by_id[schema_id] = ValueSchema.of(schema_id, content.schema)
        return found

    def latest(self, subject: str) -> ValueSchema:
        version = self._read(lambda state: state.version(subject, "latest"))
        return self.by_id(version.id)

    def _read(self, query: Callable[[RegistryState], T]) -> T:
        """``query`` of the registry; SchemaMissing when it has no such schema (other errors,
        such as a registry that cannot be reached, as they are)."""
        from odradek.iceberg.columns import SchemaMissing
        from odradek.registry.errors import RegistryError

        try:
            return self.store.read(query)
        except RegistryError as e:
            if e.status == 404:
                raise SchemaMissing(e.message) from e
            raise

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


class TableTranslation:
    """The broker's translators and their thread (see the module doc). Event loop only,
    except the figures, which the metrics endpoint reads through the loop too."""

    def __init__(
        self,
        topics: TopicManager,
        clock: Clock,
        catalog_properties: dict[str, str],
        make_schema_store: Callable[[], SchemaStore],
    ) -> None:
        self.topics = topics
        self.clock = clock
        self._catalog_properties = catalog_properties
        self._make_schema_store = make_schema_store
        self._thread = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="iceberg", initializer=_lower_priority
        )
        self._store: TableStore | None = None
        self._schemas: SchemaSource | None = None
        self.translators: dict[tuple[str, int], PartitionTranslator] = {}
        self._task: asyncio.Task[None] | None = None

    # -- the translation thread's state (touched only there) ------------------------------------

    @property
    def store(self) -> TableStore:
        if self._store is None:
            from odradek.iceberg.tables import TableStore

            self._store = TableStore(self._catalog_properties)
        return self._store

    @property
    def schemas(self) -> SchemaSource:
        if self._schemas is None:
            self._schemas = SchemaSource(self._make_schema_store)
        return self._schemas

    async def on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the translation thread; the loop goes on meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="iceberg-translation")

    async def _watch(self) -> None:
        while True:
            try:
                self.sync()
            except Exception:
                log.exception("iceberg: could not match translators to partitions")
            await asyncio.sleep(_SYNC_INTERVAL_S)

    def sync(self) -> None:
        """A translator for each led partition of a topic with a mode, and no other."""
        wanted: dict[tuple[str, int], tuple[Partition, TableSpec, int]] = {}
        for key, partition in list(self.topics.partitions.items()):
            if not partition.is_leader or partition.log.offline or key[0].startswith("__"):
                continue
            config = self.topics.topic_config(key[0])
            mode = str(config.get("iceberg.mode"))
            if mode == "disabled":
                continue
            from odradek.iceberg.tables import TableSpec

            spec = TableSpec(
                str(config.get("iceberg.namespace")),
                key[0],
                mode,
                str(config.get("iceberg.partition.spec")),
            )
            wanted[key] = (partition, spec, config.get_int("iceberg.commit.interval.ms"))
        for key, translator in list(self.translators.items()):
            goal = wanted.get(key)
            if goal is None or goal[0] is not translator.partition or goal[1] != translator.spec:
                translator.cancel()
                del self.translators[key]
        for key, (partition, spec, interval_ms) in wanted.items():
            found = self.translators.get(key)
            if found is None:
                found = PartitionTranslator(self, partition, spec, interval_ms)
                self.translators[key] = found
                found.start()
            found.interval_ms = interval_ms

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for translator in self.translators.values():
            translator.cancel()
        for translator in self.translators.values():
            await translator.wait_stopped()
        self.translators.clear()

        def close() -> None:
            if self._schemas is not None:
                self._schemas.close()
            if self._store is not None:
                self._store.close()

        # A commit under way finishes (or not) on its own; nothing waits for it.
        with contextlib.suppress(RuntimeError):
            self._thread.submit(close)
        self._thread.shutdown(wait=False)

    def figures(self) -> list[TranslatorFigures]:
        now = self.clock.monotonic_ms()
        return [t.figures(now) for _, t in sorted(self.translators.items())]


class PartitionTranslator:
    """One led partition's translation into its topic's table (see the module doc)."""

    def __init__(
        self, owner: TableTranslation, partition: Partition, spec: TableSpec, interval_ms: int
    ) -> None:
        self.owner = owner
        self.partition = partition
        self.spec = spec
        self.interval_ms = interval_ms
        # The table's offset for the partition as last read or committed (None: none yet);
        # ``loaded`` says whether it was read since this translator (re)started.
        self.committed: int | None = None
        self.loaded = False
        self.next_offset = 0
        self.pending = _Pending()
        self.last_commit_ms = owner.clock.monotonic_ms()
        self.caught_up_ms = owner.clock.monotonic_ms()
        self.translated = 0
        self.dead_letters = 0
        self.errors = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"iceberg-{self.partition.name}")

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def wait_stopped(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def figures(self, now_ms: int) -> TranslatorFigures:
        done = self.committed if self.committed is not None else self.partition.log.log_start_offset
        lag = max(self.partition.high_watermark - max(done, self.partition.log.log_start_offset), 0)
        return TranslatorFigures(
            self.spec.topic,
            self.partition.index,
            lag,
            (now_ms - self.caught_up_ms) / 1000 if lag else 0.0,
            self.translated,
            self.dead_letters,
            self.errors,
        )

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._round()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                self.errors += 1
                log.warning(
                    "iceberg: %s: translation failed, retrying from the table's offset: %s",
                    self.partition.name,
                    e,
                    exc_info=failures == 1,
                )
                self._restart()
                await asyncio.sleep(min(0.1 * 2**failures, _MAX_BACKOFF_S))

    def _restart(self) -> None:
        self.loaded = False
        self.pending = _Pending()

    async def _round(self) -> None:
        if not self.loaded:
            await self._load()
        progressed = await self._step()
        now = self.owner.clock.monotonic_ms()
        due = now - self.last_commit_ms >= self.interval_ms
        if self.next_offset != self.committed and (due or self.pending.size >= MAX_PENDING_BYTES):
            await self._commit()
        elif due:
            self.last_commit_ms = now
        start = self.partition.log.log_start_offset
        done = self.committed if self.committed is not None else start
        if done >= self.partition.high_watermark:
            self.caught_up_ms = now
        if progressed:
            await asyncio.sleep(0)  # the produce path's turn
        else:
            await self._idle(max(self.last_commit_ms + self.interval_ms - now, 1))

    async def _load(self) -> None:
        committed = await self.owner.on_thread(
            self.owner.store.committed, self.spec, self.partition.index
        )
        start = self.partition.log.log_start_offset
        if committed is not None and committed < start:
            log.warning(
                "iceberg: %s: records %d..%d were deleted by retention before they were translated",
                self.partition.name,
                committed,
                start - 1,
            )
        elif committed is not None and committed > partition_end(self.partition):
            log.warning(
                "iceberg: %s: the table holds records up to offset %d, past the log's end %d "
                "(a topic deleted and made again, or an unclean election): nothing is "
                "translated until the log passes it",
                self.partition.name,
                committed,
                partition_end(self.partition),
            )
        self.committed = committed
        self.next_offset = max(committed if committed is not None else start, start)
        self.pending = _Pending()
        self.loaded = True
        self.last_commit_ms = self.owner.clock.monotonic_ms()

    async def _step(self) -> bool:
        """Read and decode the next slice below the last stable offset; False when there is
        none."""
        partition = self.partition
        bound = partition.last_stable_offset
        if self.next_offset >= bound:
            return False
        try:
            piece = partition.read(
                self.next_offset, STEP_BYTES, max_offset=bound, min_one_batch=True
            )
        except KafkaError as e:
            if e.code != ErrorCode.offset_out_of_range:
                raise
            self.next_offset = max(self.next_offset, partition.log.log_start_offset)
            return True
        if piece is None:
            return False
        aborted = tuple(
            AbortedTransaction(p, f) for p, f in partition.aborted_transactions(self.next_offset)
        )
        decoded = await self.owner.on_thread(self._decode, piece, self.next_offset, bound, aborted)
        if decoded.next_offset <= self.next_offset:
            return False
        self.next_offset = decoded.next_offset
        if decoded.rows.num_rows:
            self.pending.rows.append(decoded.rows)
            self.pending.size += decoded.rows.nbytes
            self.pending.count += decoded.rows.num_rows
        if decoded.dead is not None and decoded.dead.num_rows:
            self.pending.dead.append(decoded.dead)
            self.pending.dead_count += decoded.dead.num_rows
        return True

    def _decode(
        self, piece: RecordSlice, start: int, bound: int, aborted: tuple[AbortedTransaction, ...]
    ) -> _Decoded:
        """On the translation thread: the slice's records below ``bound`` as rows."""
        from odradek.iceberg.columns import decode_records

        data = piece.read_bytes()
        end = start
        for header in iter_headers(data):
            if header.base_offset >= bound:
                break
            end = header.next_offset
        skip = aborted_batches(data, aborted)
        batch = decode_records(data, self.partition.index, start, end, skip)
        rows, dead = self._typed(batch)
        return _Decoded(rows, dead, end)

    def _typed(self, batch: pa.RecordBatch) -> tuple[pa.Table, pa.Table | None]:
        import pyarrow as pa

        from odradek.iceberg.columns import decode_avro, key_value_dead_letters

        if self.spec.mode == "key_value":
            return pa.Table.from_batches([batch]), None
        schemas = self.owner.schemas
        latest = None
        if self.spec.mode == "value_schema_latest":
            try:
                latest = schemas.latest(f"{self.spec.topic}-value")
            except ValueError as e:  # none registered, or not one with columns
                return _empty_like(batch), key_value_dead_letters(batch, f"no latest schema: {e}")
        decoded = decode_avro(batch, schemas.by_id, latest)
        if not decoded.tables:
            return _empty_like(batch), decoded.dead
        rows = pa.concat_tables(decoded.tables, promote_options="default")
        return rows, decoded.dead

    async def _commit(self) -> None:
        import pyarrow as pa

        from odradek.iceberg.columns import KEY_VALUE_SCHEMA

        pending, end = self.pending, self.next_offset
        if pending.rows:
            rows = pa.concat_tables(pending.rows, promote_options="default")
        else:
            rows = pa.table({"kafka": pa.array([], KEY_VALUE_SCHEMA.field("kafka").type)})
        dead = pa.concat_tables(pending.dead) if pending.dead else None
        committed = await self.owner.on_thread(
            self.owner.store.commit,
            self.spec,
            self.partition.index,
            self.committed,
            end,
            rows,
            dead,
        )
        if not committed:
            self._restart()
            return
        self.committed = end
        self.translated += pending.count
        self.dead_letters += pending.dead_count
        self.pending = _Pending()
        self.last_commit_ms = self.owner.clock.monotonic_ms()

    async def _idle(self, timeout_ms: int) -> None:
        """Until the partition has more (an append, a high watermark move) or a commit is due."""
        self._wake.clear()
        self.partition.add_waiter(self._wake.set)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout_ms / 1000)
        finally:
            self.partition.remove_waiter(self._wake.set)


def partition_end(partition: Partition) -> int:
    return partition.log.log_end_offset


def _empty_like(batch: pa.RecordBatch) -> pa.Table:
    import pyarrow as pa

    return pa.table({"kafka": batch.column("kafka").slice(0, 0)})
