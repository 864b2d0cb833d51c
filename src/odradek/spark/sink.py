"""The ``odradek`` sink: DataFrame rows to records, batch and streaming, at least once.

Columns as Spark's Kafka sink takes them: ``value`` (required, string or binary), ``key``
(string or binary), ``headers`` (array of struct<key string, value binary>), ``topic`` (string;
the ``topic`` option overrides it) and ``partition`` (int; when absent or null, the partition
is chosen as Kafka's Java producer chooses it: murmur2 of the key, or, for records without a
key, one partition per batch in turn). Other columns are ignored.

With ``valueFormat=avro``, ``json`` or ``protobuf`` (``keyFormat``) the value (key) column may
be of any type with a form in that format — a struct, typically, as the source's typed
``value`` column is — and is written in Confluent's framing (magic byte 0, the schema id, for
Protobuf the message indexes, the body) with the schema registered for ``valueSubject``
(default ``<topic>-value``, the ``topic`` option's): its latest version (or
``valueSchemaVersion``), or, with ``autoRegister=true`` (Avro and JSON), the Avro or JSON Schema
form of the column's Spark type, registered as a new version when it is new. Protobuf rows are
the message ``valueMessageName`` names (by default the schema's first); see
:mod:`odradek.spark.typed`. Without a value column, the value is a record
of all the columns but key, topic, partition and headers. The schema is looked up (or
registered) once, where the write or the streaming query starts.

Each task encodes its rows into RecordBatch v2 batches and produces them with up to five
requests in flight, waiting for the acknowledgements (``kafka.acks``, default all) before it
reports success. A failed delivery raises, the task fails and Spark retries it: records can be
written twice, never lost — at-least-once, like Spark's own Kafka sink.

**Exactly once** (option ``exactlyOnce=true``): each task writes its rows in one Kafka
transaction and records, in the same transaction, that it did. Spark may run a task again (a
retried task, a speculative copy) and, after the driver died, a whole micro-batch again — the
same batch id over the same input, since the batch's source offsets were in the checkpoint's
offset log before it ran. So a task of write ``W`` (the streaming query's id, which survives
restarts from the checkpoint; a fresh id per batch write), batch ``B`` and Spark partition ``P``:

1. takes the transactional id ``<transactionalIdPrefix>-W-P``; InitProducerId bumps its epoch,
   which fences any earlier attempt still running (its produce and EndTxn then fail) and aborts
   the transaction such an attempt left open, waiting until that abort is complete;
2. reads the offset its "done" marker has (OffsetFetch with require_stable): group
   ``<transactional id>``, partition 0 of the first row's topic (TxnOffsetCommit needs a
   partition that exists). An offset of at least ``B`` means an earlier attempt committed this
   batch: the task writes nothing;
3. otherwise begins a transaction, produces its rows as transactional batches (producer id,
   epoch and per-partition sequence numbers; AddPartitionsToTxn before a partition's first
   request), commits offset ``B`` for the marker (AddOffsetsToTxn, TxnOffsetCommit) and ends
   the transaction with EndTxn commit. Rows and marker become visible together or not at all.

A read_committed reader of the output therefore sees each input row once however often tasks
or the driver died. A task that fails aborts its transaction when it still can; otherwise the
next attempt's InitProducerId, or the transaction timeout (``kafka.transaction.timeout.ms``,
default 60 s) aborts it. Costs, per task and micro-batch and not per row: about eight requests
to the coordinators (finding them, InitProducerId, OffsetFetch, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn); Produce requests that carry at most one batch per
partition, as Kafka's producers send sequenced batches; and one group per transactional id (an
empty group holding one offset, expired by the broker's ``offsets.retention.minutes`` once the
query stops). Tasks with no rows open no transaction.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import struct
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.client.blocking import BlockingConnection
from odradek.client.core import ClientError, Request
from odradek.client.data import DataClient, TopicPartition
from odradek.client.transactions import TransactionalProducer
from odradek.protocol import compression as codecs
from odradek.protocol.record_batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TRANSACTIONAL_BIT,
)
from odradek.protocol.records import zigzag_varint
from odradek.security.client_settings import ClientSecurity
from odradek.spark.options import OptionError, WriteOptions
from odradek.spark.typed import (
    FormatError,
    RegistryAccess,
    SinkFormat,
    auto_register,
    encode,
    sink_format,
    sink_formats,
)

_MAX_IN_FLIGHT = 5
_HEADER = struct.Struct(">qiibIhiqqqhii")

# -- encoding ----------------------------------------------------------------------------------


_SMALL = [zigzag_varint(i) for i in range(1 << 14)]
_NULL = zigzag_varint(-1)


def _varint(value: int) -> bytes:
    return _SMALL[value] if 0 <= value < 16384 else zigzag_varint(value)


Headers = Sequence[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class ProducerStamp:
    """The producer fields of a transactional batch's header."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


