"""The ``odradek`` sink: DataFrame rows to records, batch and streaming, at least once.

Columns as Spark's Kafka sink takes them: ``value`` (required, string or binary), ``key``
(string or binary), ``headers`` (array of struct<key string, value binary>), ``topic`` (string;
the ``topic`` option overrides it) and ``partition`` (int; when absent or null, the partition
is chosen as Kafka's Java producer chooses it: murmur2 of the key, or, for records without a
key, one partition per batch in turn). Other columns are ignored.

Each task encodes its rows into RecordBatch v2 batches and produces them with up to five
requests in flight, waiting for the acknowledgements (``kafka.acks``, default all) before it
reports success. A failed delivery raises, the task fails and Spark retries it: records can be
written twice, never lost — at-least-once, like Spark's own Kafka sink.
"""

from __future__ import annotations

import random
import struct
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c
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

from odradek.client.data import DataClient, Pending, TopicPartition
from odradek.client.wire import WireConnection
from odradek.protocol import compression as codecs
from odradek.protocol.record_batch import CRC_START, HEADER_SIZE, LOG_OVERHEAD, MAGIC
from odradek.spark.options import OptionError, WriteOptions

_MAX_IN_FLIGHT = 5
_REQUEST_BYTES = 4 << 20
_HEADER = struct.Struct(">qiibIhiqqqhii")

# -- encoding ----------------------------------------------------------------------------------


def _zigzag_varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


_SMALL = [_zigzag_varint(i) for i in range(1 << 14)]
_NULL = _zigzag_varint(-1)


def _varint(value: int) -> bytes:
    return _SMALL[value] if 0 <= value < 16384 else _zigzag_varint(value)


Headers = Sequence[tuple[str, bytes | None]]


def encode_records(
    keys: Sequence[bytes | None],
    values: Sequence[bytes | None],
    headers: Sequence[Headers | None] | None,
    *,
    timestamp_ms: int,
    timestamps: Sequence[int] | None = None,
    compression: int = codecs.NONE,
) -> bytes:
    """One RecordBatch v2 holding the records, offsets from 0, each stamped with its entry in
    ``timestamps`` or, without them, all with ``timestamp_ms``."""
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
    body = b"".join(parts)
    if compression != codecs.NONE:
        body = codecs.compress(compression, body)
    out = bytearray(HEADER_SIZE + len(body))
    _HEADER.pack_into(
        out,
        0,
        0,  # base offset: the broker assigns it
        len(out) - LOG_OVERHEAD,
        -1,  # partition leader epoch
        MAGIC,
        0,  # crc, below
        compression,
        count - 1,
        base_timestamp,
        max_timestamp,
        -1,  # producer id: not idempotent
        -1,
        -1,
        count,
    )
    out[HEADER_SIZE:] = body
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (``Utils.murmur2``), as a signed 32-bit int."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    if rest:
        if rest == 3:
            h ^= data[whole + 2] << 16
        if rest >= 2:
            h ^= data[whole + 1] << 8
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


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


def _columns(schema: StructType, options: WriteOptions) -> _Columns:
    fields = {f.name.lower(): f for f in schema.fields}
    if "value" not in fields:
        raise OptionError("the odradek sink needs a value column (string or binary)")
    _check_type("value", fields["value"].dataType, [StringType(), BinaryType()])
    if "key" in fields:
        _check_type("key", fields["key"].dataType, [StringType(), BinaryType()])
    if "topic" in fields:
        _check_type("topic", fields["topic"].dataType, [StringType()])
    elif options.topic is None:
        raise OptionError(
            "the odradek sink needs the topic option or a topic column (string)"
        )
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
        "key" in fields, "topic" in fields, "partition" in fields, "headers" in fields
    )


# -- producing ---------------------------------------------------------------------------------


