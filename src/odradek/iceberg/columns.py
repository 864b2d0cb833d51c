"""Record batches to the rows of a topic's table, as Arrow.

``key_value``: a ``kafka`` struct (partition, offset, timestamp, headers), then ``key`` and
``value`` as binary. The schema modes: the same ``kafka`` struct, then the value's fields as
typed columns, each record decoded by the schema its Confluent prefix (magic 0, a 4-byte schema
id) names, or by the subject's latest schema: an Avro record schema (the value is Avro binary),
a JSON Schema of an object (the value is JSON text; its properties are the columns, values
of other properties are left out), or a Protobuf schema (after the prefix, the message indexes
name the message whose fields are the columns; with the latest schema, the value is its first
message's bytes alone). A record that cannot be decoded, or whose values do not fit
its columns, becomes a row of the dead-letter table (the ``key_value`` columns and an
``error``) instead.

Pure functions on bytes and schemas: called on the translation thread.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from odradek.registry.protobuf_messages import TIMESTAMP
from odradek.spark.arrow import HEADERS_TYPE, TIMESTAMP_TYPE, records_to_arrow
from odradek.spark.json_schema import NoColumnType, json_schema_to_arrow

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


# -- Protobuf --------------------------------------------------------------------------------

# Unsigned 32-bit values do not fit Iceberg's int, and unsigned 64-bit ones not its long: the
# next wider exact type each.
_PROTOBUF_SCALARS: dict[int, pa.DataType] = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.decimal128(20, 0),
    FieldDescriptor.TYPE_FIXED64: pa.decimal128(20, 0),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_UINT32: pa.int64(),
    FieldDescriptor.TYPE_FIXED32: pa.int64(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}
# How deep messages may nest: a message that contains itself has no finite columns.
_MAX_PROTOBUF_DEPTH = 32


def protobuf_to_arrow(message: Descriptor, depth: int = 0) -> pa.DataType:
    """The Arrow struct of a Protobuf message: a field of a scalar type its column type (enums
    by name), a message a struct (``google.protobuf.Timestamp`` a timestamp), a repeated field
    a list, a map a map."""
    if depth > _MAX_PROTOBUF_DEPTH:
        raise SchemaUnsupported(f"{message.full_name} contains itself: no finite columns")
    return pa.struct(
        [pa.field(f.name, _protobuf_field(f, depth), nullable=True) for f in message.fields]
    )


def _protobuf_field(field: FieldDescriptor, depth: int) -> pa.DataType:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        return pa.map_(
            _protobuf_single(message.fields_by_name["key"], depth),
            _protobuf_single(message.fields_by_name["value"], depth),
        )
    single = _protobuf_single(field, depth)
    return pa.list_(single) if field.is_repeated else single


def _protobuf_single(field: FieldDescriptor, depth: int) -> pa.DataType:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.full_name == TIMESTAMP:
            return TIMESTAMP_TYPE
        return protobuf_to_arrow(field.message_type, depth + 1)
    found = _PROTOBUF_SCALARS.get(field.type)
    if found is None:
        raise SchemaUnsupported(f"{field.full_name} (a group) has no column type")
    return found


# -- decoding --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValueSchema:
    """A value schema ready to decode with: its kind (``AVRO``, ``JSON`` or ``PROTOBUF``, the
    registry's schemaType), what decodes it (fastavro's parsed schema for Avro, the message's
    descriptor for Protobuf) and the columns. A Protobuf schema is one per message: ``of``
    gives its file's first message, :meth:`for_value` the one a value's indexes name."""

    schema_id: int
    parsed: Any  # fastavro's parsed schema (Avro); a _ProtobufFile (Protobuf); None for JSON
    columns: pa.Schema
    kind: str = "AVRO"
    message_indexes: tuple[int, ...] = ()

    @classmethod
    def of(
        cls,
        schema_id: int,
        text: str,
        schema_type: str = "AVRO",
        references: Sequence[tuple[str, str]] = (),
    ) -> ValueSchema:
        """``references``: a Protobuf schema's imported files, as (name, text), each one's own
        imports before it."""
        kind = schema_type.upper()
        if kind == "PROTOBUF":
            return _ProtobufFile(schema_id, text, references).message((0,))
        if kind not in ("AVRO", "JSON"):
            raise SchemaUnsupported(f"schema {schema_id} is {schema_type}: no column form")
        document = json.loads(text)
        if kind == "JSON":
            try:
                column = json_schema_to_arrow(document)
            except NoColumnType as e:
                raise SchemaUnsupported(str(e)) from e
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
        _check_columns(columns)
        return cls(schema_id, parsed, columns, kind)

    def for_value(self, body: io.BytesIO) -> ValueSchema:
        """The schema of the message a framed Protobuf value's indexes name (read from
        ``body``, which is left at the message); this schema for the other kinds."""
        if self.kind != "PROTOBUF":
            return self
        from odradek.registry.protobuf_messages import message_indexes

        data = body.getvalue()
        indexes, at = message_indexes(data[body.tell() :])
        body.seek(body.tell() + at)
        if indexes == self.message_indexes:
            return self
        found: ValueSchema = self.parsed.message(indexes)
        return found

    def decode(self, body: io.BytesIO) -> object:
        """One value's fields (a dict); raises whatever its bytes make the decoder raise."""
        if self.kind == "JSON":
            decoded = json.loads(body.read())
            if not isinstance(decoded, dict):
                raise ValueError(f"the value is a JSON {type(decoded).__name__}, not an object")
            return decoded
        if self.kind == "PROTOBUF":
            from odradek.registry.protobuf_messages import parse, to_python

            message = self.parsed.descriptor(self.message_indexes)
            return to_python(parse(message, body.read()), timestamps=True)
        import fastavro

        decoded = fastavro.schemaless_reader(body, self.parsed, None)
        if body.tell() != len(body.getbuffer()):
            raise ValueError("bytes are left after the value")
        return decoded


