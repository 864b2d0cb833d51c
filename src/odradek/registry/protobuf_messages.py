"""Protobuf values of a registered schema, read without a Spark or a table in sight: the
schema's text (and its references' texts) as a descriptor pool, the message indexes of
Confluent's framing, the message they name, and a message as a Python dict.

A registered Protobuf schema is a ``.proto`` file, as source or as a base64
``FileDescriptorProto`` (what confluent-kafka's serializer registers). Source is turned into a
``FileDescriptorProto`` here (types resolved innermost scope first, as protoc does). A file's
imports are its references, added to the pool first under their names; the well-known types
(``google/protobuf/*.proto``, which Confluent's serializers do not register) come from the
protobuf runtime.

A framed value is magic byte 0, a 4-byte schema id, the *message indexes* (a zigzag varint
count, then that many zigzag varints: the path of the message among the file's top-level
messages and then their nested ones; ``[0]``, the first top-level message, is written as a
single 0 byte) and the message bytes.

The other way, a dict of field values becomes a message (:func:`from_python`) and a message's
indexes are found and written (:func:`indexes_of`, :func:`write_indexes`).

Pure functions; a pool, once built, is read-only and may be shared between threads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, FileDescriptor

from odradek.protocol.records import zigzag_varint
from odradek.registry.protobuf import descriptor_of

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
TIMESTAMP = "google.protobuf.Timestamp"
# Message indexes deeper than this name no message any schema here defines.
_MAX_INDEXES = 64
_MAX_REFERENCES = 32


class ProtobufSchemaError(ValueError):
    """A schema that gives no messages here (it does not parse, or imports what is not given)."""


# -- schema text to descriptors ------------------------------------------------------------------


def file_descriptor(text: str, name: str = "schema.proto") -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of a registered schema's text (base64 or source); a source
    file is named ``name`` (its name among the files that import it)."""
    stripped = text.strip()
    found = descriptor_of(stripped)
    if found is not None:
        return found
    return _from_source(stripped, name)


