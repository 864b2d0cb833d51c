"""Every length and count of a kio-read message checked against the bytes that hold it, before
kio reads it.

kio's native reader (kio 0.6.5, ``_kio_native::schema::read_field``) reserves room for an array's
claimed element count before reading the first element: a 31-byte Metadata request whose topics
array claims 2^32-2 entries makes it ask for 32 GiB, and the process aborts (a Rust allocation
failure is no Python exception). Kafka refuses such a count as soon as it reads it ("Tried to
allocate a collection of size N, but there are only M bytes remaining"). kio cannot be told to,
so a frame is walked here first, along kio's own reading of the schema, and refused with
:class:`MalformedRequest` if any array claims more elements than the bytes left could hold, or
a field runs past the frame's end. A frame that passes leaves kio nothing to allocate beyond
what the frame holds; its other checks (UTF-8, booleans, nulls where none are allowed) stay
kio's.

The walk follows kio exactly, so that kio reads each count at the position checked here:

- fields in declaration order, then (flexible versions) the tagged-field section, where kio knows
  only the tags its schema names: an unknown tag is refused here as kio would refuse it;
- a tagged field's declared size must be the size its value takes (kio reads the value and
  ignores the size; Kafka reads exactly that many bytes);
- a nullable struct is an int8 marker (-1: null) before its fields;
- an array may be null only where Kafka's schema allows it (kio reads any array as None when
  its length says null, and handlers would meet None where Kafka never lets one through: Kafka's
  generated readers refuse "non-nullable field ... was serialized as null");
- the request header's ``client_id`` is a non-compact nullable string even in header v2.

Each schema is compiled once into a Python function (source generated here, like kio's own
generated code): fixed-size runs are one addition, an array of fixed-size elements is one
multiplication, so the check costs little beside kio's read. Pure functions on bytes.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Protocol

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

Buffer = bytes | bytearray | memoryview


class Check(Protocol):
    """Walks ``data`` from ``offset``; returns where kio's read will end, or raises
    :class:`MalformedRequest`."""

    def __call__(self, data: Buffer, offset: int = 0, /) -> int: ...


_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


class MalformedRequest(ValueError):
    """A request (or response) whose bytes do not hold what its lengths and counts claim, or that
    is otherwise not a message of the version its header names. The connection that sent it is
    closed, as Kafka closes one whose request it cannot parse."""


_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class BoundedReader:
    """A cursor over bytes read by hand (Produce, Fetch, ApiVersions v5, the versions kio lacks;
    the coordinators' records); every read checks that the bytes hold what it takes, raising
    :attr:`error` (:class:`MalformedRequest` for a request)."""

    __slots__ = ("end", "position", "view")
    error: typing.ClassVar[type[ValueError]] = MalformedRequest

    def __init__(self, frame: bytes | bytearray | memoryview) -> None:
        self.view = memoryview(frame).cast("B")
        self.position = 0
        self.end = len(self.view)

    def take(self, size: int) -> int:
        start = self.position
        if size < 0 or start + size > self.end:
            raise self.error(
                f"a field of {size} bytes at byte {start} runs past the frame's {self.end}"
            )
        self.position = start + size
        return start

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        return layout.unpack_from(self.view, self.take(layout.size))

    def int8(self) -> int:
        return int(_INT8.unpack_from(self.view, self.take(1))[0])

    def int16(self) -> int:
        return int(_INT16.unpack_from(self.view, self.take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack_from(self.view, self.take(4))[0])

    def int64(self) -> int:
        return int(_INT64.unpack_from(self.view, self.take(8))[0])

    def uvarint(self) -> int:
        value = 0
        shift = 0
        while True:
            byte = self.view[self.take(1)]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self.error("unsigned varint longer than 5 bytes")

    def text(self, size: int) -> str:
        start = self.take(size)
        try:
            return str(self.view[start : start + size], "utf-8")
        except UnicodeDecodeError as e:
            raise self.error(f"string is not UTF-8: {e}") from e

    def nullable_string(self) -> str | None:
        size = self.int16()
        return None if size < 0 else self.text(size)

    def compact_nullable_string(self) -> str | None:
        size = self.uvarint() - 1
        return None if size == -1 else self.text(size)

    def slice(self, size: int) -> memoryview:
        start = self.take(size)
        return self.view[start : start + size]

    def bounded(self, count: int, element_size: int = 1) -> int:
        """``count`` elements to read, each taking ``element_size`` bytes at the least: refused
        when the bytes left cannot hold them, before anyone loops over them."""
        if count * element_size > self.end - self.position:
            raise self.error(f"{count} elements claimed with {self.end - self.position} bytes left")
        return count

    def skip_tagged_fields(self) -> None:
        # Unknown tagged fields are skipped, as Kafka's generated readers skip them; each takes
        # a tag and a size at the least.
        for _ in range(self.bounded(self.uvarint(), 2)):
            self.uvarint()
            self.take(self.uvarint())

    def array_length(self, flexible: bool, element_size: int = 1) -> int:
        """An array's element count, checked against the bytes left (each element takes
        ``element_size`` bytes at the least) before anyone loops over it, as Kafka checks it."""
        count = self.uvarint() - 1 if flexible else self.int32()
        if count < 0:
            raise self.error(f"array length {count} where no null is allowed")
        return self.bounded(count, element_size)


def _uvarint(b: Buffer, p: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes at ``p`` (kio's limit), and the position after it."""
    value = 0
    for shift in (0, 7, 14, 21, 28):
        byte = b[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, p
    raise MalformedRequest("unsigned varint longer than 5 bytes")


_NAMESPACE: dict[str, Any] = {
    "_uv": _uvarint,
    "_i8": struct.Struct(">b").unpack_from,
    "_i16": struct.Struct(">h").unpack_from,
    "_i32": struct.Struct(">i").unpack_from,
    "_Bad": MalformedRequest,
}


def _fields(entity: type) -> tuple[list[dataclasses.Field[Any]], list[dataclasses.Field[Any]]]:
    plain: list[dataclasses.Field[Any]] = []
    tagged: list[dataclasses.Field[Any]] = []
    for f in dataclasses.fields(entity):
        (plain if get_field_tag(f) is None else tagged).append(f)
    return plain, tagged


@cache
def _entity_min_size(entity: type, nullable: bool) -> int:
    if nullable:
        return 1
    plain, _ = _fields(entity)
    flexible = bool(getattr(entity, "__flexible__", False))
    return sum(_field_min_size(entity, f, flexible) for f in plain) + (1 if flexible else 0)


def _field_min_size(entity: type, f: dataclasses.Field[Any], flexible: bool) -> int:
    kind = classify_field(f)
    if isinstance(kind, PrimitiveTupleField | EntityTupleField):
        return 1 if flexible else 4
    if isinstance(kind, EntityField):
        return _entity_min_size(kind.type_, is_optional(f))
    return _primitive_min_size(_kafka_type(entity, f), flexible)


def _kafka_type(entity: type, f: dataclasses.Field[Any]) -> str:
    if entity.__name__ == "RequestHeader" and f.name == "client_id":
        return "legacy_string"
    return get_schema_field_type(f)


def _primitive_min_size(kafka_type: str, flexible: bool) -> int:
    if kafka_type in _FIXED_SIZES:
        return _FIXED_SIZES[kafka_type]
    if kafka_type == "legacy_string":
        return 2
    if kafka_type == "string":
        return 1 if flexible else 2
    if kafka_type in ("bytes", "records"):
        return 1 if flexible else 4
    raise NotImplementedError(f"no bounds check for kafka_type {kafka_type!r}")


@cache
def _entity_layout(entity: type, nullable: bool) -> tuple[int, tuple[int, ...]] | None:
    """The size every instance takes on the wire, and the offsets in it of its (and its nested
    structs') tagged-field sections, when it has one: no variable-length field, no tagged
    field defined (so each section must be the single byte 0)."""
    if nullable:
        return None
    plain, tagged = _fields(entity)
    if tagged:
        return None
    total = 0
    zeros: list[int] = []
    for f in plain:
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField) and _kafka_type(entity, f) in _FIXED_SIZES:
            total += _FIXED_SIZES[_kafka_type(entity, f)]
        elif isinstance(kind, EntityField) and (
            layout := _entity_layout(kind.type_, is_optional(f))
        ):
            zeros.extend(total + z for z in layout[1])
            total += layout[0]
        else:
            return None
    if getattr(entity, "__flexible__", False):
        zeros.append(total)
        total += 1
    return total, tuple(zeros)


