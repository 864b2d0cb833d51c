"""Avro values in Confluent's framing, to and from Arrow, for the Spark data source.

**Types.** An Avro schema maps to Spark's types as Spark's ``from_avro`` maps it: records to
structs (nested ones too), arrays, maps (string keys), ``enum`` and ``string`` to string,
``bytes`` and ``fixed`` to binary, ``int``/``long``/``float``/``double``/``boolean`` to their
Spark types, a union of ``null`` and one type to that type, nullable; logical types ``date``,
``timestamp-millis``/``-micros`` (timestamp), ``local-timestamp-*`` (timestamp without time
zone), ``decimal`` (decimal(p, s)), ``uuid`` (string). Unions of two or more non-null types are
refused with a message saying so.

**Decoding.** A column of framed values (magic byte 0, a 4-byte big-endian schema id, the Avro
body) is decoded a whole Arrow batch at a time: the schema ids are read with numpy; the bodies
of the rows that share a writer schema are cut out of the column's data buffer with one numpy
gather and laid end to end as the single block of an in-memory Avro object container file, which
``fastavro.reader`` decodes in its compiled loop, resolving the writer's schema to the reader's
(Avro schema resolution: added fields take their defaults, removed ones are skipped, ints widen
to longs, ...); the records become one Arrow array in C++ (``pa.array`` with the column's type).
What stays per row is fastavro's dict per record.

**Encoding.** Rows (an Arrow struct or scalar column) are written with fastavro into one buffer,
each behind the 5-byte framing, and handed to Arrow as a binary column without copying.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from odradek.protocol.records import zigzag_varint
from odradek.spark.schema_registry import FRAMING_BYTES, MAGIC_BYTE

AvroJson = Any  # a schema as JSON: a name, a list (union) or an object

_PRIMITIVES: dict[str, DataType] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}


class AvroTypeError(ValueError):
    """An Avro schema has a type the data source cannot give Spark, or a Spark type has no
    Avro form."""


# -- Avro to Spark -------------------------------------------------------------------------------


def _full_name(schema: Mapping[str, Any], namespace: str) -> tuple[str, str]:
    name = str(schema["name"])
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    space = str(schema.get("namespace", namespace) or "")
    return (f"{space}.{name}" if space else name), space


def spark_type(schema: AvroJson) -> tuple[DataType, bool]:
    """The Spark type of values of ``schema``, and whether they may be null."""
    return _spark_type(schema, {}, "")


def _spark_type(
    schema: AvroJson, named: dict[str, AvroJson], namespace: str
) -> tuple[DataType, bool]:
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise AvroTypeError(
                f"the Avro union {json.dumps(schema)} has {len(branches)} non-null types; only "
                "a union of null and one type has a Spark column type here"
            )
        data_type, _ = _spark_type(branches[0], named, namespace)
        return data_type, len(branches) < len(schema)
    if isinstance(schema, str):
        if schema == "null":
            raise AvroTypeError("an Avro null outside a union has no Spark column type")
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], False
        found = named.get(schema) or named.get(f"{namespace}.{schema}")
        if found is None:
            raise AvroTypeError(f"the Avro type {schema!r} is not defined before its use")
        return found, False
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if kind in ("int", "long", "bytes", "fixed", "string") and logical:
        if logical == "date" and kind == "int":
            return DateType(), False
        if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
            return TimestampType(), False
        if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
            return TimestampNTZType(), False
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return DecimalType(int(schema["precision"]), int(schema.get("scale", 0))), False
    if kind == "record":
        full, space = _full_name(schema, namespace)
        fields = []
        placeholder = StructType()
        named[full] = placeholder  # a recursive record ends where Spark's types must end
        for entry in schema["fields"]:
            data_type, nullable = _spark_type(entry["type"], named, space)
            fields.append(StructField(str(entry["name"]), data_type, nullable))
        result = StructType(fields)
        named[full] = result
        return result, False
    if kind == "enum":
        full, _ = _full_name(schema, namespace)
        named[full] = StringType()
        return StringType(), False
    if kind == "fixed":
        full, _ = _full_name(schema, namespace)
        named[full] = BinaryType()
        return BinaryType(), False
    if kind == "array":
        element, nullable = _spark_type(schema["items"], named, namespace)
        return ArrayType(element, nullable), False
    if kind == "map":
        value, nullable = _spark_type(schema["values"], named, namespace)
        return MapType(StringType(), value, nullable), False
    if isinstance(kind, str | list):
        return _spark_type(kind, named, namespace)
    raise AvroTypeError(f"the Avro schema {json.dumps(schema)} has no Spark column type")


def _plain_uuids(schema: AvroJson) -> AvroJson:
    """``schema`` without the uuid logical type: fastavro would give ``uuid.UUID`` objects, and
    the column is a string."""
    if isinstance(schema, list):
        return [_plain_uuids(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if not (k == "logicalType" and v == "uuid")}
    if "fields" in out:
        out["fields"] = [{**f, "type": _plain_uuids(f["type"])} for f in out["fields"]]
    for key in ("items", "values", "type"):
        if key in out and not isinstance(out[key], str):
            out[key] = _plain_uuids(out[key])
    return out


# -- Spark to Avro -------------------------------------------------------------------------------


def avro_schema(data_type: DataType, name: str = "topLevelRecord") -> AvroJson:
    """The Avro schema of values of a Spark type (a struct becomes a record named ``name``;
    nested records are named after their path, so names stay unique); nullable fields are
    unions with null first and default null, so that later versions may drop them."""
    return _avro_schema(data_type, name)


def _nullable(schema: AvroJson) -> AvroJson:
    return ["null", schema]


def _avro_schema(data_type: DataType, name: str) -> AvroJson:
    if isinstance(data_type, StructType):
        fields = []
        for f in data_type.fields:
            inner = _avro_schema(f.dataType, f"{name}_{f.name}")
            if f.nullable:
                fields.append({"name": f.name, "type": _nullable(inner), "default": None})
            else:
                fields.append({"name": f.name, "type": inner})
        return {"type": "record", "name": name, "fields": fields}
    if isinstance(data_type, ArrayType):
        items = _avro_schema(data_type.elementType, name)
        return {"type": "array", "items": _nullable(items) if data_type.containsNull else items}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise AvroTypeError(f"an Avro map has string keys, not {data_type.keyType}")
        values = _avro_schema(data_type.valueType, name)
        return {
            "type": "map",
            "values": _nullable(values) if data_type.valueContainsNull else values,
        }
    if isinstance(data_type, BooleanType):
        return "boolean"
    if isinstance(data_type, ByteType | ShortType | IntegerType):
        return "int"
    if isinstance(data_type, LongType):
        return "long"
    if isinstance(data_type, FloatType):
        return "float"
    if isinstance(data_type, DoubleType):
        return "double"
    if isinstance(data_type, StringType):
        return "string"
    if isinstance(data_type, BinaryType):
        return "bytes"
    if isinstance(data_type, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(data_type, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(data_type, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(data_type, DecimalType):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": data_type.precision,
            "scale": data_type.scale,
        }
    raise AvroTypeError(f"the Spark type {data_type.simpleString()} has no Avro form here")


# -- decoding ------------------------------------------------------------------------------------

_SYNC = b"odradek-avro-blk"  # an object container file's sync marker: any 16 bytes
_IDS = struct.Struct(">I")


def _avro_bytes(data: bytes) -> bytes:
    return zigzag_varint(len(data)) + data


def _container(writer_text: str, body: bytes, count: int) -> bytes:
    """An Avro object container file of one block: ``count`` records in ``body``."""
    header = (
        b"Obj\x01"
        + zigzag_varint(2)
        + _avro_bytes(b"avro.schema")
        + _avro_bytes(writer_text.encode())
        + _avro_bytes(b"avro.codec")
        + _avro_bytes(b"null")
        + zigzag_varint(0)
        + _SYNC
    )
    return header + zigzag_varint(count) + zigzag_varint(len(body)) + body + _SYNC


Framed = tuple[
    npt.NDArray[np.bool_], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], Any
]


class FramingError(ValueError):
    """A value does not start with Confluent's magic byte and a schema id."""


