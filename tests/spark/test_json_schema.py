"""One mapping of JSON Schemas to column types: Arrow's, and Spark's derived from it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from odradek.spark.json_schema import NoColumnType, json_schema_spark_type, json_schema_to_arrow

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "score": {"type": "number"},
        "ok": {"type": "boolean"},
        "home": {"$ref": "#/$defs/Place"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "level": {"enum": ["low", "high"]},
        "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def test_the_arrow_type_and_the_spark_type_derived_from_it() -> None:
    arrow = json_schema_to_arrow(SCHEMA)
    assert [(f.name, str(f.type)) for f in arrow] == [
        ("id", "int64"),
        ("name", "string"),
        ("score", "double"),
        ("ok", "bool"),
        ("home", "struct<city: string>"),
        ("tags", "list<item: string>"),
        ("counts", "map<string, int64>"),
        ("level", "string"),
        ("nickname", "string"),
    ]
    assert all(f.nullable for f in arrow)
    spark = json_schema_spark_type(SCHEMA)
    assert spark.simpleString() == (
        "struct<id:bigint,name:string,score:double,ok:boolean,home:struct<city:string>,"
        "tags:array<string>,counts:map<string,bigint>,level:string,nickname:string>"
    )
    assert pa.types.is_map(json_schema_to_arrow(SCHEMA["properties"]["counts"], SCHEMA))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"type": ["string", "integer"]}}},
        {
            "type": "object",
            "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        },
        {"type": "object", "properties": {"x": {"$ref": "other.json#/X"}}},
        {"type": "object", "properties": {"x": {"$ref": "#"}}},
        {"type": "object"},
        ["not", "a", "schema"],
    ],
)
def test_schemas_without_a_column_type_are_refused(schema: object) -> None:
    with pytest.raises(NoColumnType):
        json_schema_to_arrow(schema)
