"""Record batches to columns: key_value rows, Avro and JSON values by their schemas, dead
letters."""

from __future__ import annotations

import io
import json
import struct

import fastavro
import pyarrow as pa
import pytest

from odradek.iceberg.columns import (
    SchemaMissing,
    SchemaUnsupported,
    ValueSchema,
    avro_to_arrow,
    decode_records,
    decode_values,
)
from odradek.protocol.records import Header, NewRecord, encode_batch

SCHEMA = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def _avro(schema_id: int, row: dict[str, object]) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), row)
    return out.getvalue()


def _batch(values: list[bytes | None], base_offset: int = 0) -> bytes:
    records = [
        NewRecord(key=b"k", value=v, timestamp=1_700_000_000_000 + i, headers=(Header("h", b"1"),))
        for i, v in enumerate(values)
    ]
    return bytes(encode_batch(records, base_offset=base_offset, now_ms=0))


def test_key_value_columns() -> None:
    batch = decode_records(_batch([b"a", None, b"c"], base_offset=40), 2, 41, 43)
    rows = batch.to_pylist()
    assert [(r["kafka"]["partition"], r["kafka"]["offset"], r["value"]) for r in rows] == [
        (2, 41, None),
        (2, 42, b"c"),
    ]
    assert rows[0]["kafka"]["headers"] == [{"key": "h", "value": b"1"}]
    assert rows[0]["kafka"]["timestamp"].timestamp() == 1_700_000_000.001


def test_avro_values_are_typed_and_bad_ones_dead_letters() -> None:
    schema = ValueSchema.of(7, json.dumps(SCHEMA))
    good = {"id": 1, "tags": ["x"], "at": 1_700_000_000_000, "note": None}

    def schema_for(schema_id: int) -> ValueSchema:
        if schema_id != 7:
            raise SchemaMissing(f"schema {schema_id}")
        return schema

    values = [_avro(7, good), b"\x01junk", _avro(8, good), _avro(7, good)[:-3], None]
    decoded = decode_values(decode_records(_batch(values), 0, 0, 5), schema_for, None)
    [table] = decoded.tables
    assert table.column_names == ["kafka", "id", "tags", "at", "note"]
    assert table.column("id").to_pylist() == [1]
    assert table.schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert decoded.dead is not None
    offsets = [r["offset"] for r in decoded.dead.column("kafka").to_pylist()]
    assert offsets == [1, 2, 3, 4]
    assert "SchemaMissing" in decoded.dead.column("error")[1].as_py()


def test_an_unreachable_registry_stops_rather_than_dead_letters() -> None:
    def schema_for(schema_id: int) -> ValueSchema:
        raise ConnectionError("registry down")

    with pytest.raises(ConnectionError):
        decode_values(decode_records(_batch([b"\x00\x00\x00\x00\x07"]), 0, 0, 1), schema_for, None)


def test_schemas_without_columns_are_refused() -> None:
    with pytest.raises(SchemaUnsupported):
        avro_to_arrow(["int", "string"])
    with pytest.raises(SchemaUnsupported):
        ValueSchema.of(
            1,
            json.dumps(
                {"type": "record", "name": "R", "fields": [{"name": "kafka", "type": "int"}]}
            ),
        )
    with pytest.raises(SchemaUnsupported):
        ValueSchema.of(1, '"string"')


JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "score": {"type": "number"},
        "address": {"$ref": "#/definitions/Address"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "level": {"enum": ["low", "high"]},
        "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "definitions": {
        "Address": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_json_schema_columns() -> None:
    schema = ValueSchema.of(9, json.dumps(JSON_SCHEMA), "JSON")
    assert [(f.name, str(f.type)) for f in schema.columns] == [
        ("id", "int64"),
        ("name", "string"),
        ("score", "double"),
        ("address", "struct<city: string>"),
        ("tags", "list<item: string>"),
        ("level", "string"),
        ("nickname", "string"),
    ]
    for unsupported in (
        {"type": "array", "items": {"type": "string"}},  # not an object: no columns
        {"type": "object", "properties": {"x": {"type": ["string", "integer"]}}},
        {
            "type": "object",
            "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "integer"}]}},
        },
        {"type": "object", "properties": {"x": {"$ref": "other.json#/X"}}},
        {"type": "object", "properties": {"x": {"$ref": "#"}}},  # itself, forever
        {"type": "object", "properties": {"kafka": {"type": "string"}}},
    ):
        with pytest.raises(SchemaUnsupported):
            ValueSchema.of(1, json.dumps(unsupported), "JSON")
    with pytest.raises(SchemaUnsupported, match="PROTOBUF"):
        ValueSchema.of(1, "syntax = 'proto3';", "PROTOBUF")


def test_json_values_by_their_schema_and_those_that_do_not_fit_as_dead_letters() -> None:
    schema = ValueSchema.of(9, json.dumps(JSON_SCHEMA), "JSON")

    def framed(value: object) -> bytes:
        text = value if isinstance(value, bytes) else json.dumps(value).encode()
        return struct.pack(">bI", 0, 9) + text

    good = {"id": 1, "name": "a", "score": 2, "address": {"city": "Prague"}, "extra": True}
    values = [
        framed(good),
        framed({"id": "not a number"}),
        framed(b"{not json"),
        framed([1, 2]),
        framed({"id": 2, "tags": ["x"]}),
    ]
    batch = decode_records(_batch(values), 0, 0, len(values))
    decoded = decode_values(batch, lambda schema_id: schema, None)
    (table,) = decoded.tables
    rows = table.to_pylist()
    assert [r["kafka"]["offset"] for r in rows] == [0, 4]
    assert {k: v for k, v in rows[0].items() if k != "kafka"} == {
        "id": 1,
        "name": "a",
        "score": 2.0,
        "address": {"city": "Prague"},
        "tags": None,
        "level": None,
        "nickname": None,
    }
    assert rows[1]["tags"] == ["x"] and rows[1]["address"] is None
    assert decoded.dead is not None
    dead = decoded.dead.to_pylist()
    assert [r["kafka"]["offset"] for r in dead] == [1, 2, 3]
    assert "JSONDecodeError" in dead[1]["error"] and "not an object" in dead[2]["error"]


def test_json_values_by_the_latest_schema_need_no_prefix() -> None:
    latest = ValueSchema.of(3, json.dumps(JSON_SCHEMA), "JSON")
    batch = decode_records(_batch([b'{"id": 5, "name": "e"}', b"5"]), 0, 0, 2)
    decoded = decode_values(batch, lambda schema_id: latest, latest)
    assert [(r["id"], r["name"]) for r in decoded.tables[0].to_pylist()] == [(5, "e")]
    assert decoded.dead is not None and decoded.dead.num_rows == 1
