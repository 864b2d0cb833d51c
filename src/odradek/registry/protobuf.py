"""Protobuf schemas: a ``.proto`` file's text, parsed by ``proto-schema-parser``, or a
``FileDescriptorProto`` in base64 (what confluent-kafka's Python serializer registers), parsed
by ``protobuf``; both reduced to the same shape for compatibility checks.

The shape is, per message (by its name), each field number's wire kind and label. Reader and
writer are compatible as Confluent's Protobuf rules say for the common cases: a message the
writer has and the reader lacks is MESSAGE_REMOVED; a field number whose wire kind changes
(``int32``/``int64``/``uint32``/``uint64``/``bool``/enums share the varint kind, ``sint*``
zigzag, ``fixed32``/``sfixed32``, ``fixed64``/``sfixed64``, ``string``/``bytes``, and messages by
name) is FIELD_KIND_CHANGED; one that changes between single and repeated is
FIELD_LABEL_CHANGED; a proto2 ``required`` field added or removed is REQUIRED_FIELD_ADDED /
REMOVED. Adding, removing and renaming other fields is compatible. Type names are compared by
their last component (a reference's package is not resolved), and ``oneof`` moves are not
checked.

A schema's canonical text is the parser's own printing of the ``.proto`` (comments kept,
layout normalised), or the descriptor serialised again.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Sequence
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.generator import Generator
from proto_schema_parser.parser import Parser

from odradek.registry.errors import invalid_schema

# A message's fields: number -> (wire kind, label).
Shape = dict[str, dict[int, tuple[str, str]]]

_KINDS = {
    **dict.fromkeys(("int32", "int64", "uint32", "uint64", "bool"), "varint"),
    **dict.fromkeys(("sint32", "sint64"), "zigzag"),
    **dict.fromkeys(("fixed32", "sfixed32"), "fixed32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "fixed64"),
    **dict.fromkeys(("string", "bytes"), "length-delimited"),
    "float": "float",
    "double": "double",
}
# FieldDescriptorProto.Type numbers of the scalar types.
_DESCRIPTOR_TYPES = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
    8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
    17: "sint32", 18: "sint64",
}  # fmt: skip
_TYPE_MESSAGE, _TYPE_ENUM = 11, 14
_LABEL_REPEATED, _LABEL_REQUIRED = 3, 2


class _Raise(ErrorListener):  # type: ignore[misc]
    def syntaxError(
        self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise ValueError(f"line {line}:{column} {msg}")


def _quiet(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Raise())


class ProtobufSchema:
    """A Protobuf schema (see the module doc)."""

    def __init__(self, text: str, references: Sequence[str] = ()) -> None:
        stripped = text.strip()
        descriptor = descriptor_of(stripped)
        if descriptor is not None:
            self._canonical = base64.standard_b64encode(
                descriptor.SerializeToString(deterministic=True)
            ).decode()
            self.shape = _descriptor_shape(descriptor)
            self.package = descriptor.package
            return
        try:
            parsed = Parser(setup_lexer=_quiet, setup_parser=_quiet).parse(stripped)
        except (ValueError, RecursionError) as e:
            raise invalid_schema(str(e)) from e
        if not any(isinstance(e, ast.Message | ast.Enum) for e in parsed.file_elements):
            raise invalid_schema("a Protobuf schema defines at least one message or enum")
        self._canonical = Generator().generate(parsed)
        self.shape = _file_shape(parsed)
        self.package = next(
            (e.name for e in parsed.file_elements if isinstance(e, ast.Package)), ""
        )

    def message_names(self) -> tuple[str, ...]:
        """The full names of the file's messages, nested ones too (``package.Outer.Inner``)."""
        prefix = f"{self.package}." if self.package else ""
        return tuple(prefix + name for name in self.shape)

    @property
    def canonical(self) -> str:
        return self._canonical

    def normalized(self) -> str:
        return self._canonical

    def read_errors(self, writer: object) -> list[str]:
        if not isinstance(writer, ProtobufSchema):
            return ["the schemas are of different types"]
        return shape_errors(self.shape, writer.shape)


