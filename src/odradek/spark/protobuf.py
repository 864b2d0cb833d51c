"""Protobuf values in Confluent's framing to Arrow (the source's ``protobuf`` format).

A value is magic byte 0, a 4-byte schema id, the *message indexes* (a zigzag varint count, then
that many zigzag varints: the path of the message in the schema's file, ``[0]`` — written as a
single 0 byte — for the first top-level message) and the message bytes. The schema's text is a
``.proto`` file, either as source or as a base64 ``FileDescriptorProto`` (what confluent-kafka's
serializer registers). The column's type is the first top-level message of the reader's schema;
each value is parsed with its writer's message by the protobuf runtime and turned into a dict of
field names (enums as their names, messages recursively, unset message fields null), which Arrow
takes by field name: a per-row path, unlike Avro's and JSON's.
"""

from __future__ import annotations

import base64
import binascii
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
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

_FDP = descriptor_pb2.FieldDescriptorProto

_SCALARS: dict[str, int] = {
    "double": _FDP.TYPE_DOUBLE,
    "float": _FDP.TYPE_FLOAT,
    "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32,
    "fixed64": _FDP.TYPE_FIXED64,
    "fixed32": _FDP.TYPE_FIXED32,
    "bool": _FDP.TYPE_BOOL,
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
    "uint32": _FDP.TYPE_UINT32,
    "sfixed32": _FDP.TYPE_SFIXED32,
    "sfixed64": _FDP.TYPE_SFIXED64,
    "sint32": _FDP.TYPE_SINT32,
    "sint64": _FDP.TYPE_SINT64,
}

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


class ProtobufSchemaError(ValueError):
    """A schema the protobuf format cannot read."""


# -- schema text to descriptors ------------------------------------------------------------------


def file_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto:
    stripped = text.strip()
    if stripped and not any(c.isspace() or c in "{};" for c in stripped):
        try:
            proto = descriptor_pb2.FileDescriptorProto()
            proto.ParseFromString(base64.b64decode(stripped, validate=True))
            return proto
        except (binascii.Error, ValueError):
            pass
    return _from_source(stripped)


