"""Avro values in Confluent's framing to and from Arrow (no Spark session, no broker): types,
batch decoding with schema resolution, and encoding."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.avro import (
    AvroDecoder,
    AvroEncoder,
    AvroTypeError,
    FramingError,
    avro_schema,
    spark_type,
)

ADDRESS = {
    "type": "record",
    "name": "Address",
    "fields": [{"name": "street", "type": "string"}, {"name": "zip", "type": "int"}],
}
USER = {
    "type": "record",
    "name": "User",
    "namespace": "example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "scores", "type": {"type": "map", "values": "double"}},
        {"name": "home", "type": ADDRESS},
        {"name": "work", "type": ["null", "Address"], "default": None},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
        {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "balance",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
        {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    ],
}


def user(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"user {i}",
        "email": None if i % 2 else f"u{i}@example.com",
        "tags": [f"t{j}" for j in range(i % 3)],
        "scores": {"a": i / 2},
        "home": {"street": f"{i} Main St", "zip": 10000 + i},
        "work": None if i % 3 else {"street": "Office", "zip": 1},
        "kind": "A" if i % 2 else "B",
        "born": datetime.date(2000, 1, 1) + datetime.timedelta(days=i),
        "seen": datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC)
        + datetime.timedelta(milliseconds=i),
        "balance": decimal.Decimal(i) / 100,
        "uid": f"00000000-0000-0000-0000-{i:012d}",
    }


def framed(schema_id: int, schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    out.write(b"\0" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def decoder_for(reader_id: int, schemas: dict[int, Any]) -> AvroDecoder:
    data_type, _ = spark_type(schemas[reader_id])
    return AvroDecoder(
        reader_id,
        json.dumps(schemas[reader_id]),
        to_arrow_type(data_type, timezone="UTC"),
        lambda i: json.dumps(schemas[i]),
    )


def test_avro_types_map_to_spark_types() -> None:
    data_type, nullable = spark_type(USER)
    assert not nullable
    assert isinstance(data_type, StructType)
    fields = {f.name: f for f in data_type.fields}
    assert fields["id"] == StructField("id", LongType(), False)
    assert fields["email"] == StructField("email", StringType(), True)
    assert fields["tags"].dataType == ArrayType(StringType(), False)
    assert fields["scores"].dataType == MapType(StringType(), DoubleType(), False)
    assert fields["work"].nullable and fields["work"].dataType == fields["home"].dataType
    assert fields["kind"].dataType == StringType()
    assert fields["born"].dataType == DateType()
    assert fields["seen"].dataType == TimestampType()
    assert fields["balance"].dataType == DecimalType(10, 2)
    assert fields["uid"].dataType == StringType()


def test_a_union_of_two_types_is_refused() -> None:
    with pytest.raises(AvroTypeError, match="non-null types"):
        spark_type(
            {"type": "record", "name": "R", "fields": [{"name": "x", "type": ["int", "string"]}]}
        )


def test_a_batch_decodes_to_the_records_with_nulls_in_place() -> None:
    decoder = decoder_for(1, {1: USER})
    sent = [user(i) for i in range(50)]
    values = [framed(1, USER, r) for r in sent]
    values[7] = None  # type: ignore[call-overload]
    column = pa.array(values, pa.binary())
    decoded = decoder.decode(column).to_pylist(maps_as_pydicts="strict")
    expected: list[Any] = list(sent)
    expected[7] = None
    assert decoded == expected


COLUMNAR = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "small", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "amount", "type": "double"},
        {"name": "name", "type": "string"},
        {"name": "blob", "type": "bytes"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 3}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "points", "type": {"type": "array", "items": ADDRESS}},
        {"name": "home", "type": ["null", "Address"], "default": None},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
        {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "seen_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}


def event(i: int) -> dict[str, Any]:
    return {
        "id": (i * 7919) ** 2 * (-1) ** i,
        "small": -(i**2),
        "ok": i % 3 == 0,
        "ratio": i / 4,
        "amount": i * 1.1,
        "name": "é" * (i % 20) + f"name {i}",
        "blob": bytes(range(i % 30)),
        "note": None if i % 2 else f"note {i}",
        "code": bytes([i % 256, 1, 2]),
        "kind": "ABC"[i % 3],
        "tags": [f"tag {j}" for j in range(i % 5)],
        "points": [{"street": f"p{j}", "zip": j} for j in range(i % 3)],
        "home": None if i % 4 else {"street": f"{i} Road", "zip": i},
        "born": datetime.date(1990, 1, 1) + datetime.timedelta(days=i),
        "seen": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
        + datetime.timedelta(milliseconds=i * 1001),
        "seen_us": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
        + datetime.timedelta(microseconds=i * 7),
    }


def test_column_wise_decoding_agrees_with_fastavro() -> None:
    decoder = decoder_for(5, {5: COLUMNAR})
    assert decoder._columns is not None  # this schema takes the column-wise path
    sent = [event(i) for i in range(300)]
    values: list[bytes | None] = [framed(5, COLUMNAR, r) for r in sent]
    values[3] = None
    decoded = decoder.decode(pa.array(values, pa.binary())).to_pylist()
    expected: list[Any] = list(sent)
    expected[3] = None
    assert decoded == expected


def test_column_wise_decoding_refuses_truncated_values() -> None:
    decoder = decoder_for(5, {5: COLUMNAR})
    value = framed(5, COLUMNAR, event(7))
    with pytest.raises(ValueError, match="do not decode"):
        decoder.decode(pa.array([value[:-3]]))
    with pytest.raises(ValueError, match="do not decode"):
        decoder.decode(pa.array([value + b"\0"]))


def test_older_writers_are_resolved_to_the_reader_schema() -> None:
    v1 = {"type": "record", "name": "U", "fields": [{"name": "id", "type": "int"}]}
    v2 = {
        "type": "record",
        "name": "U",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string", "default": "anon"},
        ],
    }
    decoder = decoder_for(2, {1: v1, 2: v2})
    column = pa.array(
        [framed(1, v1, {"id": 1}), framed(2, v2, {"id": 2, "name": "b"}), framed(1, v1, {"id": 3})]
    )
    assert decoder.decode(column).to_pylist() == [
        {"id": 1, "name": "anon"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": "anon"},
    ]


def test_values_without_the_framing_are_refused() -> None:
    decoder = decoder_for(1, {1: USER})
    with pytest.raises(FramingError, match="magic byte"):
        decoder.decode(pa.array([b"\x01\0\0\0\x01abc"]))
    with pytest.raises(FramingError, match="too short"):
        decoder.decode(pa.array([b"\0\0"]))


def test_encoding_round_trips_through_fastavro() -> None:
    data_type, _ = spark_type(USER)
    sent = [user(i) for i in range(20)]
    column = pa.array(sent, to_arrow_type(data_type, timezone="UTC"))
    encoded = AvroEncoder(9, json.dumps(USER)).encode(column).to_pylist()
    schema = fastavro.parse_schema(USER)
    for value, record in zip(encoded, sent, strict=True):
        assert value[:5] == b"\0\0\0\0\x09"
        decoded: Any = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema)
        assert {**decoded, "uid": str(decoded["uid"])} == record


def test_a_spark_struct_becomes_a_record_whose_nullable_fields_default_to_null() -> None:
    struct_type = StructType(
        [
            StructField("id", LongType(), False),
            StructField("name", StringType(), True),
            StructField("home", StructType([StructField("zip", LongType(), False)]), True),
        ]
    )
    schema = avro_schema(struct_type)
    assert schema["fields"][0] == {"name": "id", "type": "long"}
    assert schema["fields"][1] == {"name": "name", "type": ["null", "string"], "default": None}
    assert spark_type(schema)[0] == struct_type
    fastavro.parse_schema(schema)
