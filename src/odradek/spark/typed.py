"""Typed keys and values: the source's and sink's ``keyFormat`` / ``valueFormat`` options.

With ``valueFormat`` (``avro``, ``protobuf`` or ``json``) the source's ``value`` column is not
the record's bytes but the value decoded with a schema from a schema registry, as a Spark type
(a struct whose fields are the schema's fields, for records, messages and objects: select
``value.*`` for one column per field); the same for ``keyFormat`` and ``key``. Values are in
Confluent's framing (magic byte 0, a 4-byte big-endian schema id, the encoded value; Protobuf
adds the message indexes), as Confluent's serializers write them. The reader's schema is a
subject's version: ``<topic>-value`` (``-key``) latest unless ``valueSubject`` /
``valueSchemaVersion`` (``keySubject`` / ``keySchemaVersion``) say otherwise, fixed where the
query is planned. Each value is decoded with the schema its id names and resolved to the
reader's: by Avro's schema resolution for Avro; by field name for Protobuf and JSON (fields the
reader lacks are dropped, fields the value lacks are null).

What each format covers:

- **avro**: see :mod:`odradek.spark.avro` (records, nested records, arrays, maps, enums, fixed,
  nullable unions, the date/timestamp/decimal/uuid logical types). Source and sink. A schema
  whose references take named types from other subjects is read with them: the referenced
  schemas (theirs too) are looked up by subject and version, parsed before it as the
  registry's own compatibility check parses them, and written out where first used, one
  self-contained schema for decoding and encoding.
- **json** (JSON Schema): the types of :mod:`odradek.spark.json_schema` (which the Iceberg
  tables share): objects with ``properties`` (nested objects too), ``string``, ``integer``
  (long), ``number`` (double), ``boolean``, ``array`` with ``items``, objects with only
  ``additionalProperties`` (maps), ``["T", "null"]`` and ``anyOf``/``oneOf`` of null and one
  type, ``enum``\\s (strings) and local ``$ref``\\s. Every field is nullable. Decoded by
  Arrow's JSON reader, no Python per row. The sink writes rows as JSON
  text (binary as base64, dates and timestamps as ISO 8601 strings, decimals as numbers) with
  a registered schema, or with ``autoRegister=true`` the JSON Schema of the column's Spark type
  (:func:`json_schema`).
- **protobuf**: the messages of the schema's file (nested and repeated messages, enums as their
  names, maps, the scalar types; ``uint64`` as long); the schema text as confluent-kafka's
  serializer registers it (a base64 ``FileDescriptorProto``) or as ``.proto`` source, with the
  files it imports from the subjects its references name; the
  column's type is the message ``valueMessageName`` (``keyMessageName``) names, by default the
  file's first. Decoded per row by the protobuf runtime. The sink writes rows, by field name,
  as that message of a registered schema (its references read from the registry; no
  ``autoRegister``): enums by name, a Timestamp from a timestamp, unknown fields refused.

The registry is ``schema.registry.url``, by default ``http://<host of the first bootstrap
server>:8081``: where ``odradek serve``'s lone broker serves its own registry by default. With
``schema.registry.basic.auth.user.info`` (``user:password``, Confluent's client setting) requests
carry HTTP basic authentication.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from odradek.spark.schema_registry import MAGIC_BYTE, Reference, RegisteredSchema, registry_client

FORMATS = ("avro", "protobuf", "json")
_SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}
DEFAULT_REGISTRY_PORT = 8081


class FormatError(ValueError):
    """A typed column's options or schema cannot be used."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return None if value is None else str(value)
    return None


def default_registry_url(bootstrap: str) -> str:
    """``http://<host of the first bootstrap server>:8081``."""
    first = bootstrap.split(",")[0].strip()
    host = first.rsplit(":", 1)[0] if ":" in first else first
    return f"http://{host or '127.0.0.1'}:{DEFAULT_REGISTRY_PORT}"


@dataclass(frozen=True, slots=True)
class RegistryAccess:
    url: str
    user_info: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], bootstrap: str) -> RegistryAccess:
        url = (_get(options, "schema.registry.url") or "").strip() or default_registry_url(
            bootstrap
        )
        return cls(url.split(",")[0].strip(), _get(options, "schema.registry.basic.auth.user.info"))