def framed_bodies(values: pa.Array) -> Framed:
    """For a binary column: which rows are non-null, their schema ids, and where their bodies
    start and end in ``data`` (returned last, the column's bytes as numpy)."""
    values = values.cast(pa.binary()) if values.type != pa.binary() else values
    n = len(values)
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[values.offset : values.offset + n + 1]
    data = (
        np.frombuffer(buffers[2], dtype=np.uint8)
        if buffers[2] is not None
        else np.empty(0, np.uint8)
    )
    valid = (
        np.ones(n, dtype=bool)
        if values.null_count == 0
        else values.is_valid().to_numpy(zero_copy_only=False)
    )
    starts = offsets[:-1].astype(np.int64)
    ends = offsets[1:].astype(np.int64)
    short = valid & (ends - starts < FRAMING_BYTES)
    if short.any():
        raise FramingError(
            f"a value of {int((ends - starts)[short][0])} bytes is too short for Confluent's "
            "framing (magic byte 0 and a 4-byte schema id)"
        )
    heads = np.where(valid, starts, 0)
    if valid.any() and np.any(np.take(data, heads[valid], mode="clip") != MAGIC_BYTE):
        raise FramingError(
            "a value does not start with Confluent's magic byte 0 (was it written with a "
            "schema registry serializer?)"
        )
    ids = np.zeros(n, dtype=np.int64)
    if valid.any():
        picked = heads[valid][:, None] + np.arange(1, 5)
        raw = np.take(data, picked, mode="clip").astype(np.int64)
        ids[valid] = (raw[:, 0] << 24) | (raw[:, 1] << 16) | (raw[:, 2] << 8) | raw[:, 3]
    return valid, ids, starts + FRAMING_BYTES, ends, data


