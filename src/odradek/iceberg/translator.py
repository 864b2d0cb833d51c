"""The translation of topics into their Iceberg tables (``iceberg.mode``).

:class:`TableTranslation` starts a :class:`PartitionTranslator` for each partition this broker
leads whose topic has a mode, and stops it when the leadership, the mode or the topic goes. A
translator reads what a read_committed consumer would (below the last stable offset, so only
records the in-sync replicas have, and no aborted transaction's), through the partition's own
read path, from the offset the table says it holds (:mod:`.tables`), or from the log start for
a table that holds none of the partition yet (the backfill of a topic that had data, or a topic
deleted and made again: a table is its topic's, by topic id, see :mod:`.tables`). The
worker process (:mod:`.worker`) decodes each slice into Arrow columns and keeps them; every
``iceberg.commit.interval.ms`` (or sooner, once 64 MiB are waiting) the translator has it
commit them with the offset after them as one Iceberg snapshot. A crash loses only what was
not committed, which the next leader reads again from the committed offset: no record is
missed or added twice. Retention deletes segments of the topic, never rows of the table;
records it removed before they were translated are skipped with a warning.

How translation gives way to the produce path: all of its CPU work (decoding, Avro, Parquet,
the catalog) is in the worker, a separate process at the lowest CPU priority (nice 19), so it
never holds the broker's GIL and the kernel runs it only on CPU the broker leaves; when it is
behind, it falls further behind rather than slowing produces. The broker's part is small and
bounded: per step, a look at the partition's bounds and a read of at most 1 MiB (its bytes
pread on a thread, then handed to the worker), and the loop is yielded between steps. The loop
never waits for the worker.

Threads: the translators are tasks on the broker's event loop, which owns the partitions.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import multiprocessing
import uuid
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from odradek.client.data import AbortedTransaction
from odradek.clock import Clock
from odradek.cluster.metadata.store import kafka_uuid
from odradek.iceberg import worker
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.security.client_settings import ClientSecurity

if TYPE_CHECKING:
    from odradek.cluster.replication.partition import Partition
    from odradek.cluster.topics import TopicManager
    from odradek.iceberg.tables import TableSpec

log = logging.getLogger(__name__)

T = TypeVar("T")

STEP_BYTES = 1 << 20
_SYNC_INTERVAL_S = 1.0
_SEEN_EVERY_MS = 100
_SEEN_MAX = 10_000
_MAX_BACKOFF_S = 5.0


@dataclass(frozen=True, slots=True)
class TranslatorFigures:
    """One partition's translation at the time of a scrape."""

    topic: str
    partition: int
    lag_records: int  # between the table's offset and the high watermark
    lag_seconds: float  # how long the oldest record not in the table has been committed
    translated: int  # records committed to the table by this broker since it started
    dead_letters: int
    errors: int