@dataclass(frozen=True, slots=True)
class FormatRequest:
    """A typed column as the options ask for it, before the registry is asked."""

    column: str  # key or value
    format: str
    subject: str | None  # None: <topic>-<column>
    version: int | None  # None: latest
    message: str | None = None  # protobuf: the message (None: the file's first)

    def subject_for(self, topics: tuple[str, ...]) -> str:
        if self.subject is not None:
            return self.subject
        if len(topics) != 1:
            raise FormatError(
                f"{self.column}Format needs {self.column}Subject unless the query subscribes to "
                "exactly one topic by name (the subject is then <topic>-" + self.column + ")"
            )
        return f"{topics[0]}-{self.column}"


def format_requests(options: Mapping[str, str]) -> tuple[FormatRequest, ...]:
    """The keyFormat / valueFormat options (raw bytes, no request, when absent or ``bytes``)."""
    found = []
    for column in ("key", "value"):
        raw = (_get(options, f"{column}Format") or "").strip().lower()
        if raw in ("", "bytes", "binary", "raw"):
            continue
        if raw not in FORMATS:
            raise FormatError(
                f"option {column}Format must be avro, protobuf or json (or bytes), not {raw!r}"
            )
        subject = (_get(options, f"{column}Subject") or "").strip() or None
        version_raw = _get(options, f"{column}SchemaVersion")
        version = None
        if version_raw is not None and version_raw.strip().lower() not in ("", "latest"):
            try:
                version = int(version_raw)
            except ValueError:
                raise FormatError(
                    f"option {column}SchemaVersion must be a version number or latest, "
                    f"not {version_raw!r}"
                ) from None
        message = (_get(options, f"{column}MessageName") or "").strip() or None
        found.append(FormatRequest(column, raw, subject, version, message))
    return tuple(found)


@dataclass(frozen=True, slots=True)
class ColumnFormat:
    """A typed column with its reader schema fixed (picklable: made on the driver, used by
    every task)."""

    column: str
    format: str
    registry: RegistryAccess
    schema: RegisteredSchema
    message: str | None = None
    # the schemas it references (protobuf: the files it imports), as (name, text)
    references: tuple[tuple[str, str], ...] = ()

    def spark_type(self) -> DataType:
        return spark_type_of(self.format, self.schema, self.message, self.references)

    def arrow_type(self) -> pa.DataType:
        from pyspark.sql.pandas.types import to_arrow_type

        return to_arrow_type(self.spark_type(), timezone="UTC")


def resolve(
    requests: tuple[FormatRequest, ...], registry: RegistryAccess, topics: tuple[str, ...]
) -> tuple[ColumnFormat, ...]:
    """Look the reader schemas up (on the driver, once per query)."""
    client = registry_client(registry.url, registry.user_info)
    resolved = []
    for request in requests:
        schema = client.version(request.subject_for(topics), request.version)
        if schema.schema_type != _SCHEMA_TYPES[request.format]:
            raise FormatError(
                f"subject {schema.subject} holds a {schema.schema_type} schema, not "
                f"{request.format}"
            )
        references = _referenced(client, schema) if request.format != "json" else ()
        found = ColumnFormat(
            request.column, request.format, registry, schema, request.message, references
        )
        found.spark_type()  # refuse a schema without a Spark type while planning
        resolved.append(found)
    return tuple(resolved)


def spark_type_of(
    format: str,
    schema: RegisteredSchema,
    message: str | None = None,
    references: Sequence[tuple[str, str]] = (),
) -> DataType:
    if format == "avro":
        from odradek.spark.avro import AvroTypeError, spark_type

        try:
            return spark_type(json.loads(avro_text(schema.text, references)))[0]
        except AvroTypeError as e:
            raise FormatError(str(e)) from e
    if format == "json":
        from odradek.spark.json_schema import NoColumnType, json_schema_spark_type

        try:
            return json_schema_spark_type(json.loads(schema.text))
        except NoColumnType as e:
            raise FormatError(f"the JSON schema has no Spark column type here: {e}") from e
    from odradek.spark.protobuf import ProtobufSchemaError, message_spark_type

    try:
        return message_spark_type(schema.text, message, references)
    except ProtobufSchemaError as e:
        raise FormatError(str(e)) from e


# -- decoders, one per process and column format -----------------------------------------------


class Decoder(Protocol):
    def decode(self, values: pa.Array) -> pa.Array: ...


_DECODERS: dict[ColumnFormat, Decoder] = {}


def decoder(column: ColumnFormat) -> Decoder:
    found = _DECODERS.get(column)
    if found is None:
        found = _DECODERS[column] = _make_decoder(column)
    return found


