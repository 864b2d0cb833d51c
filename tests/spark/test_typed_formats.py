"""The json and protobuf formats' decoders and the typed options, without Spark or a broker:
values framed as Confluent's serializers frame them, decoded into Arrow."""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import message_factory
from pyspark.sql.pandas.types import to_arrow_type

from odradek.registry.protobuf_messages import schema_file
from odradek.spark.protobuf import ProtobufDecoder, message_spark_type
from odradek.spark.schema_registry import RegisteredSchema
from odradek.spark.typed import (
    FormatError,
    FormatRequest,
    JsonDecoder,
    SinkFormat,
    default_registry_url,
    encode,
    format_requests,
    json_schema,
    spark_type_of,
)

JSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "n": {"type": ["integer", "null"]},
        "where": {"$ref": "#/definitions/Point"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "attrs": {"type": "object", "additionalProperties": {"type": "number"}},
    },
    "definitions": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
}

PROTO = """
syntax = "proto3";
package shop;

message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  string customer = 2;
  repeated Line lines = 3;
  Status status = 4;
  map<string, double> prices = 5;
  bool gift = 6;
}
"""


def frame(schema_id: int, body: bytes) -> bytes:
    return b"\0" + struct.pack(">I", schema_id) + body


def test_the_default_registry_is_port_8081_of_the_first_bootstrap_host() -> None:
    assert default_registry_url("broker-1:9092,broker-2:9092") == "http://broker-1:8081"


def test_format_options_are_parsed_and_checked() -> None:
    assert format_requests({"valueFormat": "AVRO", "valueSchemaVersion": "3"}) == (
        FormatRequest("value", "avro", None, 3),
    )
    assert format_requests({"keyFormat": "bytes"}) == ()
    with pytest.raises(FormatError, match="valueFormat"):
        format_requests({"valueFormat": "xml"})
    with pytest.raises(FormatError, match="exactly one topic"):
        FormatRequest("value", "avro", None, None).subject_for(("a", "b"))


def test_json_values_decode_by_field_name_with_nulls_in_place() -> None:
    data_type = spark_type_of("json", RegisteredSchema(1, "JSON", json.dumps(JSON_SCHEMA)))
    decoder = JsonDecoder(to_arrow_type(data_type, timezone="UTC"))
    sent: list[Any] = [
        {"name": "a\nb", "n": 1, "where": {"x": 1.5}, "tags": ["t"], "attrs": {"k": 2.0}},
        None,
        {"name": "c", "extra": True},
    ]
    values = [None if v is None else frame(1, json.dumps(v, indent=2).encode()) for v in sent]
    assert decoder.decode(pa.array(values, pa.binary())).to_pylist(maps_as_pydicts="strict") == [
        sent[0],
        None,
        {"name": "c", "n": None, "where": None, "tags": None, "attrs": None},
    ]


def test_proto_source_gives_the_message_type_and_decodes() -> None:
    assert message_spark_type(PROTO).simpleString() == (
        "struct<id:bigint,customer:string,lines:array<struct<sku:string,qty:int>>,"
        "status:string,prices:map<string,double>,gift:boolean>"
    )
    assert message_spark_type(PROTO, "shop.Order.Line").simpleString() == (
        "struct<sku:string,qty:int>"
    )
    order = message_factory.GetMessageClass(schema_file(PROTO).message_types_by_name["Order"])
    message = order(id=7, customer="c", status=1, gift=True)
    message.lines.add(sku="x", qty=2)
    message.prices["x"] = 1.25
    arrow_type = to_arrow_type(message_spark_type(PROTO), timezone="UTC")
    decoder = ProtobufDecoder(arrow_type, lambda _: PROTO)
    value = frame(4, b"\0" + message.SerializeToString())  # message indexes [0]: one 0 byte
    assert decoder.decode(pa.array([value, None])).to_pylist(maps_as_pydicts="strict") == [
        {
            "id": 7,
            "customer": "c",
            "lines": [{"sku": "x", "qty": 2}],
            "status": "PAID",
            "prices": {"x": 1.25},
            "gift": True,
        },
        None,
    ]