def gather(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> bytes:
    """The byte ranges ``starts``..``ends`` of ``data`` laid end to end, in one numpy gather."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return b""
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return bytes(data[shift + np.arange(total, dtype=np.int64)])


def grouped_decode(
    values: pa.Array,
    arrow_type: pa.DataType,
    decode_group: Callable[
        [int, npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]], pa.Array
    ],
) -> pa.Array:
    """Decode a column of framed values: ``decode_group(schema_id, data, starts, ends)`` gives
    the Arrow array of the rows written with one schema; the groups are put back in row order,
    nulls where the value was null."""
    valid, ids, starts, ends, data = framed_bodies(values)
    n = len(values)
    present = np.flatnonzero(valid)
    if len(present) == 0:
        return pa.nulls(n, arrow_type)
    unique = np.unique(ids[present])
    if len(unique) == 1 and len(present) == n:
        return decode_group(int(unique[0]), data, starts, ends)
    pieces = []
    order = []
    for schema_id in unique.tolist():
        rows = present[ids[present] == schema_id]
        pieces.append(decode_group(schema_id, data, starts[rows], ends[rows]))
        order.append(rows)
    missing = np.flatnonzero(~valid)
    pieces.append(pa.nulls(len(missing), arrow_type))
    order.append(missing)
    joined = pa.concat_arrays(pieces)
    inverse = np.empty(n, dtype=np.int64)
    inverse[np.concatenate(order)] = np.arange(n, dtype=np.int64)
    return joined.take(pa.array(inverse))


class AvroDecoder:
    """Framed Avro values to Arrow, resolved to one reader schema (see the module doc).
    ``writer_text(id)`` gives the schema a value's id names (from the registry, cached)."""

    def __init__(
        self,
        reader_id: int,
        reader_text: str,
        arrow_type: pa.DataType,
        writer_text: Callable[[int], str],
    ) -> None:
        import fastavro

        self._fastavro = fastavro
        self.reader_id = reader_id
        self.reader_json = _plain_uuids(json.loads(reader_text))
        self.reader = fastavro.parse_schema(self.reader_json)
        self.arrow_type = arrow_type
        self._writer_text = writer_text
        self._writers: dict[int, str] = {}
        self._lock = threading.Lock()
        self._columns: ColumnDecoder | None = None
        with contextlib.suppress(_Unsupported):  # else fastavro decodes every group
            self._columns = ColumnDecoder(self.reader_json, arrow_type)

    def _writer(self, schema_id: int) -> str:
        with self._lock:
            found = self._writers.get(schema_id)
        if found is None:
            found = json.dumps(_plain_uuids(json.loads(self._writer_text(schema_id))))
            with self._lock:
                self._writers[schema_id] = found
        return found

    def decode(self, values: pa.Array) -> pa.Array:
        return grouped_decode(values, self.arrow_type, self._decode_group)

    def _decode_group(
        self,
        schema_id: int,
        data: npt.NDArray[np.uint8],
        starts: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],
    ) -> pa.Array:
        writer = self._writer(schema_id)
        if self._columns is not None and (
            schema_id == self.reader_id or json.loads(writer) == self.reader_json
        ):
            from odradek.protocol.records import RecordDecodeError

            try:
                return self._columns.decode(data, starts, ends)
            except (_Corrupt, RecordDecodeError) as e:
                raise ValueError(
                    f"Avro values written with schema id {schema_id} do not decode: {e}"
                ) from e
        body = gather(data, starts, ends)
        container = _container(writer, body, len(starts))
        reader_schema = None if schema_id == self.reader_id else self.reader
        try:
            records = list(self._fastavro.reader(io.BytesIO(container), reader_schema))
        except Exception as e:  # fastavro raises several kinds for bad bytes
            raise ValueError(
                f"Avro values written with schema id {schema_id} do not decode: {e}"
            ) from e
        if len(records) != len(starts):
            raise ValueError(
                f"Avro values written with schema id {schema_id} do not decode to one record each"
            )
        return pa.array(records, type=self.arrow_type)


