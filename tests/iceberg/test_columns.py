"""Record batches to columns: key_value rows, Avro values by their schemas, dead letters."""

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
    decode_avro,
    decode_records,
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
    decoded = decode_avro(decode_records(_batch(values), 0, 0, 5), schema_for, None)
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
        decode_avro(decode_records(_batch([b"\x00\x00\x00\x00\x07"]), 0, 0, 1), schema_for, None)


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