def _from_source(text: str) -> descriptor_pb2.FileDescriptorProto:
    """A ``.proto`` file's messages and enums as a FileDescriptorProto (types named by the
    file's own messages and enums, resolved innermost scope first, as protoc does)."""
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    try:
        parsed = Parser().parse(text)
    except Exception as e:  # the parser raises what its ANTLR grammar raises
        raise ProtobufSchemaError(f"the Protobuf schema does not parse: {e}") from e
    proto = descriptor_pb2.FileDescriptorProto(name="schema.proto")
    proto.syntax = parsed.syntax or "proto3"
    package = ""
    for element in parsed.file_elements:
        if isinstance(element, ast.Package):
            package = element.name
            proto.package = package
    defined: set[str] = set()

    def collect(elements: Sequence[Any], scope: str) -> None:
        for e in elements:
            if isinstance(e, ast.Message | ast.Enum):
                defined.add(f"{scope}.{e.name}")
            if isinstance(e, ast.Message):
                collect(e.elements, f"{scope}.{e.name}")

    root = f".{package}" if package else ""
    collect(parsed.file_elements, root)

    def type_name(name: str, scope: str) -> str:
        if name.startswith("."):
            return name
        parts = scope.split(".")
        while True:
            candidate = ".".join([*parts, name])
            if candidate in defined:
                return candidate
            if len(parts) <= 1:
                raise ProtobufSchemaError(f"the type {name} is not defined in the schema")
            parts = parts[:-1]

    def add_enum(target: Any, enum: Any) -> None:
        built = target.add(name=enum.name)
        for value in enum.elements:
            if isinstance(value, ast.EnumValue):
                built.value.add(name=value.name, number=value.number)

    def set_type(field: Any, kind: str, scope: str) -> None:
        if kind in _SCALARS:
            field.type = _SCALARS[kind]
            return
        full = type_name(kind, scope)
        field.type_name = full
        field.type = _FDP.TYPE_MESSAGE  # enums are told apart below, once all are known
        if full in enums:
            field.type = _FDP.TYPE_ENUM

    enums: set[str] = set()

    def find_enums(elements: Sequence[Any], scope: str) -> None:
        for e in elements:
            if isinstance(e, ast.Enum):
                enums.add(f"{scope}.{e.name}")
            if isinstance(e, ast.Message):
                find_enums(e.elements, f"{scope}.{e.name}")

    find_enums(parsed.file_elements, root)

    def add_message(target: Any, message: Any, scope: str) -> None:
        built = target.add(name=message.name)
        inner = f"{scope}.{message.name}"
        fields = [
            e for e in message.elements if isinstance(e, ast.Field | ast.MapField | ast.OneOf)
        ]
        for element in fields:
            members = element.elements if isinstance(element, ast.OneOf) else [element]
            for member in members:
                if isinstance(member, ast.MapField):
                    entry_name = "".join(p.capitalize() for p in member.name.split("_")) + "Entry"
                    entry = built.nested_type.add(name=entry_name)
                    entry.options.map_entry = True
                    key = entry.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL)
                    set_type(key, member.key_type, inner)
                    value = entry.field.add(name="value", number=2, label=_FDP.LABEL_OPTIONAL)
                    set_type(value, member.value_type, inner)
                    field = built.field.add(
                        name=member.name, number=member.number, label=_FDP.LABEL_REPEATED
                    )
                    field.type = _FDP.TYPE_MESSAGE
                    field.type_name = f"{inner}.{entry_name}"
                    continue
                if not isinstance(member, ast.Field):
                    continue
                repeated = member.cardinality == ast.FieldCardinality.REPEATED
                field = built.field.add(
                    name=member.name,
                    number=member.number,
                    label=_FDP.LABEL_REPEATED if repeated else _FDP.LABEL_OPTIONAL,
                )
                set_type(field, member.type, inner)
        for element in message.elements:
            if isinstance(element, ast.Message):
                add_message(built.nested_type, element, inner)
            elif isinstance(element, ast.Enum):
                add_enum(built.enum_type, element)

    for element in parsed.file_elements:
        if isinstance(element, ast.Message):
            add_message(proto.message_type, element, root)
        elif isinstance(element, ast.Enum):
            add_enum(proto.enum_type, element)
    if not proto.message_type:
        raise ProtobufSchemaError("the Protobuf schema defines no message")
    return proto


def _pool_file(text: str) -> Any:
    proto = file_descriptor(text)
    pool = descriptor_pool.DescriptorPool()
    for dependency in proto.dependency:
        if not dependency.startswith("google/protobuf/"):
            raise ProtobufSchemaError(
                f"the Protobuf schema imports {dependency}; schema references are not read here"
            )
        # The well-known types' modules register their files in the default pool.
        from google.protobuf import (  # noqa: F401
            any_pb2,
            duration_pb2,
            empty_pb2,
            struct_pb2,
            timestamp_pb2,
            wrappers_pb2,
        )

        known = descriptor_pool.Default().FindFileByName(dependency)
        pool.AddSerializedFile(known.serialized_pb)
    try:
        return pool.AddSerializedFile(proto.SerializeToString())
    except TypeError as e:
        raise ProtobufSchemaError(f"the Protobuf schema is not valid: {e}") from e


# -- types ---------------------------------------------------------------------------------------


def _field_type(field: FieldDescriptor) -> DataType:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        message = field.message_type
        if message.GetOptions().map_entry:
            key = _field_type(message.fields_by_name["key"])
            value = _field_type(message.fields_by_name["value"])
            return MapType(key, value, True)
        inner: DataType = _struct(message)
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
    return StructType([StructField(f.name, _field_type(f), True) for f in message.fields])