def _make_decoder(column: ColumnFormat) -> Decoder:
    client = registry_client(column.registry.url, column.registry.user_info)
    arrow_type = column.arrow_type()
    if column.format == "avro":
        from odradek.spark.avro import AvroDecoder

        return AvroDecoder(
            column.schema.id,
            avro_text(column.schema.text, column.references),
            arrow_type,
            lambda i: _avro_text_by_id(client, i, column.schema.subject),
        )
    if column.format == "json":
        return JsonDecoder(arrow_type)
    from odradek.spark.protobuf import ProtobufDecoder

    return ProtobufDecoder(
        arrow_type,
        lambda i: client.by_id(i, column.schema.subject).text,
        lambda i: _referenced(
            client, client.by_id(i, column.schema.subject), column.schema.subject
        ),
    )


# -- JSON Schema ---------------------------------------------------------------------------------


class JsonDecoder:
    """Framed JSON objects, decoded by Arrow's JSON reader: the bodies become newline-delimited
    JSON (a raw line break can only be whitespace between tokens in valid JSON, so it becomes a
    space) and are read with the column's type as the explicit schema."""

    def __init__(self, arrow_type: pa.DataType) -> None:
        if not pa.types.is_struct(arrow_type):
            raise FormatError("the json format reads objects (a schema of type object)")
        self.arrow_type = arrow_type
        # Arrow's JSON reader has no maps: objects with maps are parsed by the json module.
        self.by_row = _has_map(arrow_type)

    def decode(self, values: pa.Array) -> pa.Array:
        import numpy as np
        import pyarrow.json as pj

        from odradek.spark.avro import framed_bodies

        valid, _, starts, ends, data = framed_bodies(values)
        rows = np.flatnonzero(valid)
        if len(rows) == 0:
            return pa.nulls(len(values), self.arrow_type)
        if self.by_row:
            raw = data.tobytes()
            try:
                parsed = [
                    json.loads(raw[start:end]) if ok else None
                    for ok, start, end in zip(
                        valid.tolist(), starts.tolist(), ends.tolist(), strict=True
                    )
                ]
                return pa.array(parsed, type=self.arrow_type)
            except (ValueError, TypeError, pa.ArrowException) as e:
                raise ValueError(f"JSON values do not decode: {e}") from e
        text = np.append(data, np.uint8(ord("\n")))
        lengths = ends[rows] - starts[rows]
        spans = lengths + 1  # each body and its line break
        total = int(spans.sum())
        line_break = len(data)
        index = np.repeat(starts[rows] - (np.cumsum(spans) - spans), spans) + np.arange(total)
        last = np.cumsum(spans) - 1
        index[last] = line_break
        gathered = text[index]
        body = np.ones(total, dtype=bool)
        body[last] = False
        gathered[body & ((gathered == 10) | (gathered == 13))] = 32
        schema = pa.schema(list(self.arrow_type))
        try:
            table = pj.read_json(
                pa.BufferReader(pa.py_buffer(gathered)),
                read_options=pj.ReadOptions(block_size=max(total, 1 << 20), use_threads=False),
                parse_options=pj.ParseOptions(
                    explicit_schema=schema, unexpected_field_behavior="ignore"
                ),
            )
        except pa.ArrowInvalid as e:
            raise ValueError(f"JSON values do not decode: {e}") from e
        if table.num_rows != len(rows):
            raise ValueError("JSON values do not decode to one object each")
        table = table.combine_chunks()
        struct = pa.StructArray.from_arrays(
            [
                table.column(i).chunk(0) if table.column(i).num_chunks else pa.array([], f.type)
                for i, f in enumerate(schema)
            ],
            fields=list(schema),
        )
        if len(rows) == len(values):
            return struct
        inverse = np.full(len(values), -1, dtype=np.int64)
        inverse[rows] = np.arange(len(rows))
        taken = pa.array(inverse, mask=~valid)
        return struct.take(taken)


def _has_map(arrow_type: pa.DataType) -> bool:
    if pa.types.is_map(arrow_type):
        return True
    if pa.types.is_struct(arrow_type):
        return any(_has_map(f.type) for f in arrow_type)
    if pa.types.is_list(arrow_type):
        return _has_map(arrow_type.value_type)
    return False


# -- the sink -------------------------------------------------------------------------------------


def sink_formats(options: Mapping[str, str]) -> tuple[FormatRequest, ...]:
    return format_requests(options)