def test_json_objects_without_maps_are_read_by_arrow_line_breaks_and_all() -> None:
    schema = {k: v for k, v in JSON_SCHEMA.items()}
    schema["properties"] = {k: v for k, v in JSON_SCHEMA["properties"].items() if k != "attrs"}
    data_type = spark_type_of("json", RegisteredSchema(1, "JSON", json.dumps(schema)))
    decoder = JsonDecoder(to_arrow_type(data_type, timezone="UTC"))
    assert not decoder.by_row
    sent: list[Any] = [
        {"name": f"n{i}\r\n", "n": i, "where": {"x": i / 2}, "tags": []} for i in range(5)
    ]
    values = [frame(1, json.dumps(v, indent=2).encode()) for v in sent]
    values[2] = None  # type: ignore[call-overload]
    expected: list[Any] = list(sent)
    expected[2] = None
    assert decoder.decode(pa.array(values, pa.binary())).to_pylist() == expected
    with pytest.raises(ValueError, match="do not decode"):
        decoder.decode(pa.array([frame(1, b"{not json")]))


def test_the_json_schema_of_a_spark_type_describes_what_the_json_encoder_writes() -> None:
    import jsonschema
    from pyspark.sql import types as t

    data_type = t.StructType(
        [
            t.StructField("id", t.LongType(), False),
            t.StructField("name", t.StringType()),
            t.StructField("raw", t.BinaryType()),
            t.StructField("at", t.TimestampType()),
            t.StructField("tags", t.ArrayType(t.StringType())),
            t.StructField("attrs", t.MapType(t.StringType(), t.DoubleType())),
            t.StructField("place", t.StructType([t.StructField("city", t.StringType())])),
        ]
    )
    schema = json_schema(data_type)
    assert schema["required"] == ["id"]
    assert schema["properties"]["id"] == {"type": "integer"}
    assert schema["properties"]["raw"] == {"type": ["string", "null"], "contentEncoding": "base64"}
    assert schema["properties"]["attrs"]["additionalProperties"] == {"type": ["number", "null"]}
    column = SinkFormat("value", 12, json.dumps(schema), "json")
    rows = [
        {
            "id": 1,
            "name": "n",
            "raw": b"\x00\xff",
            "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
            "tags": ["a"],
            "attrs": {"x": 1.5},
            "place": {"city": "c"},
        },
        None,
    ]
    arrow = pa.array(rows, to_arrow_type(data_type, timezone="UTC"))
    values = encode(column, arrow).to_pylist()
    assert values[1] is None
    assert values[0][:5] == frame(12, b"")
    written = json.loads(values[0][5:])
    jsonschema.validate(written, schema)
    assert written == {
        **rows[0],  # type: ignore[dict-item]
        "raw": "AP8=",
        "at": "2026-01-02T03:04:05+00:00",
    }


def test_the_protobuf_encoder_writes_the_named_message_with_its_indexes() -> None:
    file = schema_file(PROTO)
    column = SinkFormat("value", 4, PROTO, "protobuf", "shop.Order.Line")
    lines = encode(column, pa.array([{"sku": "x", "qty": 2}])).to_pylist()
    # Order is message 0, Line its nested message 1: indexes [0, 1], written as 2, 0, 2.
    assert lines[0][:8] == frame(4, bytes([4, 0, 2]))
    order_type = to_arrow_type(message_spark_type(PROTO), timezone="UTC")
    sent = {
        "id": 7,
        "customer": "c",
        "lines": [{"sku": "x", "qty": 2}],
        "status": "PAID",
        "prices": {"x": 1.25},
        "gift": True,
    }
    orders = SinkFormat("value", 4, PROTO, "protobuf")
    encoded = encode(orders, pa.array([sent, None], order_type))
    assert encoded.to_pylist()[0][:6] == frame(4, b"\0")
    decoder = ProtobufDecoder(order_type, lambda _: PROTO)
    assert decoder.decode(encoded).to_pylist(maps_as_pydicts="strict") == [sent, None]
    order = message_factory.GetMessageClass(file.message_types_by_name["Order"])
    assert order.FromString(encoded.to_pylist()[0][6:]).status == 1
    with pytest.raises(ValueError, match="has no field"):
        encode(orders, pa.array([{"id": 1, "other": 2}]))
