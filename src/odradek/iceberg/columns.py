"""Record batches to the rows of a topic's table, as Arrow.

``key_value``: a ``kafka`` struct (partition, offset, timestamp, headers), then ``key`` and
``value`` as binary. The Avro modes: the same ``kafka`` struct, then the value's fields as typed
columns, each record decoded by the schema its Confluent prefix (magic 0, a 4-byte schema id)
names, or by the subject's latest schema. A record that cannot be decoded becomes a row of the
dead-letter table (the ``key_value`` columns and an ``error``) instead.

Pure functions on bytes and schemas: called on the translation thread.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from odradek.spark.arrow import HEADERS_TYPE, TIMESTAMP_TYPE, records_to_arrow

KAFKA_TYPE = pa.struct(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP_TYPE),
        pa.field("headers", HEADERS_TYPE),
    ]
)
KEY_VALUE_SCHEMA = pa.schema(
    [pa.field("kafka", KAFKA_TYPE), pa.field("key", pa.binary()), pa.field("value", pa.binary())]
)
DEAD_LETTER_SCHEMA = pa.schema([*KEY_VALUE_SCHEMA, pa.field("error", pa.string())])
# A value in Confluent's wire format: magic byte 0, then the schema id, big-endian.
_PREFIX = struct.Struct(">bI")


class SchemaUnsupported(ValueError):
    """An Avro schema with no column form here (a union of several types, a field ``kafka``)."""


class SchemaMissing(ValueError):
    """The registry has no such schema (a record for the dead-letter table, unlike a registry
    that cannot be reached, which stops the translation until it can)."""


def decode_records(
    records: bytes | memoryview,
    partition: int,
    start: int,
    end: int,
    skip: Collection[int] = (),
) -> pa.RecordBatch:
    """Records ``start``..``end - 1`` of whole batches as the ``kafka``, ``key``, ``value``
    columns (control batches and those at ``skip``, aborted transactions, left out)."""
    batch = records_to_arrow(
        records, "", partition, start, end, include_headers=True, verify_crc=False, skip=skip
    )
    kafka = pa.StructArray.from_arrays(
        [
            batch.column("partition"),
            batch.column("offset"),
            batch.column("timestamp"),
            batch.column("headers"),
        ],
        fields=list(KAFKA_TYPE),
    )
    return pa.RecordBatch.from_arrays(
        [kafka, batch.column("key"), batch.column("value")], schema=KEY_VALUE_SCHEMA
    )


# -- Avro ------------------------------------------------------------------------------------


def avro_to_arrow(schema: object) -> pa.DataType:
    """The Arrow type of an Avro schema (parsed JSON); nullable unions become their type."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise SchemaUnsupported(f"a union of {len(branches)} types has no column type")
        return avro_to_arrow(branches[0])
    if isinstance(schema, str):
        primitive = _PRIMITIVES.get(schema)
        if primitive is None:
            raise SchemaUnsupported(f"named type {schema!r} (reference it inline)")
        return primitive
    if not isinstance(schema, dict):
        raise SchemaUnsupported(f"{schema!r} is not an Avro schema")
    logical = _logical(schema)
    if logical is not None:
        return logical
    kind = schema.get("type")
    if kind == "record":
        return pa.struct([_field(f) for f in schema.get("fields", [])])
    if kind == "array":
        return pa.list_(avro_to_arrow(schema["items"]))
    if kind == "map":
        return pa.map_(pa.string(), avro_to_arrow(schema["values"]))
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    return avro_to_arrow(kind)


_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def _logical(schema: Mapping[str, Any]) -> pa.DataType | None:
    logical = schema.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros"):
        return TIMESTAMP_TYPE
    if logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.timestamp("us")
    if logical == "date":
        return pa.date32()
    if logical in ("time-millis", "time-micros"):
        return pa.time64("us")
    if logical == "decimal":
        return pa.decimal128(int(schema["precision"]), int(schema.get("scale", 0)))
    if logical == "uuid":
        return pa.string()
    return None


def _field(field: Mapping[str, Any]) -> pa.Field:
    # Every column is nullable: a later schema may drop the field (Iceberg keeps the column).
    return pa.field(str(field["name"]), avro_to_arrow(field["type"]), nullable=True)