def _from_source(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    try:
        parsed = Parser().parse(text)
    except Exception as e:  # the parser raises what its ANTLR grammar raises
        raise ProtobufSchemaError(f"the Protobuf schema does not parse: {e}") from e
    proto = descriptor_pb2.FileDescriptorProto(name=name)
    proto.syntax = parsed.syntax or "proto3"
    package = ""
    for element in parsed.file_elements:
        if isinstance(element, ast.Package):
            package = element.name
            proto.package = package
        elif isinstance(element, ast.Import):
            proto.dependency.append(element.name)
    defined: set[str] = set()
    enums: set[str] = set()

    def collect(elements: Sequence[Any], scope: str) -> None:
        for e in elements:
            if isinstance(e, ast.Message | ast.Enum):
                defined.add(f"{scope}.{e.name}")
            if isinstance(e, ast.Enum):
                enums.add(f"{scope}.{e.name}")
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
                # An imported file's type: named as written, resolved by the pool.
                return f".{name}"
            parts = parts[:-1]

    def set_type(field: Any, kind: str, scope: str) -> None:
        if kind in _SCALARS:
            field.type = _SCALARS[kind]
            return
        full = type_name(kind, scope)
        field.type_name = full
        if full in enums:
            field.type = _FDP.TYPE_ENUM
        elif full in defined:
            field.type = _FDP.TYPE_MESSAGE
        # Otherwise left unset: the pool tells an imported message from an imported enum.

    def add_enum(target: Any, enum: Any) -> None:
        built = target.add(name=enum.name)
        for value in enum.elements:
            if isinstance(value, ast.EnumValue):
                built.value.add(name=value.name, number=value.number)

    def add_field(built: Any, member: Any, inner: str) -> None:
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
            return
        if not isinstance(member, ast.Field):
            return
        label = {
            ast.FieldCardinality.REPEATED: _FDP.LABEL_REPEATED,
            ast.FieldCardinality.REQUIRED: _FDP.LABEL_REQUIRED,
        }.get(member.cardinality or ast.FieldCardinality.OPTIONAL, _FDP.LABEL_OPTIONAL)
        field = built.field.add(name=member.name, number=member.number, label=label)
        if member.cardinality == ast.FieldCardinality.OPTIONAL and proto.syntax == "proto3":
            field.proto3_optional = True
            field.oneof_index = len(built.oneof_decl)
            built.oneof_decl.add(name=f"_{member.name}")
        set_type(field, member.type, inner)

    def add_message(target: Any, message: Any, scope: str) -> None:
        built = target.add(name=message.name)
        inner = f"{scope}.{message.name}"
        # Real oneofs first: the synthetic ones of proto3 ``optional`` fields must follow them.
        oneofs = [e for e in message.elements if isinstance(e, ast.OneOf)]
        for oneof in oneofs:
            built.oneof_decl.add(name=oneof.name)
        for element in message.elements:
            if isinstance(element, ast.OneOf):
                for member in element.elements:
                    if isinstance(member, ast.Field):
                        add_field(built, member, inner)
                        built.field[-1].oneof_index = oneofs.index(element)
            else:
                add_field(built, element, inner)
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
    if not proto.message_type and not proto.enum_type:
        raise ProtobufSchemaError("the Protobuf schema defines no message")
    return proto


def schema_file(text: str, references: Sequence[tuple[str, str]] = ()) -> FileDescriptor:
    """The schema ``text`` as a file of a pool of its own. ``references`` are the files it
    imports, as (name, text), each one's own imports before it."""
    pool = descriptor_pool.DescriptorPool()
    given = {name for name, _ in references}
    if len(given) > _MAX_REFERENCES:
        raise ProtobufSchemaError(f"the Protobuf schema has {len(given)} references")
    added: set[str] = set()
    for name, referenced in references:
        if name not in added:
            _add(pool, file_descriptor(referenced, name), given | added)
            added.add(name)
    proto = file_descriptor(text)
    if proto.name in added:
        proto.name = f"{proto.name}~schema"
    return _add(pool, proto, added)


def _add(
    pool: descriptor_pool.DescriptorPool,
    proto: descriptor_pb2.FileDescriptorProto,
    available: set[str],
) -> FileDescriptor:
    for dependency in proto.dependency:
        if dependency in available:
            continue
        if not dependency.startswith("google/protobuf/"):
            raise ProtobufSchemaError(
                f"the Protobuf schema imports {dependency}, which is not among its references"
            )
        known = _well_known(dependency)
        try:
            pool.FindFileByName(dependency)
        except KeyError:
            pool.AddSerializedFile(known)
    _complete_types(pool, proto)
    try:
        return pool.AddSerializedFile(proto.SerializeToString())
    except (TypeError, KeyError, ValueError) as e:
        raise ProtobufSchemaError(f"the Protobuf schema is not valid: {e}") from e


def _well_known(name: str) -> bytes:
    # The well-known types' modules register their files in the default pool when imported.
    from google.protobuf import (  # noqa: F401
        any_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    try:
        return bytes(descriptor_pool.Default().FindFileByName(name).serialized_pb)
    except KeyError as e:
        raise ProtobufSchemaError(f"the Protobuf schema imports {name}, not known here") from e


def _complete_types(
    pool: descriptor_pool.DescriptorPool, proto: descriptor_pb2.FileDescriptorProto
) -> None:
    """Give the fields of imported types (left without a type by the source parser) theirs,
    from the files already in ``pool``."""

    def walk(message: descriptor_pb2.DescriptorProto) -> None:
        for field in message.field:
            if field.HasField("type") or not field.type_name:
                continue
            name = field.type_name.lstrip(".")
            candidates = [f"{proto.package}.{name}", name] if proto.package else [name]
            for candidate in candidates:
                try:
                    pool.FindMessageTypeByName(candidate)
                    field.type, field.type_name = _FDP.TYPE_MESSAGE, f".{candidate}"
                    break
                except KeyError:
                    pass
                try:
                    pool.FindEnumTypeByName(candidate)
                    field.type, field.type_name = _FDP.TYPE_ENUM, f".{candidate}"
                    break
                except KeyError:
                    pass
            else:
                raise ProtobufSchemaError(f"the type {name} is not defined in the schema")
        for nested in message.nested_type:
            walk(nested)

    for message in proto.message_type:
        walk(message)


# -- messages ------------------------------------------------------------------------------------


def message_at(file: FileDescriptor, indexes: Sequence[int]) -> Descriptor:
    """The message at ``indexes`` (see the module doc) of ``file``."""
    messages = list(file.message_types_by_name.values())
    message = None
    for index in indexes:
        if not 0 <= index < len(messages):
            raise ValueError(f"the schema has no message at indexes {list(indexes)}")
        message = messages[index]
        messages = list(message.nested_types)
    if message is None:
        raise ValueError("no message indexes")
    return message


def message_named(file: FileDescriptor, name: str | None) -> Descriptor:
    """The message called ``name`` (full, or without the package; a nested one by its dotted
    path) in ``file``, or its first top-level message when ``name`` is None."""
    if name is None:
        return message_at(file, [0])
    path = name.removeprefix(f"{file.package}.") if file.package else name
    candidates = file.message_types_by_name
    found = None
    for part in path.split("."):
        found = candidates.get(part)
        if found is None:
            break
        candidates = found.nested_types_by_name
    if found is None:
        raise ProtobufSchemaError(f"the Protobuf schema has no message {name}")
    return found


def message_class(message: Descriptor) -> Any:
    return message_factory.GetMessageClass(message)


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
    if count < 0 or count > _MAX_INDEXES:
        raise ValueError(f"a Protobuf value has {count} message indexes")
    indexes = []
    for _ in range(count):
        index, position = _zigzag(data, position)
        indexes.append(index)
    return tuple(indexes), position


def parse(message: Descriptor, data: bytes) -> Any:
    """``data`` parsed as ``message``; ValueError when it does not parse."""
    parsed = message_class(message)()
    try:
        parsed.ParseFromString(data)
    except Exception as e:  # the runtime's DecodeError, or what a C++ runtime raises
        raise ValueError(f"a Protobuf value does not decode: {e}") from e
    return parsed


def to_python(message: Any, timestamps: bool = False) -> dict[str, Any]:
    """A message's fields by name: enums as their names (a number with none as its digits),
    messages recursively, maps as (key, value) pairs, a field with presence that is not set
    as None. ``timestamps``: a ``google.protobuf.Timestamp`` as an aware ``datetime``."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = [(k, _single(value_field, v, timestamps)) for k, v in value.items()]
        elif field.is_repeated:
            out[field.name] = [_single(field, v, timestamps) for v in value]
        elif field.has_presence and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _single(field, value, timestamps)
    return out


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and bool(field.message_type.GetOptions().map_entry)


def _single(field: FieldDescriptor, value: Any, timestamps: bool) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if timestamps and field.message_type.full_name == TIMESTAMP:
            return value.ToDatetime(tzinfo=UTC)
        return to_python(value, timestamps)
    if field.type == FieldDescriptor.TYPE_ENUM:
        found = field.enum_type.values_by_number.get(value)
        return found.name if found is not None else str(value)
    return value


# -- writing -------------------------------------------------------------------------------------


def indexes_of(message: Descriptor) -> tuple[int, ...]:
    """The message indexes of ``message`` in its file."""
    path: list[int] = []
    current: Descriptor | None = message
    while current is not None:
        parent = current.containing_type
        siblings = (
            list(parent.nested_types)
            if parent is not None
            else list(current.file.message_types_by_name.values())
        )
        path.append(next(i for i, m in enumerate(siblings) if m.full_name == current.full_name))
        current = parent
    return tuple(reversed(path))


def write_indexes(indexes: Sequence[int]) -> bytes:
    """Message indexes as Confluent's serializers write them (``[0]`` as the single byte 0)."""
    if list(indexes) == [0]:
        return b"\0"
    return b"".join(zigzag_varint(n) for n in (len(indexes), *indexes))


def from_python(message: Descriptor, value: Mapping[str, Any]) -> Any:
    """A ``message`` with the fields of ``value`` (as :func:`to_python` gives them: enums by
    name or number, messages as dicts, maps as dicts or (key, value) pairs, a Timestamp as a
    datetime; None leaves a field unset). ValueError for a field the message lacks or a value
    that does not fit its field."""
    built = message_class(message)()
    try:
        _fill(built, value)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"a row does not fit the message {message.full_name}: {e}") from e
    return built


def _fill(target: Any, value: Mapping[str, Any]) -> None:
    fields = target.DESCRIPTOR.fields_by_name
    for name, item in value.items():
        field = fields.get(name)
        if field is None:
            raise ValueError(f"{target.DESCRIPTOR.full_name} has no field {name}")
        if item is None:
            continue
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            container = getattr(target, name)
            pairs = item.items() if isinstance(item, Mapping) else item
            for key, entry in pairs:
                if value_field.type == FieldDescriptor.TYPE_MESSAGE:
                    _fill_message(container[key], value_field, entry)
                else:
                    container[key] = _scalar(value_field, entry)
        elif field.is_repeated:
            container = getattr(target, name)
            for entry in item:
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    _fill_message(container.add(), field, entry)
                else:
                    container.append(_scalar(field, entry))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            _fill_message(getattr(target, name), field, item)
        else:
            setattr(target, name, _scalar(field, item))


def _fill_message(target: Any, field: FieldDescriptor, value: Any) -> None:
    if value is None:
        return
    if field.message_type.full_name == TIMESTAMP and isinstance(value, datetime):
        target.FromDatetime(value)
        return
    if not isinstance(value, Mapping):
        raise ValueError(f"{field.full_name} is a message, not {type(value).__name__}")
    target.SetInParent()
    _fill(target, value)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
        found = field.enum_type.values_by_name.get(value)
        if found is None:
            raise ValueError(f"{field.enum_type.full_name} has no value {value}")
        return found.number
    return value