class TableTranslation:
    """The broker's translators and their worker process (see the module doc). Event loop
    only."""

    def __init__(
        self,
        topics: TopicManager,
        clock: Clock,
        catalog_properties: dict[str, str],
        bootstrap: str,
        security: ClientSecurity,
    ) -> None:
        self.topics = topics
        self.clock = clock
        self._worker_args = (catalog_properties, bootstrap, security)
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self.translators: dict[tuple[str, int], PartitionTranslator] = {}
        self._task: asyncio.Task[None] | None = None

    async def in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the worker process (started when first needed, and again after it
        died); the loop goes on meanwhile."""
        if self._pool is None:
            # spawn: a fresh interpreter, not a fork of a process with threads and a loop.
            self._pool = concurrent.futures.ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=worker.start_worker,
                initargs=self._worker_args,
            )
        pool = self._pool
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
        except BrokenProcessPool:
            if self._pool is pool:
                self._pool = None
                pool.shutdown(wait=False)
            raise

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
        # By topic: a broker of many partitions and no tables pays one look per topic.
        for topic in self.topics.topics():
            config = self.topics.topic_config(topic.name)
            mode = str(config.get("iceberg.mode"))
            if mode == "disabled" or topic.name.startswith("__"):
                continue
            from odradek.iceberg.tables import TableSpec

            spec = TableSpec(
                str(config.get("iceberg.namespace")),
                topic.name,
                mode,
                str(config.get("iceberg.partition.spec")),
                kafka_uuid(topic.topic_id),
            )
            interval_ms = config.get_int("iceberg.commit.interval.ms")
            for index in range(topic.partitions):
                partition = self.topics.partition(topic.name, index)
                if partition is not None and partition.is_leader and not partition.log.offline:
                    wanted[(topic.name, index)] = (partition, spec, interval_ms)
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
        pool, self._pool = self._pool, None
        if pool is not None:
            # A commit under way finishes (or not: the table is whole either way) in the
            # worker, which exits after it; the broker does not wait.
            pool.shutdown(wait=False, cancel_futures=True)

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
        # ``token`` names this translator's rows in the worker, None until the table is read
        # (again, after a failure).
        self.committed: int | None = None
        self.token: str | None = None
        self.next_offset = 0
        self.pending_bytes = 0
        self.last_commit_ms = owner.clock.monotonic_ms()
        # (high watermark, when first seen) in order: the records from the table's offset
        # on have waited since the first entry above that offset (lag in seconds).
        self._seen: collections.deque[tuple[int, int]] = collections.deque(maxlen=_SEEN_MAX)
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

    def _note_high_watermark(self, now_ms: int) -> int:
        """Records the high watermark's moves; returns the offset the table holds up to."""
        start = self.partition.log.log_start_offset
        done = max(self.committed if self.committed is not None else start, start)
        high_watermark = self.partition.high_watermark
        seen = self._seen
        if high_watermark > done and (
            not seen or (high_watermark > seen[-1][0] and now_ms - seen[-1][1] >= _SEEN_EVERY_MS)
        ):
            seen.append((high_watermark, now_ms))
        while seen and seen[0][0] <= done:
            seen.popleft()
        return done

    def figures(self, now_ms: int) -> TranslatorFigures:
        done = self._note_high_watermark(now_ms)
        lag = max(self.partition.high_watermark - done, 0)
        waited_since = self._seen[0][1] if self._seen else now_ms
        return TranslatorFigures(
            self.spec.topic,
            self.partition.index,
            lag,
            (now_ms - waited_since) / 1000 if lag else 0.0,
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
                    exc_info=failures == 1 and not isinstance(e, worker.StaleTranslation),
                )
                self.token = None
                await asyncio.sleep(min(0.1 * 2**failures, _MAX_BACKOFF_S))

    async def _round(self) -> None:
        if self.token is None:
            await self._load()
        progressed = await self._step()
        now = self.owner.clock.monotonic_ms()
        due = now - self.last_commit_ms >= self.interval_ms
        if self.next_offset != self.committed and (
            due or self.pending_bytes >= worker.MAX_PENDING_BYTES
        ):
            await self._commit()
        elif due:
            self.last_commit_ms = now
        self._note_high_watermark(now)
        if progressed:
            await asyncio.sleep(0)  # the produce path's turn
        else:
            await self._idle(max(self.last_commit_ms + self.interval_ms - now, 1))

    async def _load(self) -> None:
        token = uuid.uuid4().hex
        committed = await self.owner.in_worker(worker.begin, self.spec, self.partition.index, token)
        start = self.partition.log.log_start_offset
        end = self.partition.log.log_end_offset
        if committed is not None and committed < start:
            log.warning(
                "iceberg: %s: records %d..%d were deleted by retention before they were translated",
                self.partition.name,
                committed,
                start - 1,
            )
        elif committed is not None and committed > end:
            log.warning(
                "iceberg: %s: the table holds records up to offset %d, past the log's end %d "
                "(an unclean election, or a topic deleted and made again before its table "
                "recorded its topic id): nothing is translated until the log passes it",
                self.partition.name,
                committed,
                end,
            )
        self.committed = committed
        self.next_offset = max(committed if committed is not None else start, start)
        self.pending_bytes = 0
        self.token = token
        self.last_commit_ms = self.owner.clock.monotonic_ms()

    async def _step(self) -> bool:
        """Read the next slice below the last stable offset and have the worker decode it;
        False when there is none."""
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
        data = await asyncio.to_thread(piece.read_bytes)
        assert self.token is not None
        translated = await self.owner.in_worker(
            worker.translate,
            self.spec,
            partition.index,
            self.token,
            data,
            self.next_offset,
            bound,
            aborted,
        )
        if translated.next_offset <= self.next_offset:
            return False
        self.next_offset = translated.next_offset
        self.pending_bytes = translated.pending_bytes
        return True

    async def _commit(self) -> None:
        assert self.token is not None
        end = self.next_offset
        outcome = await self.owner.in_worker(
            worker.commit, self.spec, self.partition.index, self.token, self.committed, end
        )
        if not outcome.done:
            self.token = None  # read the table again
            return
        self.committed = end
        self.translated += outcome.rows
        self.dead_letters += outcome.dead
        self.pending_bytes = 0
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
