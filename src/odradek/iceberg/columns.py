"""Record batches to the rows of a topic's table, as Arrow.

``key_value``: a ``kafka`` struct (partition, offset, timestamp, headers), then ``key`` and
``value`` as binary. The schema modes: the same ``kafka`` struct, then the value's fields as
typed columns, each record decoded by the schema its Confluent prefix (magic 0, a 4-byte schema
id) names, or by the subject's latest schema: an Avro record schema (the value is Avro binary)
or a JSON Schema of an object (the value is JSON text; its properties are the columns, values
of other properties are left out). A record that cannot be decoded, or whose values do not fit
its columns, becomes a row of the dead-letter table (the ``key_value`` columns and an
``error``) instead.

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
    """A schema with no column form here (a union of several types, a field ``kafka``)."""


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


# -- JSON Schema -----------------------------------------------------------------------------

_JSON_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
}
# How deep "$ref"s may lead: a schema that refers to itself has no finite columns.
_MAX_JSON_DEPTH = 32


def json_schema_to_arrow(schema: object, document: object, depth: int = 0) -> pa.DataType:
    """The Arrow type of a JSON Schema (parsed JSON) inside ``document`` (where its local
    ``$ref``s point). An object with properties is a struct, an array a list; a type or an
    ``anyOf``/``oneOf`` with ``null`` besides one other is that other; strings with a format
    (date-time, uuid, ...) stay strings, as JSON carries them."""
    if depth > _MAX_JSON_DEPTH:
        raise SchemaUnsupported("the schema refers to itself: no finite columns")
    if not isinstance(schema, dict):
        raise SchemaUnsupported(f"{schema!r} is not a JSON Schema with a column type")
    reference = schema.get("$ref")
    if isinstance(reference, str):
        return json_schema_to_arrow(_resolve(reference, document), document, depth + 1)
    for combinator in ("anyOf", "oneOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list):
            kept = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(kept) != 1:
                raise SchemaUnsupported(f"{combinator} of {len(kept)} types has no column type")
            return json_schema_to_arrow(kept[0], document, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise SchemaUnsupported(f"a value of {len(kinds)} types has no column type")
        kind = kinds[0]
    if kind is None and "properties" in schema:
        kind = "object"
    if kind is None and "enum" in schema:
        kind = "string"
    if kind == "object":
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            raise SchemaUnsupported("an object without properties has no columns")
        return pa.struct(_json_fields(properties, document, depth + 1))
    if kind == "array":
        return pa.list_(json_schema_to_arrow(schema.get("items", {}), document, depth + 1))
    primitive = _JSON_PRIMITIVES.get(str(kind))
    if primitive is None:
        raise SchemaUnsupported(f"type {kind!r} has no column type")
    return primitive


def _resolve(reference: str, document: object) -> object:
    """A local ``$ref`` (``#/$defs/Name``, JSON Pointer escapes included) in ``document``."""
    if not reference.startswith("#"):
        raise SchemaUnsupported(f"$ref {reference!r} is not in the schema itself")
    found = document
    for part in filter(None, reference[1:].split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(found, dict) or key not in found:
            raise SchemaUnsupported(f"$ref {reference!r} points nowhere")
        found = found[key]
    return found


def _json_fields(properties: Mapping[str, Any], document: object, depth: int) -> list[pa.Field]:
    # Nullable, as Avro's: an absent property is a null, and a later schema may drop it.
    return [
        pa.field(str(name), json_schema_to_arrow(property_schema, document, depth), nullable=True)
        for name, property_schema in properties.items()
    ]


# -- decoding --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValueSchema:
    """A value schema ready to decode with: its kind (``AVRO`` or ``JSON``, the registry's
    schemaType), fastavro's parsed form for Avro, and the columns."""

    schema_id: int
    parsed: Any  # fastavro's parsed schema (Avro); None for JSON
    columns: pa.Schema
    kind: str = "AVRO"

    @classmethod
    def of(cls, schema_id: int, text: str, schema_type: str = "AVRO") -> ValueSchema:
        kind = schema_type.upper()
        if kind not in ("AVRO", "JSON"):
            raise SchemaUnsupported(f"schema {schema_id} is {schema_type}: not Avro or JSON")
        document = json.loads(text)
        if kind == "JSON":
            column = json_schema_to_arrow(document, document)
            if not pa.types.is_struct(column):
                raise SchemaUnsupported("only an object's schema has columns")
            columns = pa.schema(list(column))
            parsed = None
        else:
            import fastavro

            if not isinstance(document, dict) or document.get("type") != "record":
                raise SchemaUnsupported("only a record schema has columns")
            columns = pa.schema([_field(f) for f in document.get("fields", [])])
            parsed = fastavro.parse_schema(document)
        if "kafka" in columns.names:
            raise SchemaUnsupported("a field named kafka would hide the record's kafka column")
        return cls(schema_id, parsed, columns, kind)

    def decode(self, body: io.BytesIO) -> object:
        """One value's fields (a dict); raises whatever its bytes make the decoder raise."""
        if self.kind == "JSON":
            decoded = json.loads(body.read())
            if not isinstance(decoded, dict):
                raise ValueError(f"the value is a JSON {type(decoded).__name__}, not an object")
            return decoded
        import fastavro

        decoded = fastavro.schemaless_reader(body, self.parsed, None)
        if body.tell() != len(body.getbuffer()):
            raise ValueError("bytes are left after the value")
        return decoded


SchemaLookup = Callable[[int], ValueSchema]


@dataclass(frozen=True, slots=True)
class DecodedValues:
    """The rows of some records as typed columns (one table per schema met), and the rows
    (key_value columns with an error) of those that could not be decoded."""

    tables: list[pa.Table]
    dead: pa.Table | None


def decode_values(
    batch: pa.RecordBatch, schema_for: SchemaLookup, latest: ValueSchema | None
) -> DecodedValues:
    """The values of ``batch`` (:func:`decode_records`'s) decoded by the schema their prefix
    names (``latest`` None) or by ``latest``, into the ``kafka`` column then the schema's."""
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
            # Whatever the bytes make the decoder raise, the record is a dead letter.
            decoded = schema.decode(body)
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
        except _UNFIT:
            # A value that does not fit the columns (a JSON string where the schema says
            # integer): found one by one, so that only it is a dead letter.
            rows, typed = _fitting(schema.columns, rows, decoded_rows, dead)
        tables.append(typed.add_column(0, "kafka", kafka.take(pa.array(rows, pa.int64()))))
    return DecodedValues(tables, _dead_letters(batch, dead))


_UNFIT = (pa.ArrowException, TypeError, ValueError, OverflowError)


def _fitting(
    columns: pa.Schema, rows: list[int], decoded: list[object], dead: list[tuple[int, str]]
) -> tuple[list[int], pa.Table]:
    """The rows whose values fit ``columns``, as a table; the others added to ``dead``."""
    kept, tables = [], []
    for row, value in zip(rows, decoded, strict=True):
        try:
            tables.append(pa.Table.from_pylist([value], schema=columns))
        except _UNFIT as e:
            dead.append((row, f"{type(e).__name__}: {e}"))
            continue
        kept.append(row)
    return kept, pa.concat_tables(tables) if tables else columns.empty_table()


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