@dataclass(frozen=True, slots=True)
class ValueSchema:
    """An Avro value schema ready to decode with: fastavro's parsed form and the columns."""

    schema_id: int
    parsed: Any  # fastavro's parsed schema
    columns: pa.Schema

    @classmethod
    def of(cls, schema_id: int, text: str) -> ValueSchema:
        import fastavro

        document = json.loads(text)
        if not isinstance(document, dict) or document.get("type") != "record":
            raise SchemaUnsupported("only a record schema has columns")
        columns = pa.schema([_field(f) for f in document.get("fields", [])])
        if "kafka" in columns.names:
            raise SchemaUnsupported("a field named kafka would hide the record's kafka column")
        return cls(schema_id, fastavro.parse_schema(document), columns)


SchemaLookup = Callable[[int], ValueSchema]


@dataclass(frozen=True, slots=True)
class DecodedValues:
    """The rows of some records as typed columns (one table per schema met), and the rows
    (key_value columns with an error) of those that could not be decoded."""

    tables: list[pa.Table]
    dead: pa.Table | None


def decode_avro(
    batch: pa.RecordBatch, schema_for: SchemaLookup, latest: ValueSchema | None
) -> DecodedValues:
    """The values of ``batch`` (:func:`decode_records`'s) decoded by the schema their prefix
    names (``latest`` None) or by ``latest``, into the ``kafka`` column then the schema's."""
    import fastavro

    values = batch.column("value").to_pylist()
    groups: dict[int, tuple[ValueSchema, list[int], list[object]]] = {}
    dead: list[tuple[int, str]] = []
    for row, value in enumerate(values):
        try:
            schema, body = _schema_of(value, schema_for, latest)
        except ValueError as e:
            dead.append((row, f"{type(e).__name__}: {e}"))
            continue
        try:
            # Whatever the bytes make fastavro raise, the record is a dead letter.
            decoded = fastavro.schemaless_reader(body, schema.parsed, None)
            if body.tell() != len(body.getbuffer()):
                raise ValueError("bytes are left after the value")
        except Exception as e:
            dead.append((row, f"{type(e).__name__}: {e}"))
            continue
        group = groups.setdefault(schema.schema_id, (schema, [], []))
        group[1].append(row)
        group[2].append(decoded)
    tables = []
    kafka = batch.column("kafka")
    for schema, rows, decoded_rows in groups.values():
        try:
            typed = pa.Table.from_pylist(decoded_rows, schema=schema.columns)
        except (pa.ArrowException, TypeError, ValueError) as e:
            dead.extend((row, f"{type(e).__name__}: {e}") for row in rows)
            continue
        tables.append(typed.add_column(0, "kafka", kafka.take(pa.array(rows, pa.int64()))))
    return DecodedValues(tables, _dead_letters(batch, dead))


def _schema_of(
    value: bytes | None, schema_for: SchemaLookup, latest: ValueSchema | None
) -> tuple[ValueSchema, io.BytesIO]:
    """The schema to decode ``value`` with, and its Avro bytes; ValueError for a value with
    none. An error reaching the registry is raised as it is (not a ValueError)."""
    if value is None:
        raise ValueError("a null value has no fields")
    if latest is not None:
        return latest, io.BytesIO(value)
    if len(value) < _PREFIX.size:
        raise ValueError("the value is shorter than a schema id prefix")
    magic, schema_id = _PREFIX.unpack_from(value)
    if magic != 0:
        raise ValueError(f"magic byte {magic} is not Confluent's 0")
    return schema_for(schema_id), io.BytesIO(value[_PREFIX.size :])


def _dead_letters(batch: pa.RecordBatch, dead: list[tuple[int, str]]) -> pa.Table | None:
    if not dead:
        return None
    dead.sort()
    rows = pa.array([row for row, _ in dead], pa.int64())
    taken = pa.Table.from_batches([batch]).take(rows)
    return taken.append_column(pa.field("error", pa.string()), pa.array([e for _, e in dead]))


def key_value_dead_letters(batch: pa.RecordBatch, error: str) -> pa.Table:
    """Every row of ``batch`` as a dead letter with the same ``error``."""
    return _dead_letters(batch, [(row, error) for row in range(batch.num_rows)]) or pa.table(
        {}, schema=DEAD_LETTER_SCHEMA
    )