def _nullable_array(f: dataclasses.Field[Any]) -> bool:
    """kio types an array whose Kafka schema has ``nullableVersions`` as ``tuple[...] | None``."""
    return typing.get_origin(f.type) in (typing.Union, types.UnionType)


class _Emitter:
    """Writes the source of one check function."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.pending = 0  # fixed bytes skipped but not yet added to p
        self.names = 0

    def name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def flush(self, depth: int) -> None:
        if self.pending:
            self.line(depth, f"p += {self.pending}")
            self.pending = 0

    def uvarint(self, depth: int, var: str) -> None:
        self.flush(depth)
        self.line(depth, f"{var} = b[p]")
        self.line(depth, "p += 1")
        self.line(depth, f"if {var} > 127:")
        self.line(depth + 1, f"{var}, p = _uv(b, p - 1)")

    def entity(self, depth: int, entity: type, nullable: bool) -> None:
        if nullable:
            self.flush(depth)
            marker = self.name("m")
            self.line(depth, f"{marker} = _i8(b, p)[0]")
            self.line(depth, "p += 1")
            self.line(depth, f"if {marker} != -1:")
            depth += 1
            self.line(depth, "pass")
        flexible = bool(getattr(entity, "__flexible__", False))
        plain, tagged = _fields(entity)
        for f in plain:
            self.field(depth, entity, f, flexible)
        if flexible:
            self.tagged(depth, entity, tagged)
        if nullable:
            self.flush(depth)

    def tagged(self, depth: int, entity: type, tagged: list[dataclasses.Field[Any]]) -> None:
        if not tagged:
            # kio knows no tag here: the section must be the one byte 0 (a longer zero varint
            # would move kio's reading away from this walk's)
            self.line(depth, f"if b[p + {self.pending}]:" if self.pending else "if b[p]:")
            self.line(depth + 1, f"raise _Bad('unknown tagged field in {entity.__name__}')")
            self.pending += 1
            return
        count = self.name("t")
        self.uvarint(depth, count)
        self.line(depth, f"if {count}:")
        depth += 1
        # each tagged field takes at least a tag and a size
        self.line(depth, f"if {count} * 2 > e - p:")
        self.line(depth + 1, f"raise _Bad(f'{{{count}}} tagged fields in {{e - p}} bytes')")
        self.line(depth, f"for _ in range({count}):")
        depth += 1
        tag, size, start = self.name("g"), self.name("s"), self.name("q")
        self.uvarint(depth, tag)
        self.uvarint(depth, size)
        self.line(depth, f"{start} = p")
        for i, f in enumerate(tagged):
            self.line(depth, f"{'if' if i == 0 else 'elif'} {tag} == {get_field_tag(f)}:")
            self.line(depth + 1, "pass")
            self.field(depth + 1, entity, f, True)
            self.flush(depth + 1)
        self.line(depth, "else:")
        self.line(depth + 1, f"raise _Bad(f'unknown tag {{{tag}}} in {entity.__name__}')")
        self.line(depth, f"if p - {start} != {size}:")
        self.line(
            depth + 1,
            f"raise _Bad(f'tagged field {{{tag}}} of {{{size}}} bytes takes {{p - {start}}}')",
        )

    def field(self, depth: int, entity: type, f: dataclasses.Field[Any], flexible: bool) -> None:
        kind = classify_field(f)
        if isinstance(kind, PrimitiveField):
            self.primitive(depth, _kafka_type(entity, f), flexible)
        elif isinstance(kind, EntityField):
            self.entity(depth, kind.type_, is_optional(f))
        elif isinstance(kind, PrimitiveTupleField):
            element = get_schema_field_type(f)
            fixed = _FIXED_SIZES.get(element)
            self.array(
                depth,
                f"{entity.__name__}.{f.name}",
                flexible,
                _nullable_array(f),
                _primitive_min_size(element, flexible),
                None if fixed is None else (fixed, ()),
                lambda d: self.primitive(d, element, flexible),
            )
        else:
            assert isinstance(kind, EntityTupleField)
            nested = kind.type_
            self.array(
                depth,
                f"{entity.__name__}.{f.name}",
                flexible,
                _nullable_array(f),
                _entity_min_size(nested, False),
                _entity_layout(nested, False),
                lambda d: self.entity(d, nested, False),
            )

    def primitive(self, depth: int, kafka_type: str, flexible: bool) -> None:
        if kafka_type in _FIXED_SIZES:
            self.pending += _FIXED_SIZES[kafka_type]
            return
        self.flush(depth)
        size = self.name("n")
        if kafka_type == "legacy_string" or (kafka_type == "string" and not flexible):
            self.line(depth, f"{size} = _i16(b, p)[0]")
            self.line(depth, "p += 2")
        elif flexible:
            self.uvarint(depth, size)
            # compact: length + 1, 0 for null
            self.line(depth, f"if {size}:")
            self.line(depth + 1, f"p += {size} - 1")
            return
        else:
            self.line(depth, f"{size} = _i32(b, p)[0]")
            self.line(depth, "p += 4")
        self.line(depth, f"if {size} > 0:")
        self.line(depth + 1, f"p += {size}")

    def array(
        self,
        depth: int,
        what: str,
        flexible: bool,
        nullable: bool,
        min_size: int,
        fixed: tuple[int, tuple[int, ...]] | None,
        element: Callable[[int], None],
    ) -> None:
        self.flush(depth)
        count = self.name("a")
        if flexible:
            self.uvarint(depth, count)
            self.line(depth, f"{count} -= 1")
        else:
            self.line(depth, f"{count} = _i32(b, p)[0]")
            self.line(depth, "p += 4")
        if not nullable:
            # kio reads any array as None when its length says null; Kafka refuses that
            self.line(depth, f"if {count} < 0:")
            self.line(depth + 1, f"raise _Bad('non-nullable field {what} was serialized as null')")
        self.line(depth, f"if {count} > 0:")
        depth += 1
        self.line(depth, f"if {count} * {max(min_size, 1)} > e - p:")
        self.line(
            depth + 1,
            f"raise _Bad(f'{what} claims {{{count}}} elements with {{e - p}} bytes left')",
        )
        if fixed is not None:
            size, zeros = fixed
            for zero in zeros:
                self.line(depth, f"if any(b[p + {zero} : p + {count} * {size} : {size}]):")
                self.line(depth + 1, f"raise _Bad('unknown tagged field in {what}')")
            self.line(depth, f"p += {count} * {size}")
            return
        self.line(depth, f"for _ in range({count}):")
        element(depth + 1)
        self.flush(depth + 1)


def _compile(name: str, entities: tuple[type, ...]) -> Check:
    emitter = _Emitter()
    for entity in entities:
        emitter.entity(1, entity, False)
    emitter.flush(1)
    source = "\n".join([f"def {name}(b, p, e):", *emitter.lines, "    return p", ""])
    namespace = dict(_NAMESPACE)
    exec(compile(source, f"<bounds check of {name}>", "exec"), namespace)
    walk: Callable[[Buffer, int, int], int] = namespace[name]

    def check(data: Buffer, offset: int = 0, /) -> int:
        view = data
        if isinstance(view, memoryview) and view.format != "B":
            view = view.cast("B")
        end = len(view)
        try:
            position = walk(view, offset, end)
        except (IndexError, struct.error):
            raise MalformedRequest(f"{name}: a field runs past the data's {end} bytes") from None
        if position > end:
            raise MalformedRequest(f"{name}: fields claim {position} bytes of {end}")
        return position

    check.source = source  # type: ignore[attr-defined]
    return check


@cache
def message_check(schema: type) -> Check:
    """The check of a whole frame (header and body, without the length prefix) of a kio request
    or response ``schema``: returns the position where kio's read of it will end, or raises
    :class:`MalformedRequest`."""
    entity: Any = schema
    return _compile(
        f"check_{entity.__name__}_v{entity.__version__}", (entity.__header_schema__, entity)
    )


@cache
def entity_check(schema: type) -> Check:
    """The check of one kio entity (no header) at an offset of some bytes, for what kio reads
    that is no message: the consumer protocol's subscription and assignment, whose bytes a
    client chose."""
    entity: Any = schema
    return _compile(f"check_{entity.__name__}_v{entity.__version__}", (entity,))
