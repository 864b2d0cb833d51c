"""Record batches to columns: key_value rows, Avro, JSON and Protobuf values by their schemas,
dead letters."""

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
from odradek.registry.protobuf_messages import message_class, message_named, schema_file

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
    with pytest.raises(SchemaUnsupported, match="XML"):
        ValueSchema.of(1, "<schema/>", "XML")


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


def test_a_json_object_of_additional_properties_alone_is_a_map_column() -> None:
    counts = {"type": "object", "additionalProperties": {"type": "integer"}}
    document = {"type": "object", "properties": {"id": {"type": "integer"}, "counts": counts}}
    latest = ValueSchema.of(4, json.dumps(document), "JSON")
    assert [str(f.type) for f in latest.columns] == ["int64", "map<string, int64>"]
    batch = decode_records(_batch([b'{"id": 1, "counts": {"a": 2, "b": 3}}']), 0, 0, 1)
    (table,) = decode_values(batch, lambda schema_id: latest, latest).tables
    assert table.to_pylist()[0]["counts"] == [("a", 2), ("b", 3)]


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Money { sint64 cents = 1; }

message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; uint32 qty = 2; }
  int32 a = 1;
  sint32 b = 2;
  sfixed32 c = 3;
  int64 d = 4;
  uint64 e = 5;
  fixed64 f = 6;
  float g = 7;
  double h = 8;
  bool i = 9;
  string j = 10;
  bytes k = 11;
  Status status = 12;
  repeated Line lines = 13;
  map<string, Money> prices = 14;
  google.protobuf.Timestamp at = 15;
  optional string note = 16;
  Money total = 17;
}
"""


def test_protobuf_columns_of_each_field_type() -> None:
    schema = ValueSchema.of(4, PROTO, "PROTOBUF")
    assert schema.message_indexes == (0,)
    assert schema.columns == pa.schema([pa.field("cents", pa.int64())])
    order = schema.parsed.message((1,)).columns
    assert [(f.name, str(f.type)) for f in order] == [
        ("a", "int32"),
        ("b", "int32"),
        ("c", "int32"),
        ("d", "int64"),
        ("e", "decimal128(20, 0)"),
        ("f", "decimal128(20, 0)"),
        ("g", "float"),
        ("h", "double"),
        ("i", "bool"),
        ("j", "string"),
        ("k", "binary"),
        ("status", "string"),
        ("lines", "list<item: struct<sku: string, qty: int64>>"),
        ("prices", "map<string, struct<cents: int64>>"),
        ("at", "timestamp[us, tz=UTC]"),
        ("note", "string"),
        ("total", "struct<cents: int64>"),
    ]
    for unsupported in (
        'syntax = "proto3"; message A { A again = 1; }',  # itself, forever
        'syntax = "proto3"; message A { string kafka = 1; }',
        'syntax = "proto3"; import "other.proto"; message A { Other o = 1; }',
        'syntax = "proto3";',
        "message {",
    ):
        with pytest.raises(SchemaUnsupported):
            ValueSchema.of(1, unsupported, "PROTOBUF").parsed.message((0,))


def _order() -> object:
    order = message_class(message_named(schema_file(PROTO), "shop.Order"))(
        a=-1, b=-2, c=3, d=-(2**40), e=2**64 - 1, f=7, g=1.5, h=2.25, i=True, j="j", k=b"\0k"
    )
    order.status = 1
    order.lines.add(sku="x", qty=2**32 - 1)
    order.prices["tea"].cents = -250
    order.at.FromSeconds(1_700_000_000)
    return order


def test_protobuf_values_by_the_message_their_indexes_name() -> None:
    from datetime import UTC, datetime
    from decimal import Decimal

    schema = ValueSchema.of(4, PROTO, "PROTOBUF")
    order = _order()
    prefix = struct.pack(">bI", 0, 4)
    values = [
        prefix + b"\x02\x02" + order.SerializeToString(),  # type: ignore[attr-defined]
        prefix + b"\x00" + bytes([8, 5]),  # Money, cents -3 zigzagged
        prefix + b"\x02\x02" + b"\xff\xff",  # not a message
        prefix + b"\x02\x10",  # message index 8: no such message
        prefix,  # no indexes
    ]
    batch = decode_records(_batch(values), 0, 0, len(values))
    decoded = decode_values(batch, lambda schema_id: schema, None)
    orders, money = decoded.tables
    (row,) = orders.to_pylist()
    assert {k: v for k, v in row.items() if k != "kafka"} == {
        "a": -1,
        "b": -2,
        "c": 3,
        "d": -(2**40),
        "e": Decimal(2**64 - 1),
        "f": Decimal(7),
        "g": 1.5,
        "h": 2.25,
        "i": True,
        "j": "j",
        "k": b"\0k",
        "status": "PAID",
        "lines": [{"sku": "x", "qty": 2**32 - 1}],
        "prices": [("tea", {"cents": -250})],
        "at": datetime.fromtimestamp(1_700_000_000, UTC),
        "note": None,
        "total": None,
    }
    assert money.column("cents").to_pylist() == [-3]
    assert decoded.dead is not None
    assert decoded.dead.column("kafka").combine_chunks().field("offset").to_pylist() == [2, 3, 4]


def test_protobuf_values_by_the_latest_schema_are_its_first_message_alone() -> None:
    latest = ValueSchema.of(4, PROTO, "PROTOBUF")
    batch = decode_records(_batch([bytes([8, 5]), b"\xff"]), 0, 0, 2)
    decoded = decode_values(batch, lambda schema_id: latest, latest)
    assert decoded.tables[0].column("cents").to_pylist() == [-3]
    assert decoded.dead is not None and decoded.dead.num_rows == 1


def test_protobuf_schemas_with_references_take_their_types_from_them() -> None:
    money = 'syntax = "proto3";\npackage shop;\nmessage Money { sint64 cents = 1; }'
    price = (
        'syntax = "proto3";\npackage shop;\nimport "shop/money.proto";\n'
        "message Price { string item = 1; Money amount = 2; }"
    )
    schema = ValueSchema.of(5, price, "PROTOBUF", [("shop/money.proto", money)])
    assert [(f.name, str(f.type)) for f in schema.columns] == [
        ("item", "string"),
        ("amount", "struct<cents: int64>"),
    ]
    value = struct.pack(">bI", 0, 5) + b"\0" + bytes([10, 1, 120, 18, 2, 8, 5])
    batch = decode_records(_batch([value]), 0, 0, 1)
    decoded = decode_values(batch, lambda schema_id: schema, None)
    assert decoded.tables[0].drop_columns(["kafka"]).to_pylist() == [
        {"item": "x", "amount": {"cents": -3}}
    ]
    with pytest.raises(SchemaUnsupported, match=r"money\.proto"):
        ValueSchema.of(5, price, "PROTOBUF")