class _Producer:
    """Encodes rows into batches per partition and produces them, pipelined."""

    def __init__(self, options: WriteOptions, client: DataClient) -> None:
        self.options = options
        self.client = client
        self.partition_counts: dict[str, int] = {}
        self.sticky: dict[str, int] = {}
        self.key_partitions: dict[tuple[str, bytes], int] = {}
        self.in_flight: deque[tuple[WireConnection, Pending]] = deque()
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

    def _partition_for(self, topic: str, key: bytes | None, given: int | None) -> int:
        count = self._partitions_of(topic)
        if given is not None:
            if not 0 <= given < count:
                raise OptionError(f"partition {given} does not exist in topic {topic!r}")
            return given
        if key is None:
            # Kafka's sticky partitioner keeps keyless records together per batch.
            if topic not in self.sticky:
                self.sticky[topic] = random.randrange(count)
            return self.sticky[topic]
        cached = self.key_partitions.get((topic, key))
        if cached is None:
            cached = self.key_partitions[(topic, key)] = key_partition(key, count)
        return cached

    def add(self, batch: pa.RecordBatch, columns: _Columns) -> None:
        n = batch.num_rows
        if n == 0:
            return
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def column(name: str) -> pa.Array:
            return batch.column(names[name])

        def binaries(name: str) -> list[bytes | None]:
            array = column(name)
            if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
                array = pc.cast(array, pa.binary())
            values: list[bytes | None] = array.to_pylist()
            return values

        values = binaries("value")
        keys: list[bytes | None] = binaries("key") if columns.has_key else [None] * n
        headers: list[Any] | None = None
        if columns.has_headers:
            headers = [
                None if h is None else [(item["key"], item["value"]) for item in h]
                for h in column("headers").to_pylist()
            ]
        if self.options.topic is not None:
            topics: list[str | None] = [self.options.topic] * n
        else:
            topics = column("topic").to_pylist()
        given: list[int | None] = (
            column("partition").to_pylist() if columns.has_partition else [None] * n
        )

        groups: dict[TopicPartition, list[int]] = {}
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise OptionError(
                    "a row has a null topic; set the topic option or fill the topic column"
                )
            tp = TopicPartition(topic, self._partition_for(topic, keys[i], given[i]))
            rows = groups.get(tp)
            if rows is None:
                rows = groups[tp] = []
            rows.append(i)
        self.records += n
        now_ms = int(time.time() * 1000)
        for tp, rows in groups.items():
            start = 0
            while start < len(rows):
                # Cut batches near batch_bytes so no batch outgrows the broker's limit.
                size = 0
                stop = start
                while stop < len(rows) and (stop == start or size < self.options.batch_bytes):
                    i = rows[stop]
                    size += len(values[i] or b"") + len(keys[i] or b"") + 16
                    stop += 1
                chunk = rows[start:stop]
                encoded = encode_records(
                    [keys[i] for i in chunk],
                    [values[i] for i in chunk],
                    None if headers is None else [headers[i] for i in chunk],
                    timestamp_ms=now_ms,
                    compression=self.options.compression,
                )
                self._queue(tp, encoded)
                start = stop
        # Keyless records move on to another partition with the next input batch.
        for topic, partition in list(self.sticky.items()):
            self.sticky[topic] = (partition + 1) % self._partitions_of(topic)

    def _queue(self, tp: TopicPartition, batch: bytes) -> None:
        self.ready.setdefault(tp, []).append(batch)
        self.ready_bytes += len(batch)
        if self.ready_bytes >= _REQUEST_BYTES:
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
        self.in_flight.extend(self.client.send_produce(batches, acks=self.options.acks))

    def _receive_one(self) -> None:
        connection, pending = self.in_flight.popleft()
        self.client.receive_produce(connection, pending)

    def flush(self) -> None:
        self._send()
        while self.in_flight:
            self._receive_one()


@dataclass(frozen=True)
class WriteResult(WriterCommitMessage):
    """What one task wrote."""

    records: int


_TASK_CLIENTS: dict[str, DataClient] = {}


def _client(bootstrap: str) -> DataClient:
    # Python workers are reused across tasks; so is their client.
    client = _TASK_CLIENTS.get(bootstrap)
    if client is None:
        client = _TASK_CLIENTS[bootstrap] = DataClient(
            bootstrap, client_id="odradek-spark-sink"
        )
    return client


def write_batches(
    options: WriteOptions, columns: _Columns, batches: Iterator[pa.RecordBatch]
) -> WriteResult:
    client = _client(options.bootstrap)
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


class OdradekBatchWriter(DataSourceArrowWriter):
    """``df.write.format("odradek")``."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = WriteOptions.parse(options)
        self.columns = _columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self.options, self.columns, iterator)


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("odradek")``: each micro-batch's tasks produce their rows."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = WriteOptions.parse(options)
        self.columns = _columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_batches(self.options, self.columns, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every record was acknowledged before its task finished

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # what was written stays written: at-least-once