# -- encoding ------------------------------------------------------------------------------------


class AvroEncoder:
    """Rows of an Arrow column to framed Avro values of one registered schema."""

    def __init__(self, schema_id: int, text: str) -> None:
        import fastavro

        self._write = fastavro.schemaless_writer
        self.schema = fastavro.parse_schema(_plain_uuids(json.loads(text)))
        self.prefix = bytes([MAGIC_BYTE]) + _IDS.pack(schema_id)

    def encode(self, column: pa.Array) -> pa.Array:
        rows = column.to_pylist(maps_as_pydicts="strict")
        out = io.BytesIO()
        offsets = np.zeros(len(rows) + 1, dtype=np.int32)
        valid = np.ones(len(rows), dtype=bool)
        write = self._write
        schema = self.schema
        for i, row in enumerate(rows):
            if row is None:
                valid[i] = False
            else:
                out.write(self.prefix)
                try:
                    write(out, schema, row)
                except Exception as e:  # fastavro's errors for a value its schema refuses
                    raise ValueError(f"a row does not fit the Avro schema: {e}") from e
            offsets[i + 1] = out.tell()
        validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.Array.from_buffers(
            pa.binary(),
            len(rows),
            [validity, pa.py_buffer(offsets), pa.py_buffer(out.getbuffer())],
        )


# -- column-wise decoding ------------------------------------------------------------------------
#
# The rows of a group share one schema, so each field sits at a position that the fields before
# it determine: field by field, every row's value is decoded at once with numpy (varints as in
# odradek.spark.arrow), strings and bytes become Arrow arrays over the column's own buffer, and no
# Python object is made per row. Schemas with types this path does not take (maps, decimals,
# unions of several types, recursive records) go through fastavro instead, and so do rows whose
# writer schema is not the reader's (schema resolution is fastavro's).


class _Unsupported(Exception):
    """A schema the column-wise decoder does not take: fastavro decodes it."""


class _Corrupt(ValueError):
    pass


Positions = npt.NDArray[np.int64]


def _check(positions: Positions, limits: Positions) -> None:
    if np.any(positions > limits):
        raise _Corrupt("an Avro value overruns its record")


