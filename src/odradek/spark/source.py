"""The ``odradek`` PySpark data source: batch and streaming reads, in Spark's Kafka layout.

Where each piece runs, which decides what it may hold:

- :class:`OdradekDataSource` and the readers are made in Spark's planner processes and pickled
  to executors, so their ``__init__`` only parses options; a reader opens a
  :class:`~odradek.client.data.DataClient` lazily and never pickles it.
- The streaming reader's ``initialOffset`` / ``latestOffset`` / ``partitions`` run on the driver
  in one long-lived process per query; ``read`` runs on executors, where clients are cached per
  worker process (Spark reuses workers) so tasks do not reconnect.

Exactly-once reads: a micro-batch is the offsets ``start``..``end`` Spark wrote to its offset
log before running it; ``partitions(start, end)`` is a pure function of the two, and ``read``
returns exactly the records with those offsets, so a replayed batch reads what the first
attempt read, and a restarted query continues where its checkpoint ends.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.client.data import (
    EARLIEST,
    LATEST,
    DataClient,
    OffsetOutOfRange,
    TopicPartition,
    aborted_batches,
)
from odradek.security.client_settings import ClientSecurity
from odradek.spark.offsets import (
    OffsetJson,
    OffsetRange,
    Offsets,
    from_json,
    limit_offsets,
    new_offsets,
    split_ranges,
    to_json,
)
from odradek.spark.options import (
    OffsetSpec,
    OptionError,
    ReadOptions,
    Subscription,
    bootstrap_and_topics,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from odradek.spark.typed import ColumnFormat

# Spark runs each streaming query's offset planning in a Python process of its own, started for
# the query (the driver's "streaming source runner"): what this module imports at the top is
# imported there once per query, so the decoding side (odradek.spark.arrow, pyarrow.compute) and
# the typed columns (odradek.spark.typed) are imported where they are used.

log = logging.getLogger("odradek.spark")

FORMAT = "odradek"

HEADER_STRUCT = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
KAFKA_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
SCHEMA = StructType(KAFKA_FIELDS)
SCHEMA_WITH_HEADERS = StructType([*KAFKA_FIELDS, StructField("headers", ArrayType(HEADER_STRUCT))])


class DataLossError(RuntimeError):
    """Offsets a query was to read are gone, and failOnDataLoss is true."""


def _data_loss(options: ReadOptions, message: str) -> None:
    """Fail, or log and go on, as failOnDataLoss says."""
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{message}. If the query should skip data that is gone instead of failing, set "
            "the source option failOnDataLoss to false."
        )
    log.warning("%s; skipping it because failOnDataLoss is false", message)


# -- the data source -------------------------------------------------------------------------


class OdradekDataSource(DataSource):
    """``spark.read.format("odradek")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _option(self, name: str) -> str | None:
        for key, value in self.options.items():
            if key.lower() == name.lower():
                return str(value)
        return None

    def _column_formats(self) -> tuple[ColumnFormat, ...]:
        """The typed key/value columns' reader schemas, looked up once: ``schema()`` runs
        first, on the driver, and Spark pickles this instance, lookups included, to where the
        readers are made."""
        found: tuple[ColumnFormat, ...] | None = getattr(self, "_formats", None)
        if found is None:
            from odradek.spark.typed import RegistryAccess, format_requests, resolve

            requests = format_requests(self.options)
            found = ()
            if requests:
                bootstrap, topics = bootstrap_and_topics(self.options)
                found = resolve(requests, RegistryAccess.parse(self.options, bootstrap), topics)
            self._formats = found
        return found

    def schema(self) -> StructType:
        headers = (self._option("includeHeaders") or "false").strip().lower() == "true"
        base = SCHEMA_WITH_HEADERS if headers else SCHEMA
        formats = self._column_formats()
        if not formats:
            return base
        typed = {f.column: f.spark_type() for f in formats}
        return StructType(
            [
                StructField(f.name, typed[f.name], True) if f.name in typed else f
                for f in base.fields
            ]
        )

    def reader(self, schema: StructType) -> DataSourceReader:
        return OdradekBatchReader(
            ReadOptions.parse(self.options, streaming=False), self._column_formats()
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OdradekStreamReader(
            ReadOptions.parse(self.options, streaming=True), formats=self._column_formats()
        )

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from odradek.spark.sink import OdradekBatchWriter

        if overwrite:
            raise OptionError(
                "the odradek sink appends records to topics; save mode overwrite is not "
                "supported (use mode append)"
            )
        return OdradekBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from odradek.spark.sink import OdradekStreamWriter

        return OdradekStreamWriter(self.options, schema)


# -- the driver's view of the cluster ----------------------------------------------------------


class _Planner:
    """Partitions and offsets, looked up on the driver through a lazily opened client."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._client: DataClient | None = None

    @property
    def client(self) -> DataClient:
        if self._client is None:
            self._client = DataClient(
                self.options.bootstrap,
                client_id="odradek-spark-driver",
                isolation_level=self.options.isolation_level,
                security=self.options.security,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now."""
        sub: Subscription = self.options.subscription
        if sub.assigned:
            topics = self.client.describe({tp.topic for tp in sub.assigned})
            return [
                tp
                for tp in sub.assigned
                if tp.topic in topics and tp.partition < topics[tp.topic].partitions
            ]
        if sub.pattern is not None:
            pattern = re.compile(sub.pattern)
            infos = [
                t
                for t in self.client.topics().values()
                if not t.internal and pattern.fullmatch(t.name)
            ]
        else:
            infos = list(self.client.describe(sub.topics).values())
        return sorted(TopicPartition(t.name, p) for t in infos for p in range(t.partitions))

    def resolve(
        self, spec: OffsetSpec, partitions: Sequence[TopicPartition], *, start: bool
    ) -> Offsets:
        """Concrete offsets for ``partitions`` from a starting or ending spec."""
        if not partitions:
            return {}
        client = self.client
        if spec.by_timestamp:
            wanted = {
                tp: spec.timestamp
                if spec.timestamp is not None
                else spec.per_partition_timestamps[tp]
                for tp in partitions
                if spec.timestamp is not None or tp in spec.per_partition_timestamps
            }
            found = client.list_offsets(wanted, wanted) if wanted else {}
            result: Offsets = {}
            missing = [tp for tp, offset in found.items() if offset < 0]
            latest = client.latest(missing) if missing else {}
            for tp, offset in found.items():
                if offset >= 0:
                    result[tp] = offset
                elif start and not self.options.timestamp_strategy_latest:
                    raise OptionError(
                        f"no record of {tp} has a timestamp at or after {wanted[tp]}; set "
                        "startingOffsetsByTimestampStrategy to latest to start such partitions "
                        "at their latest offset"
                    )
                else:
                    result[tp] = latest[tp]
            rest = [tp for tp in partitions if tp not in wanted]
            result.update(self._by_default(spec.default, rest))
            return result
        result = {}
        explicit = {tp: spec.per_partition[tp] for tp in partitions if tp in spec.per_partition}
        need_earliest = [tp for tp, o in explicit.items() if o == EARLIEST]
        need_latest = [tp for tp, o in explicit.items() if o == LATEST]
        earliest = client.earliest(need_earliest) if need_earliest else {}
        latest = client.latest(need_latest) if need_latest else {}
        for tp, offset in explicit.items():
            result[tp] = earliest[tp] if offset == EARLIEST else latest.get(tp, offset)
        result.update(
            self._by_default(spec.default, [tp for tp in partitions if tp not in explicit])
        )
        return result

    def _by_default(self, default: int, partitions: Sequence[TopicPartition]) -> Offsets:
        if not partitions:
            return {}
        return self.client.list_offsets(partitions, default)


# -- input partitions and the executor side ----------------------------------------------------


class OffsetRangePartition(InputPartition):
    """One task's work: offsets ``start``..``end - 1`` of ``topic``-``partition``."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


def _input_partitions(ranges: Sequence[OffsetRange]) -> list[OffsetRangePartition]:
    return [
        OffsetRangePartition(r.partition.topic, r.partition.partition, r.start, r.end)
        for r in ranges
    ]


# Executors reuse their Python workers across tasks; a client per cluster (and isolation level)
# per worker saves a connection (and an ApiVersions round trip) per task.
_EXECUTOR_CLIENTS: dict[tuple[str, int, ClientSecurity], DataClient] = {}


def executor_client(
    bootstrap: str, isolation_level: int = 0, security: ClientSecurity | None = None
) -> DataClient:
    key = (bootstrap, isolation_level, security or ClientSecurity())
    client = _EXECUTOR_CLIENTS.get(key)
    if client is None:
        client = DataClient(
            bootstrap,
            client_id="odradek-spark-executor",
            isolation_level=isolation_level,
            security=security,
        )
        _EXECUTOR_CLIENTS[key] = client
    return client


def _typed(batch: pa.RecordBatch, formats: Sequence[ColumnFormat]) -> pa.RecordBatch:
    """``batch`` with its key and value columns decoded as ``formats`` say."""
    import pyarrow as pa

    from odradek.spark.typed import decoder

    columns = list(batch.columns)
    fields = list(batch.schema)
    for column in formats:
        at = batch.schema.get_field_index(column.column)
        columns[at] = decoder(column).decode(columns[at])
        fields[at] = pa.field(column.column, columns[at].type)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def read_range(
    options: ReadOptions, part: OffsetRangePartition, formats: Sequence[ColumnFormat] = ()
) -> Iterator[pa.RecordBatch]:
    """The records of one offset range as Arrow batches, one per Fetch response (for
    read_committed: without the batches of aborted transactions), with typed key and value
    columns decoded as ``formats`` say."""
    from odradek.spark.arrow import records_to_arrow

    client = executor_client(options.bootstrap, options.isolation_level, options.security)
    tp = TopicPartition(part.topic, part.partition)
    offset = part.start
    end = part.end
    while offset < end:
        try:
            reached = offset
            high_watermark = end
            for fetched in client.fetch_range(tp, offset, end, max_bytes=options.fetch_max_bytes):
                batch = records_to_arrow(
                    fetched.records,
                    part.topic,
                    part.partition,
                    offset,
                    end,
                    include_headers=options.include_headers,
                    skip=aborted_batches(fetched.records, fetched.aborted),
                )
                reached = max(reached, fetched.next_offset)
                high_watermark = fetched.high_watermark
                offset = reached
                if batch.num_rows:
                    yield _typed(batch, formats) if formats else batch
        except OffsetOutOfRange as e:
            if e.log_start_offset > offset:
                gone_until = min(e.log_start_offset, end)
                _data_loss(
                    options,
                    f"offsets {offset}..{gone_until - 1} of {tp} are no longer in odradek (the "
                    f"partition now begins at offset {e.log_start_offset}): retention or "
                    "DeleteRecords removed them before this query read them",
                )
                offset = e.log_start_offset
                continue
            _data_loss(
                options,
                f"{tp} ends at offset {e.high_watermark}, before offset {offset} that this "
                "query was to read (was the topic deleted and created again?)",
            )
            return
        if reached < end:
            _data_loss(
                options,
                f"{tp} ends at offset {high_watermark}, but this query was to read up to offset "
                f"{end - 1} (was the topic deleted and created again?)",
            )
        return


# -- batch -----------------------------------------------------------------------------------


class OdradekBatchReader(DataSourceReader):
    """``spark.read``: the offsets between startingOffsets and endingOffsets, fixed at planning."""

    def __init__(self, options: ReadOptions, formats: tuple[ColumnFormat, ...] = ()) -> None:
        self.options = options
        self.formats = formats

    def partitions(self) -> Sequence[InputPartition]:
        planner = _Planner(self.options)
        try:
            tps = planner.partitions()
            starts = planner.resolve(self.options.starting, tps, start=True)
            ends = planner.resolve(self.options.ending, tps, start=False)
        finally:
            planner.close()
        ranges = []
        for tp in tps:
            if starts[tp] > ends[tp]:
                raise OptionError(
                    f"the starting offset {starts[tp]} of {tp} is after its ending offset "
                    f"{ends[tp]}"
                )
            ranges.append(OffsetRange(tp, starts[tp], ends[tp]))
        return _input_partitions(
            split_ranges(
                ranges, self.options.min_partitions, self.options.max_records_per_partition
            )
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRangePartition)
        return read_range(self.options, partition, self.formats)


# -- streaming -------------------------------------------------------------------------------


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches of offset ranges, rate-limited as Spark's Kafka
    source is (maxOffsetsPerTrigger, minOffsetsPerTrigger with maxTriggerDelay)."""

    def __init__(
        self,
        options: ReadOptions,
        clock: Callable[[], float] = time.time,
        formats: tuple[ColumnFormat, ...] = (),
    ) -> None:
        self.options = options
        self.formats = formats
        self._clock = clock
        self._planner: _Planner | None = None
        self._target: Offsets | None = None  # Trigger.AvailableNow: never read past these
        self._last_trigger_ms: float | None = None
        self._latest: Offsets | None = None
        # Spark asks for the initial offset more than once while it starts a query without a
        # checkpoint; the first answer is the query's (as in Spark's Kafka source), so a
        # "latest" start does not move between the calls, nor cost the broker a second lookup.
        self._initial: OffsetJson | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_planner"] = None  # sockets stay where they were opened
        return state

    @property
    def planner(self) -> _Planner:
        if self._planner is None:
            self._planner = _Planner(self.options)
        return self._planner

    def initialOffset(self) -> OffsetJson:
        if self._initial is None:
            planner = self.planner
            tps = planner.partitions()
            self._initial = to_json(planner.resolve(self.options.starting, tps, start=True))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.planner.partitions()
        self._target = self.planner.client.latest(tps) if tps else {}

    def _available(self, start: Offsets) -> Offsets:
        """The latest offsets to read up to, checking partitions that vanished or shrank."""
        if self._target is not None:
            latest = dict(self._target)
        else:
            tps = self.planner.partitions()
            latest = self.planner.client.latest(tps) if tps else {}
        for tp, offset in start.items():
            if tp not in latest and self._target is None:
                _data_loss(
                    self.options,
                    f"{tp} is gone (topic deleted?) with offsets from {offset} unread",
                )
            elif tp in latest and latest[tp] < offset:
                _data_loss(
                    self.options,
                    f"{tp} now ends at offset {latest[tp]}, before offset {offset} that this "
                    "query had reached (was the topic deleted and created again?)",
                )
        return latest

    def latestOffset(self, start: OffsetJson, limit: ReadLimit) -> OffsetJson:
        begin = from_json(start)
        latest = self._available(begin)
        self._latest = latest
        # Partitions the query already has but that shrank keep their place; their range is
        # dropped in partitions() (reported above).
        for tp, offset in begin.items():
            if tp in latest and latest[tp] < offset:
                latest[tp] = offset
        if not isinstance(limit, ReadAllAvailable):
            now_ms = self._clock() * 1000
            if self._last_trigger_ms is None:
                self._last_trigger_ms = now_ms
            minimum = self.options.min_offsets_per_trigger
            if isinstance(limit, ReadMinRows):
                minimum = limit.min_rows
            waited = now_ms - self._last_trigger_ms
            if (
                minimum is not None
                and self._target is None  # AvailableNow would wait forever for more
                and new_offsets(begin, latest) < minimum
                and waited < self.options.max_trigger_delay_ms
            ):
                return to_json({tp: o for tp, o in begin.items() if tp in latest})
            maximum = self.options.max_offsets_per_trigger
            if isinstance(limit, ReadMaxRows):
                maximum = limit.max_rows
            if maximum is not None:
                latest = limit_offsets(begin, latest, maximum)
        end = to_json(latest)
        if end != start:
            self._last_trigger_ms = self._clock() * 1000
        return end

    def reportLatestOffset(self) -> OffsetJson | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: OffsetJson, end: OffsetJson) -> Sequence[InputPartition]:
        begin = from_json(start)
        ranges = []
        for tp, until in sorted(from_json(end).items()):
            # A partition new to the query starts at 0, as in Spark's Kafka source: if its log
            # starts later, the read reports the gap as data loss.
            since = begin.get(tp, 0)
            if until < since:
                continue  # reported by latestOffset
            ranges.append(OffsetRange(tp, since, until))
        return _input_partitions(
            split_ranges(
                ranges, self.options.min_partitions, self.options.max_records_per_partition
            )
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRangePartition)
        return read_range(self.options, partition, self.formats)

    def commit(self, end: OffsetJson) -> None:
        pass  # offsets live in Spark's checkpoint; nothing to tell the broker

    def stop(self) -> None:
        if self._planner is not None:
            self._planner.close()
            self._planner = None
