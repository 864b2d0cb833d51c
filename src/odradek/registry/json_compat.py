"""Whether data valid under one JSON Schema is valid under another: the reader/writer check
behind the compatibility levels for JSON Schemas, after Confluent's rules for them.

``reader_errors(reader, writer)`` lists what data written under ``writer`` may carry that
``reader`` refuses, walking the two schemas side by side (``properties``, ``items``,
``additionalProperties``):

- a type the writer allows and the reader does not (``integer`` is within ``number``);
- a property the reader requires that the writer does not, and has no default;
- a property the reader adds to an *open* writer (one that allows additional properties): old
  data may hold anything under that name, unless the reader accepts anything there;
- a property the writer has and a *closed* reader (``additionalProperties: false``) lacks;
- an ``enum`` or ``const`` narrowed, a bound (``maxLength``, ``minimum``, ``maxItems``, ...) made
  stricter, ``additionalProperties`` closed.

A ``$ref``, ``allOf``/``anyOf``/``oneOf`` or ``not`` is compared as a whole: equal on both
sides, or it is reported. The schemas are plain JSON values (dicts or booleans).
"""

from __future__ import annotations

from typing import Any

_UPPER_BOUNDS = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER_BOUNDS = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_WHOLE = ("$ref", "allOf", "anyOf", "oneOf", "not", "pattern", "format", "multipleOf")
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})


def _types(schema: dict[str, Any]) -> frozenset[str]:
    declared = schema.get("type")
    if declared is None:
        return _ALL_TYPES
    names = [declared] if isinstance(declared, str) else list(declared)
    found = set(names)
    if "number" in found:
        found.add("integer")
    return frozenset(found)


def _accepts_anything(schema: object) -> bool:
    return schema is True or schema == {}


def _additional(schema: dict[str, Any]) -> object:
    """What the schema says of properties it does not name (True: anything)."""
    return schema.get("additionalProperties", True)


def reader_errors(reader: object, writer: object, path: str = "#") -> list[str]:
    """What data written under ``writer`` may hold that ``reader`` refuses ([] if nothing)."""
    if _accepts_anything(reader) or writer is False:
        return []
    if reader is False:
        return [f"{path}: the reader accepts nothing"]
    if writer is True:
        writer = {}
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return [f"{path}: not a schema"]
    errors: list[str] = []
    narrowed = _types(writer) - _types(reader)
    if narrowed:
        errors.append(f"{path}: TYPE_NARROWED {sorted(narrowed)} no longer allowed")
    errors += _values_errors(reader, writer, path)
    errors += _bounds_errors(reader, writer, path)
    for key in _WHOLE:
        if key in reader and reader.get(key) != writer.get(key):
            errors.append(f"{path}: {key.upper().lstrip('$')}_CHANGED")
    if "object" in _types(reader) & _types(writer):
        errors += _object_errors(reader, writer, path)
    if "array" in _types(reader) & _types(writer) and "items" in reader:
        errors += reader_errors(reader["items"], writer.get("items", True), f"{path}/items")
    return errors


def _values_errors(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    errors = []
    if "enum" in reader:
        written = writer.get("enum", [writer["const"]] if "const" in writer else None)
        if written is None or any(v not in reader["enum"] for v in written):
            errors.append(f"{path}: ENUM_ARRAY_NARROWED")
    if "const" in reader and writer.get("const", object()) != reader["const"]:
        errors.append(f"{path}: CONST_CHANGED")
    return errors


def _bounds_errors(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    errors = []
    for key in _UPPER_BOUNDS:
        if key in reader and (key not in writer or writer[key] > reader[key]):
            errors.append(f"{path}: {key.upper()}_DECREASED")
    for key in _LOWER_BOUNDS:
        if key in reader and (key not in writer or writer[key] < reader[key]):
            errors.append(f"{path}: {key.upper()}_INCREASED")
    return errors


def _object_errors(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    errors = []
    reader_props: dict[str, Any] = reader.get("properties", {})
    writer_props: dict[str, Any] = writer.get("properties", {})
    writer_required = set(writer.get("required", []))
    for name in reader.get("required", []):
        if name not in writer_required and "default" not in reader_props.get(name, {}):
            errors.append(f"{path}/properties/{name}: REQUIRED_PROPERTY_ADDED")
    writer_open = _additional(writer)
    for name, schema in reader_props.items():
        where = f"{path}/properties/{name}"
        if name in writer_props:
            errors += reader_errors(schema, writer_props[name], where)
        elif writer_open is not False and reader_errors(schema, writer_open, where):
            # Old data may hold this name with whatever the writer allowed of unnamed ones.
            errors.append(f"{where}: PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
    reader_open = _additional(reader)
    for name, schema in writer_props.items():
        if name not in reader_props:
            if reader_open is False:
                errors.append(
                    f"{path}/properties/{name}: PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
                )
            elif not _accepts_anything(reader_open):
                errors += reader_errors(reader_open, schema, f"{path}/properties/{name}")
    if reader_open is False and writer_open is not False:
        errors.append(f"{path}: ADDITIONAL_PROPERTIES_REMOVED")
    elif not _accepts_anything(reader_open) and writer_open is not False:
        errors += reader_errors(reader_open, writer_open, f"{path}/additionalProperties")
    return errors