def auto_register(options: Mapping[str, str]) -> bool:
    raw = (_get(options, "autoRegister") or "false").strip().lower()
    if raw not in ("true", "false"):
        raise FormatError(f"option autoRegister must be true or false, not {raw!r}")
    return raw == "true"


@dataclass(frozen=True, slots=True)
class SinkFormat:
    """How the sink serialises a typed key or value column: in ``format`` with schema
    ``schema_id`` (for Protobuf, the message ``message`` names), and the schemas it
    references (Protobuf: the files it imports), as (name, text)."""

    column: str
    schema_id: int
    text: str
    format: str = "avro"
    message: str | None = None
    references: tuple[tuple[str, str], ...] = ()


def sink_format(
    request: FormatRequest,
    registry: RegistryAccess,
    topic: str | None,
    data_type: DataType,
    register: bool,
) -> SinkFormat:
    """The schema the sink writes with: the subject's version (latest unless pinned), or with
    ``register`` the Avro or JSON Schema form of the column's Spark type, registered (if new)
    as a version. Protobuf is written with a registered schema only."""
    if request.subject is None and topic is None:
        raise FormatError(
            f"{request.column}Format needs the topic option or {request.column}Subject"
        )
    subject = request.subject or f"{topic}-{request.column}"
    client = registry_client(registry.url, registry.user_info)
    if register:
        if request.format == "protobuf":
            raise FormatError(
                f"autoRegister makes Avro and JSON schemas; register the Protobuf schema of "
                f"{subject} first"
            )
        text = json.dumps(_schema_of_type(request.format, data_type))
        schema_id = client.register(subject, text, _SCHEMA_TYPES[request.format])
        return SinkFormat(request.column, schema_id, text, request.format)
    schema = client.version(subject, request.version)
    expected = _SCHEMA_TYPES[request.format]
    if schema.schema_type != expected:
        raise FormatError(f"subject {subject} holds a {schema.schema_type} schema, not {expected}")
    if request.format == "json":
        return SinkFormat(request.column, schema.id, schema.text, request.format)
    references = _referenced(client, schema)
    if request.format == "avro":
        found = SinkFormat(request.column, schema.id, schema.text, "avro", None, references)
        spark_type_of("avro", schema, None, references)  # refuses it here, on the driver
        return found
    found = SinkFormat(
        request.column, schema.id, schema.text, "protobuf", request.message, references
    )
    from odradek.spark.protobuf import ProtobufEncoder, ProtobufSchemaError

    try:
        ProtobufEncoder(found)  # fails here, on the driver, for a schema it cannot write
    except (ProtobufSchemaError, ValueError) as e:
        raise FormatError(str(e)) from e
    return found


def _schema_of_type(format: str, data_type: DataType) -> object:
    if format == "json":
        return {"$schema": "http://json-schema.org/draft-07/schema#", **json_schema(data_type)}
    from odradek.spark.avro import AvroTypeError, avro_schema

    try:
        return avro_schema(data_type)
    except AvroTypeError as e:
        raise FormatError(str(e)) from e


def _referenced(
    client: Any, schema: RegisteredSchema, subject: str | None = None
) -> tuple[tuple[str, str], ...]:
    """The (name, text) of the schemas ``schema`` references, each one's own references first,
    resolved as the registry resolves them (a reference without a context is in the context of
    its schema's ``subject``, by default the one ``schema`` came from)."""
    from odradek.registry.contexts import context_of, qualified
    from odradek.registry.errors import RegistryError
    from odradek.registry.schemas import resolve_references

    def within(refs: Sequence[Reference], subject: str) -> list[Reference]:
        context = context_of(subject)[0]
        return [Reference(r.name, qualified(r.subject, context), r.version) for r in refs]

    def find(subject: str, version: int) -> tuple[str, list[Reference]]:
        found = client.version(subject, None if version == -1 else version)
        return found.text, within(found.references, subject)

    try:
        top = within(schema.references, schema.subject if subject is None else subject)
        return tuple(resolve_references(top, find))
    except RegistryError as e:
        raise FormatError(f"the references of {schema.subject or schema.id}: {e.message}") from e