def _check_columns(columns: pa.Schema) -> None:
    if "kafka" in columns.names:
        raise SchemaUnsupported("a field named kafka would hide the record's kafka column")


class _ProtobufFile:
    """A registered Protobuf schema's file, and the ValueSchema of each of its messages met."""

    def __init__(self, schema_id: int, text: str, references: Sequence[tuple[str, str]]) -> None:
        from odradek.registry.protobuf_messages import ProtobufSchemaError, schema_file

        self.schema_id = schema_id
        try:
            self.file = schema_file(text, references)
        except ProtobufSchemaError as e:
            raise SchemaUnsupported(str(e)) from e
        self._messages: dict[tuple[int, ...], ValueSchema] = {}

    def descriptor(self, indexes: tuple[int, ...]) -> Descriptor:
        from odradek.registry.protobuf_messages import message_at

        return message_at(self.file, indexes)

    def message(self, indexes: tuple[int, ...]) -> ValueSchema:
        found = self._messages.get(indexes)
        if found is None:
            columns = pa.schema(list(protobuf_to_arrow(self.descriptor(indexes))))
            _check_columns(columns)
            found = ValueSchema(self.schema_id, self, columns, "PROTOBUF", indexes)
            # Bounded: a file has as many messages as its text defines.
            self._messages[indexes] = found
        return found


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
    groups: dict[tuple[int, tuple[int, ...]], tuple[ValueSchema, list[int], list[object]]] = {}
    dead: list[tuple[int, str]] = []
    for row, value in enumerate(values):
        try:
            schema, body = _schema_of(value, schema_for, latest)
        except ValueError as e:
            dead.append((row, f"{type(e).__name__}: {e}"))
            continue
        try:
            # Whatever the bytes make the decoder raise, the record is a dead letter.
            if latest is None:
                schema = schema.for_value(body)
            decoded = schema.decode(body)
        except Exception as e:
            dead.append((row, f"{type(e).__name__}: {e}"))
            continue
        key = (schema.schema_id, schema.message_indexes)
        group = groups.setdefault(key, (schema, [], []))
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