def encode_records(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Headers | None] | None,
    *,
    timestamp_ms: int,
    timestamps: Sequence[int] | None = None,
    compression: int = codecs.NONE,
    producer: ProducerStamp | None = None,
) -> bytes:
    """One RecordBatch v2 holding the records, offsets from 0, each stamped with its entry in
    ``timestamps`` or, without them, all with ``timestamp_ms``; transactional when ``producer``
    is given."""
    count = len(values)
    parts: list[bytes] = []
    append = parts.append
    base_timestamp = timestamps[0] if timestamps else timestamp_ms
    max_timestamp = max(timestamps) if timestamps else timestamp_ms
    for i in range(count):
        key = keys[i]
        value = values[i]
        record_headers = headers[i] if headers is not None else None
        if record_headers:
            encoded = [_varint(len(record_headers))]
            for name, data in record_headers:
                raw_name = name.encode()
                encoded.append(_varint(len(raw_name)) + raw_name)
                encoded.append(_NULL if data is None else _varint(len(data)) + data)
            tail = b"".join(encoded)
        else:
            tail = b"\x00"
        record = b"".join(
            (
                b"\x00",  # attributes
                _varint(timestamps[i] - base_timestamp) if timestamps else b"\x00",
                _varint(i),
                _NULL if key is None else _varint(len(key)),
                key or b"",
                _NULL if value is None else _varint(len(value)),
                value or b"",
                tail,
            )
        )
        append(_varint(len(record)))
        append(record)
    return _batch(b"".join(parts), count, base_timestamp, max_timestamp, compression, producer)