class ColumnDecoder:
    """Column-wise decoding of values written with the reader's own schema (see above)."""

    def __init__(self, schema: AvroJson, arrow_type: pa.DataType) -> None:
        self.named: dict[str, AvroJson] = {}
        self.schema = schema
        self.arrow_type = arrow_type
        self._plan(schema, "", 0)  # raises _Unsupported for what this path does not take

    def _plan(self, schema: AvroJson, namespace: str, depth: int) -> None:
        if depth > 32:
            raise _Unsupported("nested too deep")
        if isinstance(schema, list):
            branches = [b for b in schema if b != "null"]
            if len(branches) != 1 or len(schema) != 2:
                raise _Unsupported("a union")
            self._plan(branches[0], namespace, depth + 1)
            return
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return
            found = self.named.get(schema) or self.named.get(f"{namespace}.{schema}")
            if found is None or found == "recursive":
                raise _Unsupported(f"named type {schema}")
            return
        kind = schema.get("type")
        logical = schema.get("logicalType")
        if logical == "decimal":
            raise _Unsupported("decimal")
        if kind == "record":
            if not schema["fields"]:
                raise _Unsupported("a record without fields")
            full, space = _full_name(schema, namespace)
            self.named[full] = "recursive"
            for entry in schema["fields"]:
                self._plan(entry["type"], space, depth + 1)
            self.named[full] = schema
        elif kind in ("enum", "fixed"):
            full, _ = _full_name(schema, namespace)
            self.named[full] = schema
        elif kind == "array":
            self._plan(schema["items"], namespace, depth + 1)
        elif isinstance(kind, str) and kind in _PRIMITIVES:
            return
        else:
            raise _Unsupported(str(kind))

    def decode(self, data: npt.NDArray[np.uint8], starts: Positions, ends: Positions) -> pa.Array:
        buffer = pa.py_buffer(data)
        array, positions = self._read(self.schema, self.arrow_type, data, buffer, starts, ends, "")
        if np.any(positions != ends):
            raise _Corrupt("Avro values do not end where their records do")
        return array

    def _read(
        self,
        schema: AvroJson,
        arrow_type: pa.DataType,
        data: npt.NDArray[np.uint8],
        buffer: pa.Buffer,
        positions: Positions,
        limits: Positions,
        namespace: str,
    ) -> tuple[pa.Array, Positions]:
        from odradek.spark.arrow import _binary_column, _take, _varints

        n = len(positions)
        if isinstance(schema, list):
            branch = 1 if schema[0] == "null" else 0
            index, size = _varints(data, positions)
            if np.any((index != 0) & (index != 1)):
                raise _Corrupt("an Avro union's branch index is out of range")
            positions = positions + size
            present = np.flatnonzero(index == branch)
            inner, moved = self._read(
                schema[branch],
                arrow_type,
                data,
                buffer,
                positions[present],
                limits[present],
                namespace,
            )
            positions[present] = moved
            if len(present) == n:
                return inner, positions
            where = np.zeros(n, dtype=np.int64)
            where[present] = np.arange(len(present))
            mask = np.ones(n, dtype=bool)
            mask[present] = False
            return inner.take(pa.array(where, mask=mask)), positions
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            found = self.named.get(schema) or self.named[f"{namespace}.{schema}"]
            return self._read(found, arrow_type, data, buffer, positions, limits, namespace)
        kind = schema if isinstance(schema, str) else schema.get("type")
        if isinstance(kind, dict | list):
            return self._read(kind, arrow_type, data, buffer, positions, limits, namespace)
        if kind == "record":
            _, space = _full_name(schema, namespace)
            children = []
            for entry, field_type in zip(schema["fields"], arrow_type, strict=True):
                child, positions = self._read(
                    entry["type"], field_type.type, data, buffer, positions, limits, space
                )
                children.append(child)
            return pa.StructArray.from_arrays(children, fields=list(arrow_type)), positions
        if kind == "boolean":
            flags = _take(data, positions)
            _check(positions + 1, limits)
            return pa.array(flags != 0, pa.bool_()), positions + 1
        if kind in ("int", "long"):
            values, size = _varints(data, positions)
            moved = positions + size
            _check(moved, limits)
            return _integers(values, arrow_type, schema), moved
        if kind in ("float", "double"):
            width = 4 if kind == "float" else 8
            raw = _take(data, positions[:, None] + np.arange(width))
            _check(positions + width, limits)
            numbers = raw.copy().view(np.float32 if width == 4 else np.float64).reshape(n)
            return pa.array(numbers, arrow_type), positions + width
        if kind in ("string", "bytes", "fixed"):
            if kind == "fixed":
                lengths = np.full(n, int(schema["size"]), dtype=np.int64)
                begins = positions
            else:
                lengths, size = _varints(data, positions)
                if np.any(lengths < 0):
                    raise _Corrupt("an Avro string or bytes has a negative length")
                begins = positions + size
            moved = begins + lengths
            _check(moved, limits)
            column = _binary_column(data, buffer, begins, lengths)
            if pa.types.is_string(arrow_type):
                column = column.cast(pa.string())  # checks UTF-8
            return column, moved
        if kind == "enum":
            index, size = _varints(data, positions)
            symbols = schema["symbols"]
            if np.any((index < 0) | (index >= len(symbols))):
                raise _Corrupt("an Avro enum's index is out of range")
            moved = positions + size
            _check(moved, limits)
            return pa.array(symbols, pa.string()).take(pa.array(index)), moved
        if kind == "array":
            return self._array(schema, arrow_type, data, buffer, positions, limits, namespace)
        raise _Unsupported(str(kind))

    def _array(
        self,
        schema: AvroJson,
        arrow_type: pa.DataType,
        data: npt.NDArray[np.uint8],
        buffer: pa.Buffer,
        positions: Positions,
        limits: Positions,
        namespace: str,
    ) -> tuple[pa.Array, Positions]:
        """Arrays come in blocks (a count, for a negative count also a byte size, then the
        items), ended by a 0 count. Item ``k`` of every row that has one is read at once."""
        from odradek.spark.arrow import _varints

        n = len(positions)
        positions = positions.copy()
        counts = np.zeros(n, dtype=np.int64)
        pieces: list[pa.Array] = []
        owners: list[Positions] = []
        ranks: list[Positions] = []
        active = np.arange(n, dtype=np.int64)
        while len(active):
            block, size = _varints(data, positions[active])
            positions[active] += size
            negative = block < 0
            if negative.any():
                _, skip = _varints(data, positions[active[negative]])
                positions[active[negative]] += skip
                block = np.abs(block)
            _check(positions[active], limits[active])
            # Every item takes a byte at least (records without fields are fastavro's): a
            # count beyond the bytes left is corrupt, and must not loop for long.
            if np.any(block > limits[active] - positions[active]):
                raise _Corrupt("an Avro array claims more items than its bytes hold")
            open_rows = active[block > 0]
            remaining = block[block > 0]
            k = 0
            while len(open_rows):
                item, moved = self._read(
                    schema["items"],
                    arrow_type.value_type,
                    data,
                    buffer,
                    positions[open_rows],
                    limits[open_rows],
                    namespace,
                )
                positions[open_rows] = moved
                pieces.append(item)
                owners.append(open_rows)
                ranks.append(counts[open_rows] + k)
                k += 1
                more = remaining > k
                open_rows = open_rows[more]
                remaining = remaining[more]
            counts[active] += block
            active = active[block > 0]
        offsets = np.zeros(n + 1, dtype=np.int32)
        offsets[1:] = np.cumsum(counts)
        if pieces:
            values = pa.concat_arrays(pieces)
            order = np.lexsort((np.concatenate(ranks), np.concatenate(owners)))
            values = values.take(pa.array(order))
        else:
            values = pa.array([], arrow_type.value_type)
        result = pa.ListArray.from_arrays(pa.array(offsets), values, type=arrow_type)
        return result, positions


def _integers(values: npt.NDArray[np.int64], arrow_type: pa.DataType, schema: AvroJson) -> pa.Array:
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if pa.types.is_timestamp(arrow_type):
        micros = (
            values * 1000 if logical in ("timestamp-millis", "local-timestamp-millis") else values
        )
        return pa.array(micros, pa.int64()).view(arrow_type)
    if pa.types.is_date32(arrow_type):
        return pa.array(values.astype(np.int32), pa.int32()).view(arrow_type)
    if pa.types.is_int32(arrow_type):
        if np.any((values < -(1 << 31)) | (values >= 1 << 31)):
            raise _Corrupt("an Avro int is out of range")
        return pa.array(values.astype(np.int32), pa.int32())
    return pa.array(values, arrow_type)
