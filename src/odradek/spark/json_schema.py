"""The column type of values of a JSON Schema, as Arrow: one mapping for the Spark source's
typed columns (their Spark types are derived from it: :func:`json_schema_spark_type`) and for
the columns of topics' Iceberg tables.

An object with properties is a struct (every field nullable: an absent property is a null, and
a later schema may drop it); an object with only ``additionalProperties`` a map with string
keys; an array a list; ``string``, ``integer`` (int64), ``number`` (double), ``boolean``; a
type, or an ``anyOf``/``oneOf``, of ``null`` besides one other is that other; an ``enum``
without a type is a string; strings with a format (date-time, uuid, ...) stay strings, as JSON
carries them; local ``$ref``\\s are followed (JSON Pointer escapes included).

Pure functions on parsed JSON: any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import DataType


class NoColumnType(ValueError):
    """A JSON Schema (or a part of one) that has no column type here."""


_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int64(),
    "number": pa.float64(),
    "boolean": pa.bool_(),
}
# How deep "$ref"s may lead: a schema that refers to itself has no finite columns.
_MAX_DEPTH = 32


def json_schema_to_arrow(schema: object, document: object = None, depth: int = 0) -> pa.DataType:
    """The Arrow type of values of ``schema`` (parsed JSON) inside ``document`` (where its
    local ``$ref``\\s point; by default ``schema`` itself); see the module doc."""
    document = schema if document is None else document
    if depth > _MAX_DEPTH:
        raise NoColumnType("the schema refers to itself: no finite columns")
    if not isinstance(schema, dict):
        raise NoColumnType(f"{schema!r} is not a JSON Schema with a column type")
    reference = schema.get("$ref")
    if isinstance(reference, str):
        return json_schema_to_arrow(_resolve(reference, document), document, depth + 1)
    for combinator in ("anyOf", "oneOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list):
            kept = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(kept) != 1:
                raise NoColumnType(f"{combinator} of {len(kept)} types has no column type")
            return json_schema_to_arrow(kept[0], document, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise NoColumnType(f"a value of {len(kinds)} types has no column type")
        kind = kinds[0]
    if kind is None and "properties" in schema:
        kind = "object"
    if kind is None and "enum" in schema:
        kind = "string"
    if kind == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, dict):
            return pa.map_(pa.string(), json_schema_to_arrow(extra, document, depth + 1))
        if not isinstance(properties, dict) or not properties:
            raise NoColumnType("an object without properties has no columns")
        return pa.struct(_fields(properties, document, depth + 1))
    if kind == "array":
        return pa.list_(json_schema_to_arrow(schema.get("items", {}), document, depth + 1))
    primitive = _PRIMITIVES.get(str(kind))
    if primitive is None:
        raise NoColumnType(f"type {kind!r} has no column type")
    return primitive


def _resolve(reference: str, document: object) -> object:
    """A local ``$ref`` (``#/$defs/Name``, JSON Pointer escapes included) in ``document``."""
    if not reference.startswith("#"):
        raise NoColumnType(f"$ref {reference!r} is not in the schema itself")
    found = document
    for part in filter(None, reference[1:].split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(found, dict) or key not in found:
            raise NoColumnType(f"$ref {reference!r} points nowhere")
        found = found[key]
    return found


def _fields(properties: Mapping[str, Any], document: object, depth: int) -> list[pa.Field]:
    return [
        pa.field(str(name), json_schema_to_arrow(property_schema, document, depth), nullable=True)
        for name, property_schema in properties.items()
    ]


def json_schema_spark_type(schema: object) -> DataType:
    """The Spark type of values of ``schema``: its Arrow type's (every field, element and map
    value nullable)."""
    from pyspark.sql.pandas.types import from_arrow_type

    result: DataType = from_arrow_type(json_schema_to_arrow(schema))
    return result