def _varint_bytes(
    values: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Zigzag varints of ``values`` as an (n, 10) byte matrix and their sizes."""
    raw = ((values << 1) ^ (values >> 63)).astype(np.uint64)
    sizes = np.ones(len(values), dtype=np.int64)
    largest = int(raw.max()) if len(values) else 0
    k = 1
    while k < 10 and largest >= 1 << (7 * k):
        sizes += raw >= np.uint64(1 << (7 * k))
        k += 1
    width = int(sizes.max()) if len(values) else 1
    shifts = (np.arange(width, dtype=np.uint64) * np.uint64(7))[None, :]
    matrix = ((raw[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    more = np.arange(width)[None, :] < (sizes - 1)[:, None]
    matrix |= more.astype(np.uint8) << 7
    return matrix, sizes


def _small_binaries(
    parts: Sequence[tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]],
) -> pa.Array:
    """A binary array whose element ``i`` joins the first ``sizes[i]`` bytes of each part's
    row ``i``: short per-record byte strings built without per-record Python."""
    matrix = np.hstack([m for m, _ in parts])
    keep = np.hstack([np.arange(m.shape[1])[None, :] < z[:, None] for m, z in parts])
    data = matrix[keep]  # row by row: the elements one after another
    lengths = np.sum([z for _, z in parts], axis=0)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


def encode_arrow_records(
    keys: pa.Array | None,
    values: pa.Array,
    *,
    timestamp_ms: int,
    compression: int = codecs.NONE,
    producer: ProducerStamp | None = None,
) -> bytes:
    """One RecordBatch v2 of binary ``keys`` (or none) and ``values``, without headers — as
    :func:`encode_records` makes it, but column-wise: each record's few bytes of lengths and
    deltas are built for all records at once with numpy, and Arrow's C++ joins them with the
    keys and values."""
    n = len(values)
    value_lengths = pc.binary_length(values).fill_null(-1).to_numpy().astype(np.int64)
    if keys is None:
        key_lengths = np.full(n, -1, dtype=np.int64)
    else:
        key_lengths = pc.binary_length(keys).fill_null(-1).to_numpy().astype(np.int64)
    deltas = np.arange(n, dtype=np.int64)
    delta_bytes, delta_sizes = _varint_bytes(deltas)
    key_bytes, key_sizes = _varint_bytes(key_lengths)
    value_len_bytes, value_len_sizes = _varint_bytes(value_lengths)
    body = (
        2  # attributes, timestamp delta
        + delta_sizes
        + key_sizes
        + np.maximum(key_lengths, 0)
        + value_len_sizes
        + np.maximum(value_lengths, 0)
        + 1  # header count
    )
    length_bytes, length_sizes = _varint_bytes(body)
    zeros = (np.zeros((n, 2), dtype=np.uint8), np.full(n, 2, dtype=np.int64))
    heads = _small_binaries(
        [(length_bytes, length_sizes), zeros, (delta_bytes, delta_sizes), (key_bytes, key_sizes)]
    )
    value_heads = _small_binaries([(value_len_bytes, value_len_sizes)])
    joined = pc.binary_join_element_wise(
        heads,
        keys.fill_null(b"") if keys is not None else pa.scalar(b""),
        value_heads,
        values.fill_null(b""),
        pa.scalar(b"\x00"),  # no headers
        b"",
    )
    offsets = np.frombuffer(
        joined.buffers()[1], dtype=np.int32, count=n + 1, offset=joined.offset * 4
    )
    records = memoryview(joined.buffers()[2])[offsets[0] : offsets[n]]
    return _batch(records, n, timestamp_ms, timestamp_ms, compression, producer)


def _batch(
    body: bytes | memoryview,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: int,
    producer: ProducerStamp | None = None,
) -> bytes:
    """The 61-byte header (offsets from 0; no producer id, or ``producer``'s and the
    transactional bit) and ``body``, the records."""
    if compression != codecs.NONE:
        body = codecs.compress(compression, body)
    attributes = compression
    producer_id, epoch, sequence = -1, -1, -1
    if producer is not None:
        attributes |= TRANSACTIONAL_BIT
        producer_id = producer.producer_id
        epoch = producer.producer_epoch
        sequence = producer.base_sequence
    header = bytearray(HEADER_SIZE)
    _HEADER.pack_into(
        header,
        0,
        0,  # base offset: the broker assigns it
        HEADER_SIZE + len(body) - LOG_OVERHEAD,
        -1,  # partition leader epoch
        MAGIC,
        0,  # crc, below
        attributes,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        epoch,
        sequence,
        count,
    )
    crc = crc32c.crc32c(body, crc32c.crc32c(bytes(header[CRC_START:])))
    struct.pack_into(">I", header, 17, crc)
    return b"".join((header, body))


def murmur2_many(keys: pa.Array) -> npt.NDArray[np.int32]:
    """:func:`murmur2` of every key of a binary array without nulls, vectorised per key length
    (keys of one length form a matrix, hashed a 4-byte column at a time)."""
    n = len(keys)
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out.view(np.int32)
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32, count=n + 1, offset=keys.offset * 4)
    data_buffer = keys.buffers()[2]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, np.uint8)
    )
    lengths = np.diff(offsets)
    m = np.uint32(0x5BD1E995)
    with np.errstate(over="ignore"):
        for length in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths == length)
            matrix = data[offsets[rows][:, None] + np.arange(length)] if length else None
            h = np.full(len(rows), (0x9747B28C ^ length) & 0xFFFFFFFF, dtype=np.uint32)
            whole = length - length % 4
            if whole:
                assert matrix is not None
                words = np.ascontiguousarray(matrix[:, :whole]).view("<u4").astype(np.uint32)
                for j in range(whole // 4):
                    k = words[:, j] * m
                    k ^= k >> np.uint32(24)
                    k *= m
                    h = (h * m) ^ k
            rest = length % 4
            if rest:
                assert matrix is not None
                if rest == 3:
                    h ^= matrix[:, whole + 2].astype(np.uint32) << np.uint32(16)
                if rest >= 2:
                    h ^= matrix[:, whole + 1].astype(np.uint32) << np.uint32(8)
                h ^= matrix[:, whole].astype(np.uint32)
                h *= m
            h ^= h >> np.uint32(13)
            h *= m
            h ^= h >> np.uint32(15)
            out[rows] = h
    return out.view(np.int32)


# -- schema ------------------------------------------------------------------------------------

_HEADERS_TYPE = ArrayType(
    StructType().add("key", StringType()).add("value", BinaryType()), containsNull=True
)


def _check_type(name: str, actual: DataType, allowed: Sequence[DataType]) -> None:
    if not any(type(actual) is type(a) for a in allowed):
        names = " or ".join(a.simpleString() for a in allowed)
        raise OptionError(
            f"column {name} of the odradek sink must be {names}, not {actual.simpleString()}"
        )


@dataclass(frozen=True, slots=True)
class _Columns:
    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool
    # keyFormat / valueFormat: the schema the column is written with
    key_format: SinkFormat | None = None
    value_format: SinkFormat | None = None
    # valueFormat without a value column: the value is a record of these columns
    value_fields: tuple[str, ...] = ()


_RESERVED = ("key", "value", "topic", "partition", "headers")


def _value_type(schema: StructType) -> DataType:
    """The Spark type a typed value is written as: the value column's, or, without one, a
    record of every column but key, topic, partition and headers."""
    fields = {f.name.lower(): f for f in schema.fields}
    if "value" in fields:
        return fields["value"].dataType
    rest = [f for f in schema.fields if f.name.lower() not in _RESERVED]
    if not rest:
        raise OptionError("the odradek sink needs a value column or, with valueFormat, columns")
    return StructType(rest)


def _formats(
    raw: Mapping[str, str], schema: StructType, options: WriteOptions
) -> dict[str, SinkFormat]:
    """The typed columns' schemas (registered now with autoRegister): on the driver, once per
    write or streaming query."""
    try:
        requests = sink_formats(raw)
        if not requests:
            return {}
        registry = RegistryAccess.parse(raw, options.bootstrap)
        register = auto_register(raw)
        fields = {f.name.lower(): f for f in schema.fields}
        found = {}
        for request in requests:
            if request.column == "value":
                data_type = _value_type(schema)
            elif "key" in fields:
                data_type = fields["key"].dataType
            else:
                raise OptionError("keyFormat needs a key column")
            found[request.column] = sink_format(
                request, registry, options.topic, data_type, register
            )
        return found
    except FormatError as e:
        raise OptionError(str(e)) from e


def _columns(
    schema: StructType, options: WriteOptions, formats: Mapping[str, SinkFormat] | None = None
) -> _Columns:
    formats = formats or {}
    fields = {f.name.lower(): f for f in schema.fields}
    value_fields: tuple[str, ...] = ()
    if "value" in formats:
        if "value" not in fields:
            value_fields = tuple(f.name for f in schema.fields if f.name.lower() not in _RESERVED)
    elif "value" not in fields:
        raise OptionError("the odradek sink needs a value column (string or binary)")
    else:
        _check_type("value", fields["value"].dataType, [StringType(), BinaryType()])
    if "key" in fields and "key" not in formats:
        _check_type("key", fields["key"].dataType, [StringType(), BinaryType()])
    if "topic" in fields:
        _check_type("topic", fields["topic"].dataType, [StringType()])
    elif options.topic is None:
        raise OptionError("the odradek sink needs the topic option or a topic column (string)")
    if "partition" in fields:
        _check_type("partition", fields["partition"].dataType, [IntegerType()])
    if "headers" in fields:
        headers = fields["headers"].dataType
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
            and isinstance(headers.elementType.fields[0].dataType, StringType)
            and isinstance(headers.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise OptionError(
                "column headers of the odradek sink must be "
                f"{_HEADERS_TYPE.simpleString()}, not {headers.simpleString()}"
            )
    return _Columns(
        "key" in fields,
        "topic" in fields,
        "partition" in fields,
        "headers" in fields,
        formats.get("key"),
        formats.get("value"),
        value_fields,
    )


# -- producing ---------------------------------------------------------------------------------


class _Producer:
    """Encodes rows into batches per partition and produces them, pipelined; inside ``txn``'s
    open transaction when given."""

    def __init__(
        self,
        options: WriteOptions,
        client: DataClient,
        txn: TransactionalProducer | None = None,
    ) -> None:
        self.options = options
        self.client = client
        self.txn = txn
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.in_flight: deque[tuple[BlockingConnection, Request]] = deque()
        self.ready: dict[TopicPartition, list[bytes]] = {}
        self.ready_bytes = 0
        self.records = 0

    def _partitions_of(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is None:
            info = self.client.describe([topic], auto_create=True).get(topic)
            if info is None or info.partitions == 0:
                raise OptionError(f"topic {topic!r} does not exist and was not created")
            count = self.partition_counts[topic] = info.partitions
        return count

    @staticmethod
    def _key_partitions(keys: pa.Array, count: int) -> npt.NDArray[np.int32]:
        """Kafka's partition for each key, -1 for null keys."""
        hashes = murmur2_many(keys.fill_null(b"")) & np.int32(0x7FFFFFFF)
        parts = (hashes % count).astype(np.int32)
        if keys.null_count:
            valid = keys.is_valid().to_numpy(zero_copy_only=False)
            parts[~valid] = -1
        return parts

    def _partitions(
        self,
        topic: str,
        rows: npt.NDArray[np.int64],
        keys: pa.Array | None,
        given: pa.Array | None,
    ) -> npt.NDArray[np.int32]:
        """The partition of each row: its partition column, else its key's, else sticky."""
        count = self._partitions_of(topic)
        taken = pa.array(rows)
        parts = np.full(len(rows), -1, dtype=np.int32)
        if given is not None:
            parts = given.take(taken).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
            bad = (parts >= count) | (parts < -1)
            if bad.any():
                raise OptionError(
                    f"partition {int(parts[bad][0])} does not exist in topic {topic!r} "
                    f"({count} partitions)"
                )
        need = parts < 0
        if keys is not None and need.any():
            parts[need] = self._key_partitions(keys.take(pa.array(rows[need])), count)
            need = parts < 0
        if need.any():
            # Kafka's sticky partitioner keeps keyless records together per batch.
            if topic not in self.sticky:
                self.sticky[topic] = random.randrange(count)
            parts[need] = self.sticky[topic]
        return parts

    def add(self, batch: pa.RecordBatch, columns: _Columns) -> None:
        n = batch.num_rows
        if n == 0:
            return
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def column(name: str) -> pa.Array:
            return batch.column(names[name])

        if columns.value_fields:
            record = pa.StructArray.from_arrays(
                [column(name.lower()) for name in columns.value_fields],
                names=list(columns.value_fields),
            )
            values = encode(columns.value_format, record) if columns.value_format else record
        elif columns.value_format is not None:
            values = encode(columns.value_format, column("value"))
        else:
            values = _binary(column("value"))
        keys = None
        if columns.has_key:
            keys = (
                encode(columns.key_format, column("key"))
                if columns.key_format is not None
                else _binary(column("key"))
            )
        headers = column("headers") if columns.has_headers else None
        if headers is not None and headers.null_count == n:
            headers = None
        given = column("partition") if columns.has_partition else None
        if self.options.topic is not None:
            groups = [(self.options.topic, np.arange(n, dtype=np.int64))]
        else:
            topics = column("topic")
            if topics.null_count:
                raise OptionError(
                    "a row has a null topic; set the topic option or fill the topic column"
                )
            encoded = pc.dictionary_encode(topics)
            which = encoded.indices.to_numpy(zero_copy_only=False)
            groups = [
                (name, np.flatnonzero(which == i))
                for i, name in enumerate(encoded.dictionary.to_pylist())
            ]
        self.records += n
        for topic, rows in groups:
            parts = self._partitions(topic, rows, keys, given)
            order = np.argsort(parts, kind="stable")
            ordered = parts[order]
            cuts = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), len(rows)]
            for lo, hi in itertools.pairwise(cuts):
                selected = pa.array(rows[order[lo:hi]])
                self._encode(
                    TopicPartition(topic, int(ordered[lo])),
                    None if keys is None else keys.take(selected),
                    values.take(selected),
                    None if headers is None else headers.take(selected),
                )
        # Keyless records move on to another partition with the next input batch.
        for topic, partition in list(self.sticky.items()):
            self.sticky[topic] = (partition + 1) % self._partitions_of(topic)

    def _encode(
        self,
        tp: TopicPartition,
        keys: pa.Array | None,
        values: pa.Array,
        headers: pa.Array | None,
    ) -> None:
        """Encode one partition's rows into batches of about batch_bytes and queue them."""
        sizes = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False) + 16
        if keys is not None:
            sizes = sizes + pc.binary_length(keys).fill_null(0).to_numpy(zero_copy_only=False)
        total = np.cumsum(sizes)
        limit = self.options.batch_bytes
        cuts = np.searchsorted(total, np.arange(limit, int(total[-1]), limit), side="right")
        bounds = sorted({0, len(values), *(int(c) for c in cuts if 0 < c < len(values))})
        now_ms = int(time.time() * 1000)
        for lo, hi in itertools.pairwise(bounds):
            chunk_keys = None if keys is None else keys.slice(lo, hi - lo)
            chunk_values = values.slice(lo, hi - lo)
            chunk_headers = None if headers is None else headers.slice(lo, hi - lo)
            stamp = None
            if self.txn is not None:
                stamp = ProducerStamp(
                    self.txn.producer_id,
                    self.txn.producer_epoch,
                    self.txn.next_sequence(tp, hi - lo),
                )
            if chunk_headers is not None and chunk_headers.null_count < hi - lo:
                encoded = encode_records(
                    [None] * (hi - lo) if chunk_keys is None else chunk_keys.to_pylist(),
                    chunk_values.to_pylist(),
                    [
                        None if h is None else [(item["key"], item["value"]) for item in h]
                        for h in chunk_headers.to_pylist()
                    ],
                    timestamp_ms=now_ms,
                    compression=self.options.compression,
                    producer=stamp,
                )
            else:
                encoded = encode_arrow_records(
                    chunk_keys,
                    chunk_values,
                    timestamp_ms=now_ms,
                    compression=self.options.compression,
                    producer=stamp,
                )
            self._queue(tp, encoded)

    def _queue(self, tp: TopicPartition, batch: bytes) -> None:
        if self.txn is not None and tp in self.ready:
            # One batch per partition per request, as Kafka's own producers send sequenced
            # batches (brokers check a request's sequences against what they hold).
            self._send()
        self.ready.setdefault(tp, []).append(batch)
        self.ready_bytes += len(batch)
        if self.ready_bytes >= self.options.request_bytes:
            self._send()

    def _send(self) -> None:
        if not self.ready:
            return
        batches: Mapping[TopicPartition, bytes] = {
            tp: b"".join(chunks) for tp, chunks in self.ready.items()
        }
        self.ready = {}
        self.ready_bytes = 0
        while len(self.in_flight) >= _MAX_IN_FLIGHT:
            self._receive_one()
        transactional_id = None
        if self.txn is not None:
            self.txn.add_partitions(batches)
            transactional_id = self.txn.transactional_id
        self.in_flight.extend(
            self.client.send_produce(
                batches, acks=self.options.acks, transactional_id=transactional_id
            )
        )

    def _receive_one(self) -> None:
        connection, pending = self.in_flight.popleft()
        self.client.receive_produce(connection, pending)

    def flush(self) -> None:
        self._send()
        while self.in_flight:
            self._receive_one()