def shape_errors(reader: Shape, writer: Shape) -> list[str]:
    """What makes data written with ``writer`` unreadable as ``reader`` ([] if nothing)."""
    errors = []
    for name, written in writer.items():
        read = reader.get(name)
        if read is None:
            errors.append(f"{name}: MESSAGE_REMOVED")
            continue
        for number, (kind, label) in written.items():
            if number not in read:
                if label == "required":
                    errors.append(f"{name}.{number}: REQUIRED_FIELD_REMOVED")
                continue
            read_kind, read_label = read[number]
            if read_kind != kind:
                errors.append(f"{name}.{number}: FIELD_KIND_CHANGED {kind} -> {read_kind}")
            if (read_label == "repeated") != (label == "repeated"):
                errors.append(f"{name}.{number}: FIELD_LABEL_CHANGED {label} -> {read_label}")
        for number, (_, label) in read.items():
            if label == "required" and number not in written:
                errors.append(f"{name}.{number}: REQUIRED_FIELD_ADDED")
    return errors


def descriptor_of(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """``text`` as a base64 FileDescriptorProto, or None when it is not one."""
    if not text or any(c.isspace() or c in "{};" for c in text):
        return None
    try:
        data = base64.b64decode(text, validate=True)
        descriptor = descriptor_pb2.FileDescriptorProto()
        descriptor.ParseFromString(data)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return descriptor if descriptor.message_type or descriptor.enum_type else None


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _descriptor_shape(descriptor: descriptor_pb2.FileDescriptorProto) -> Shape:
    shape: Shape = {}

    def walk(message: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        name = f"{prefix}{message.name}"
        fields = {}
        for field in message.field:
            if field.type == _TYPE_ENUM:
                kind = "varint"
            elif field.type == _TYPE_MESSAGE:
                kind = f"message {_last(field.type_name)}"
            else:
                kind = _KINDS[_DESCRIPTOR_TYPES.get(field.type, "bytes")]
            label = {_LABEL_REPEATED: "repeated", _LABEL_REQUIRED: "required"}.get(
                field.label, "single"
            )
            fields[field.number] = (kind, label)
        shape[name] = fields
        for nested in message.nested_type:
            walk(nested, f"{name}.")

    for message in descriptor.message_type:
        walk(message, "")
    return shape


def _messages(elements: Sequence[Any], prefix: str) -> Iterator[tuple[str, ast.Message]]:
    for element in elements:
        if isinstance(element, ast.Message):
            name = f"{prefix}{element.name}"
            yield name, element
            yield from _messages(element.elements, f"{name}.")


def _enums(elements: Sequence[Any]) -> Iterator[str]:
    for element in elements:
        if isinstance(element, ast.Enum):
            yield element.name
        elif isinstance(element, ast.Message):
            yield from _enums(element.elements)


def _file_shape(parsed: ast.File) -> Shape:
    enums = set(_enums(parsed.file_elements))
    shape: Shape = {}
    for name, message in _messages(parsed.file_elements, ""):
        fields: dict[int, tuple[str, str]] = {}
        elements = list(message.elements)
        for element in list(elements):
            if isinstance(element, ast.OneOf):
                elements += element.elements
        for element in elements:
            if isinstance(element, ast.MapField):
                fields[element.number] = ("message map", "repeated")
            elif isinstance(element, ast.Field):
                type_name = element.type.lstrip(".")
                if type_name in _KINDS:
                    kind = _KINDS[type_name]
                elif _last(type_name) in enums:
                    kind = "varint"
                else:
                    kind = f"message {_last(type_name)}"
                cardinality = element.cardinality.value.lower() if element.cardinality else ""
                label = cardinality if cardinality in ("repeated", "required") else "single"
                fields[element.number] = (kind, label)
        shape[name] = fields
    return shape
