"""Protobuf values in Confluent's framing to Arrow (the source's ``protobuf`` format).

A value is Confluent's framing (magic byte 0, a 4-byte schema id, the message indexes) and the
message bytes; schema texts, framing and messages are read (and written, by the sink's
:class:`ProtobufEncoder`) by
:mod:`odradek.registry.protobuf_messages`, which the Iceberg tables share. The column's type is
the first top-level message of the reader's schema; each value is parsed with its writer's
message by the protobuf runtime and turned into a dict of field names (enums as their names,
messages recursively, unset fields with presence null), which Arrow takes by field name: a
per-row path, unlike Avro's and JSON's.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from odradek.registry.protobuf_messages import (
    ProtobufSchemaError,
    from_python,
    indexes_of,
    message_at,
    message_indexes,
    message_named,
    parse,
    schema_file,
    to_python,
    write_indexes,
)
from odradek.spark.schema_registry import MAGIC_BYTE

if TYPE_CHECKING:
    from odradek.spark.typed import SinkFormat

__all__ = ["ProtobufDecoder", "ProtobufEncoder", "ProtobufSchemaError", "message_spark_type"]

_SPARK: dict[int, DataType] = {
    FieldDescriptor.TYPE_DOUBLE: DoubleType(),
    FieldDescriptor.TYPE_FLOAT: FloatType(),
    FieldDescriptor.TYPE_INT64: LongType(),
    FieldDescriptor.TYPE_UINT64: LongType(),
    FieldDescriptor.TYPE_INT32: IntegerType(),
    FieldDescriptor.TYPE_FIXED64: LongType(),
    FieldDescriptor.TYPE_FIXED32: LongType(),
    FieldDescriptor.TYPE_BOOL: BooleanType(),
    FieldDescriptor.TYPE_STRING: StringType(),
    FieldDescriptor.TYPE_BYTES: BinaryType(),
    FieldDescriptor.TYPE_UINT32: LongType(),
    FieldDescriptor.TYPE_ENUM: StringType(),
    FieldDescriptor.TYPE_SFIXED32: IntegerType(),
    FieldDescriptor.TYPE_SFIXED64: LongType(),
    FieldDescriptor.TYPE_SINT32: IntegerType(),
    FieldDescriptor.TYPE_SINT64: LongType(),
}


# -- types ---------------------------------------------------------------------------------------


def _field_type(field: FieldDescriptor, depth: int) -> DataType:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        message = field.message_type
        if message.GetOptions().map_entry:
            key = _field_type(message.fields_by_name["key"], depth)
            value = _field_type(message.fields_by_name["value"], depth)
            return MapType(key, value, True)
        inner: DataType = _struct(message, depth + 1)
    else:
        inner = _SPARK[field.type]
    if _repeated(field):
        return ArrayType(inner, True)
    return inner


def _repeated(field: FieldDescriptor) -> bool:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        return False
    return bool(field.is_repeated)


def _struct(message: Descriptor, depth: int = 0) -> StructType:
    if depth > 32:
        raise ProtobufSchemaError(f"the message {message.full_name} nests too deep (recursive?)")
    return StructType([StructField(f.name, _field_type(f, depth), True) for f in message.fields])


def message_spark_type(
    text: str, message: str | None = None, references: Sequence[tuple[str, str]] = ()
) -> StructType:
    """The Spark type of the schema's message named ``message`` (its full or short name; a
    nested message by its dotted path), or else of its first top-level message; the files the
    schema imports are ``references``, as (name, text)."""
    return _struct(message_named(schema_file(text, references), message))


# -- decoding ------------------------------------------------------------------------------------


class ProtobufDecoder:
    """Framed Protobuf values to Arrow, by field name (see the module doc)."""

    def __init__(
        self,
        arrow_type: pa.DataType,
        writer_text: Callable[[int], str],
        writer_references: Callable[[int], Sequence[tuple[str, str]]] = lambda _: (),
    ) -> None:
        self.arrow_type = arrow_type
        self._writer_text = writer_text
        self._writer_references = writer_references
        self._files: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _message(self, schema_id: int, indexes: tuple[int, ...]) -> Descriptor:
        with self._lock:
            found = self._files.get(schema_id)
        if found is None:
            found = schema_file(self._writer_text(schema_id), self._writer_references(schema_id))
            with self._lock:
                self._files[schema_id] = found
        return message_at(found, indexes)

    def decode(self, values: pa.Array) -> pa.Array:
        from odradek.spark.avro import grouped_decode

        return grouped_decode(values, self.arrow_type, self._decode_group)

    def _decode_group(self, schema_id: int, data: Any, starts: Any, ends: Any) -> pa.Array:
        raw = data.tobytes() if hasattr(data, "tobytes") else bytes(data)
        rows = []
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            body = raw[start:end]
            indexes, at = message_indexes(body)
            rows.append(to_python(parse(self._message(schema_id, indexes), body[at:])))
        return pa.array(rows, type=self.arrow_type)


class ProtobufEncoder:
    """Rows (of the message's Spark type, in Arrow) to framed Protobuf values of a registered
    schema's message: the framing, the message's indexes, the message."""

    def __init__(self, column: SinkFormat) -> None:
        file = schema_file(column.text, column.references)
        self.message = message_named(file, column.message)
        self.prefix = (
            bytes([MAGIC_BYTE])
            + struct.pack(">I", column.schema_id)
            + write_indexes(indexes_of(self.message))
        )

    def encode(self, column: pa.Array) -> pa.Array:
        from odradek.spark.typed import framed

        rows = column.to_pylist(maps_as_pydicts="strict")
        message = self.message
        return framed(rows, self.prefix, lambda row: from_python(message, row).SerializeToString())