def _binary(array: pa.Array) -> pa.Array:
    """String columns go out as their UTF-8 bytes."""
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return pc.cast(array, pa.binary())
    return array


@dataclass(frozen=True)
class WriteResult(WriterCommitMessage):
    """What one task wrote (``skipped``: an earlier attempt had committed its rows)."""

    records: int
    skipped: bool = False


_TASK_CLIENTS: dict[tuple[str, ClientSecurity], DataClient] = {}


def _client(bootstrap: str, security: ClientSecurity) -> DataClient:
    # Python workers are reused across tasks; so is their client.
    client = _TASK_CLIENTS.get((bootstrap, security))
    if client is None:
        client = _TASK_CLIENTS[(bootstrap, security)] = DataClient(
            bootstrap, client_id="odradek-spark-sink", security=security
        )
    return client


def write_batches(
    options: WriteOptions, columns: _Columns, batches: Iterator[pa.RecordBatch]
) -> WriteResult:
    client = _client(options.bootstrap, options.security)
    producer = _Producer(options, client)
    try:
        for batch in batches:
            producer.add(batch, columns)
        producer.flush()
    except BaseException:
        # Unread responses would confuse the next task on this connection.
        client.close()
        raise
    return WriteResult(producer.records)


@dataclass(frozen=True, slots=True)
class WriteAttempt:
    """Which write, micro-batch and Spark partition a task's rows belong to."""

    write_id: str  # the streaming query's id, or one batch write's
    batch_id: int
    partition_id: int