def message_spark_type(text: str, message: str | None = None) -> StructType:
    """The Spark type of the schema's message named ``message`` (its full or short name; a
    nested message by its dotted path), or else of its first top-level message."""
    found = _pool_file(text)
    if message is None:
        return _struct(found.message_types_by_name[file_descriptor(text).message_type[0].name])
    package = found.package
    name = message.removeprefix(f"{package}.") if package else message
    parts = name.split(".")
    candidates = found.message_types_by_name
    descriptor = None
    for part in parts:
        descriptor = candidates.get(part)
        if descriptor is None:
            break
        candidates = descriptor.nested_types_by_name
    if descriptor is None:
        raise ProtobufSchemaError(f"the Protobuf schema has no message {message}")
    return _struct(descriptor)


# -- decoding ------------------------------------------------------------------------------------


def _zigzag(data: bytes, position: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    while True:
        if position >= len(data):
            raise ValueError("a Protobuf value ends inside its message indexes")
        b = data[position]
        position += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
        if shift > 63:
            raise ValueError("a Protobuf value's message index is too long")


def message_indexes(data: bytes) -> tuple[tuple[int, ...], int]:
    """The message indexes at the start of ``data`` (after the 5 framing bytes), and where the
    message begins."""
    count, position = _zigzag(data, 0)
    if count == 0:
        return (0,), position
    if count < 0 or count > 64:
        raise ValueError(f"a Protobuf value has {count} message indexes")
    indexes = []
    for _ in range(count):
        index, position = _zigzag(data, position)
        indexes.append(index)
    return tuple(indexes), position


def _to_python(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                out[field.name] = [
                    (
                        k,
                        _to_python(v)
                        if value_field.type == FieldDescriptor.TYPE_MESSAGE
                        else _enum_name(value_field, v),
                    )
                    for k, v in value.items()
                ]
            elif field.is_repeated:
                out[field.name] = [_to_python(v) for v in value]
            else:
                out[field.name] = _to_python(value) if message.HasField(field.name) else None
        elif field.is_repeated:
            out[field.name] = [_enum_name(field, v) for v in value]
        else:
            out[field.name] = _enum_name(field, value)
    return out


def _enum_name(field: FieldDescriptor, value: Any) -> Any:
    if field.type != FieldDescriptor.TYPE_ENUM:
        return value
    found = field.enum_type.values_by_number.get(value)
    return found.name if found is not None else str(value)


class ProtobufDecoder:
    """Framed Protobuf values to Arrow, by field name (see the module doc)."""

    def __init__(self, arrow_type: pa.DataType, writer_text: Callable[[int], str]) -> None:
        self.arrow_type = arrow_type
        self._writer_text = writer_text
        self._files: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _class(self, schema_id: int, indexes: tuple[int, ...]) -> Any:
        with self._lock:
            found = self._files.get(schema_id)
        if found is None:
            found = _pool_file(self._writer_text(schema_id))
            with self._lock:
                self._files[schema_id] = found
        messages = list(found.message_types_by_name.values())
        message = None
        for index in indexes:
            if index >= len(messages):
                raise ValueError(f"schema {schema_id} has no message at indexes {indexes}")
            message = messages[index]
            messages = list(message.nested_types)
        assert message is not None
        return message_factory.GetMessageClass(message)

    def decode(self, values: pa.Array) -> pa.Array:
        from odradek.spark.avro import grouped_decode

        return grouped_decode(values, self.arrow_type, self._decode_group)

    def _decode_group(self, schema_id: int, data: Any, starts: Any, ends: Any) -> pa.Array:
        raw = data.tobytes() if hasattr(data, "tobytes") else bytes(data)
        rows = []
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            body = raw[start:end]
            indexes, at = message_indexes(body)
            message = self._class(schema_id, indexes)()
            try:
                message.ParseFromString(body[at:])
            except Exception as e:  # the runtime's DecodeError
                raise ValueError(f"a Protobuf value does not decode: {e}") from e
            rows.append(_to_python(message))
        return pa.array(rows, type=self.arrow_type)