def avro_text(text: str, references: Sequence[tuple[str, str]]) -> str:
    """An Avro schema with the named types of ``references`` written out where first used (the
    schema itself when it has none): what fastavro reads without a registry."""
    if not references:
        return text
    from odradek.registry.errors import RegistryError
    from odradek.registry.schemas import AvroSchema

    try:
        return AvroSchema(text, [referenced for _, referenced in references]).expanded()
    except RegistryError as e:
        raise FormatError(f"the Avro schema and its references do not parse: {e.message}") from e


def _avro_text_by_id(client: Any, schema_id: int, subject: str) -> str:
    """The self-contained text of the Avro schema ``schema_id`` names (a writer's) in the
    context of ``subject``."""
    found = client.by_id(schema_id, subject)
    return avro_text(found.text, _referenced(client, found, subject) if found.references else ())


def json_schema(data_type: DataType) -> dict[str, Any]:
    """The JSON Schema of values of ``data_type`` as the sink writes them: structs as objects
    (their non-nullable fields required), arrays, maps as objects with
    ``additionalProperties``, binary as base64 strings, dates and timestamps as ISO strings."""
    if isinstance(data_type, StructType):
        return {
            "type": "object",
            "properties": {
                f.name: _nullable(json_schema(f.dataType), f.nullable) for f in data_type.fields
            },
            "required": [f.name for f in data_type.fields if not f.nullable],
        }
    if isinstance(data_type, ArrayType):
        return {
            "type": "array",
            "items": _nullable(json_schema(data_type.elementType), data_type.containsNull),
        }
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise FormatError(f"a JSON object's keys are strings, not {data_type.keyType}")
        return {
            "type": "object",
            "additionalProperties": _nullable(
                json_schema(data_type.valueType), data_type.valueContainsNull
            ),
        }
    for kinds, schema in _JSON_TYPES:
        if isinstance(data_type, kinds):
            return dict(schema)
    raise FormatError(f"{data_type.simpleString()} has no JSON Schema form here")


_JSON_TYPES: tuple[tuple[type | tuple[type, ...], dict[str, str]], ...] = (
    (StringType, {"type": "string"}),
    ((ByteType, ShortType, IntegerType, LongType), {"type": "integer"}),
    ((FloatType, DoubleType, DecimalType), {"type": "number"}),
    (BooleanType, {"type": "boolean"}),
    (BinaryType, {"type": "string", "contentEncoding": "base64"}),
    ((TimestampType, TimestampNTZType), {"type": "string", "format": "date-time"}),
    (DateType, {"type": "string", "format": "date"}),
)


def _nullable(schema: dict[str, Any], nullable: bool) -> dict[str, Any]:
    if not nullable:
        return schema
    return {**schema, "type": [schema["type"], "null"]}


_ENCODERS: dict[SinkFormat, Any] = {}


def encode(column: SinkFormat, values: pa.Array) -> pa.Array:
    """``values`` (rows of the column's Spark type, in Arrow) framed in Confluent's wire format
    in the column's format."""
    found = _ENCODERS.get(column)
    if found is None:
        if column.format == "json":
            found = JsonEncoder(column.schema_id)
        elif column.format == "protobuf":
            from odradek.spark.protobuf import ProtobufEncoder

            found = ProtobufEncoder(column)
        else:
            from odradek.spark.avro import AvroEncoder

            found = AvroEncoder(column.schema_id, avro_text(column.text, column.references))
        _ENCODERS[column] = found
    result: pa.Array = found.encode(values)
    return result


def framed(rows: list[Any], prefix: bytes, body: Callable[[Any], bytes]) -> pa.Array:
    """A binary array of ``prefix + body(row)`` per row (null for a null row)."""
    out = bytearray()
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    valid = np.ones(len(rows), dtype=bool)
    for i, row in enumerate(rows):
        if row is None:
            valid[i] = False
        else:
            out += prefix
            out += body(row)
        offsets[i + 1] = len(out)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(), len(rows), [validity, pa.py_buffer(offsets), pa.py_buffer(bytes(out))]
    )


class JsonEncoder:
    """Rows to framed JSON text (Confluent's JSON Schema serializer's framing)."""

    def __init__(self, schema_id: int) -> None:
        self.prefix = bytes([MAGIC_BYTE]) + struct.pack(">I", schema_id)

    def encode(self, column: pa.Array) -> pa.Array:
        rows = column.to_pylist(maps_as_pydicts="strict")
        dumps = json.JSONEncoder(default=_json_default, separators=(",", ":")).encode
        return framed(rows, self.prefix, lambda row: dumps(row).encode())


def _json_default(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"a {type(value).__name__} has no JSON form")