# Local properties Spark's MicroBatchExecution gives every task of a micro-batch.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


def _task_attempt(write_id: str | None) -> WriteAttempt:
    """This task's :class:`WriteAttempt`, from Spark's task context (``write_id`` for batch
    writes; a streaming task takes the query id and batch id Spark gave it)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the exactly-once odradek sink runs in Spark tasks only")
    if write_id is not None:
        return WriteAttempt(write_id, 0, context.partitionId())
    query_id = context.getLocalProperty(_QUERY_ID_PROPERTY)
    batch_id = context.getLocalProperty(_BATCH_ID_PROPERTY)
    if query_id is None or batch_id is None:
        raise RuntimeError(
            "Spark did not tell this task its streaming query and batch ids; the exactly-once "
            "odradek sink needs them"
        )
    return WriteAttempt(query_id, int(batch_id), context.partitionId())


def _first_topic(options: WriteOptions, batch: pa.RecordBatch) -> str:
    if options.topic is not None:
        return options.topic
    names = [name.lower() for name in batch.schema.names]
    topic = batch.column(names.index("topic"))[0].as_py()
    if topic is None:
        raise OptionError("a row has a null topic; set the topic option or fill the topic column")
    return str(topic)


def write_exactly_once(
    options: WriteOptions,
    columns: _Columns,
    batches: Iterator[pa.RecordBatch],
    attempt: WriteAttempt,
) -> WriteResult:
    """Write the task's rows in one transaction with its done-marker, unless an earlier attempt
    of this task committed them (see the module doc)."""
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return WriteResult(0)  # nothing to write, now or in any other attempt
    client = _client(options.bootstrap, options.security)
    transactional_id = (
        f"{options.transactional_id_prefix}-{attempt.write_id}-{attempt.partition_id}"
    )
    txn = TransactionalProducer(
        client, transactional_id, transaction_timeout_ms=options.transaction_timeout_ms
    )
    marker = TopicPartition(_first_topic(options, first), 0)
    try:
        txn.init()
        done = txn.committed(transactional_id, [marker]).get(marker)
        if done is not None and done.offset >= attempt.batch_id:
            return WriteResult(0, skipped=True)
        txn.begin()
        producer = _Producer(options, client, txn)
        producer.add(first, columns)
        for batch in batches:
            producer.add(batch, columns)
        producer.flush()
        txn.send_offsets(
            transactional_id,
            {marker: (attempt.batch_id, f"odradek-spark batch {attempt.batch_id}")},
        )
        txn.commit()
    except BaseException:
        client.close()  # unread responses would confuse the next task on this connection
        if txn.in_transaction:
            _abort_quietly(txn)
        raise
    return WriteResult(producer.records)


def _abort_quietly(txn: TransactionalProducer) -> None:
    """Abort now rather than leave read_committed readers waiting for the timeout; a fenced or
    unreachable producer cannot, and the next attempt's InitProducerId will."""
    with contextlib.suppress(ClientError, OSError):
        txn.abort()


class OdradekBatchWriter(DataSourceArrowWriter):
    """``df.write.format("odradek")``."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = WriteOptions.parse(options)
        self.columns = _columns(schema, self.options, _formats(options, schema, self.options))
        # Made on the driver, so every task (and every attempt of one) of this write shares it.
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.options.exactly_once:
            attempt = _task_attempt(self.write_id)
            return write_exactly_once(self.options, self.columns, iterator, attempt)
        return write_batches(self.options, self.columns, iterator)


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("odradek")``: each micro-batch's tasks produce their rows."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = WriteOptions.parse(options)
        self.columns = _columns(schema, self.options, _formats(options, schema, self.options))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.options.exactly_once:
            attempt = _task_attempt(None)
            return write_exactly_once(self.options, self.columns, iterator, attempt)
        return write_batches(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every task acknowledged (or committed its transaction) before it finished

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # at-least-once: written stays written; exactly-once: see the module doc
