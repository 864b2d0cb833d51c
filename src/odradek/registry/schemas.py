"""Schemas as the registry keeps and compares them: their text, type and references, parsed by
the field's libraries (Apache Avro's ``avro`` for Avro, ``jsonschema`` for JSON Schema,
``proto-schema-parser`` and ``protobuf`` for Protobuf: :mod:`.protobuf`), and the compatibility
rules between versions under each of Confluent's seven levels.

Those libraries are imported when a schema of their type is first parsed (on the registry's
threads), not with this module: every broker imports it, most never parse a schema, and the
three are a large part of a broker's start.

An Avro or JSON schema's *canonical* text is its JSON with insignificant whitespace removed (the
key order is kept: Avro gives it meaning for fields), so that a lookup of the same schema written
with other spacing finds it. With ``normalize`` (Confluent's ``?normalize=true``) an Avro schema
is written as the ``avro`` library prints its parsed form, which also spells names fully
qualified.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.registry import json_compat
from odradek.registry.errors import RegistryError, invalid_compatibility_level, invalid_schema

if TYPE_CHECKING:
    import avro.schema

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)

NONE = "NONE"
BACKWARD = "BACKWARD"
BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
FORWARD = "FORWARD"
FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
FULL = "FULL"
FULL_TRANSITIVE = "FULL_TRANSITIVE"
COMPATIBILITY_LEVELS = (
    NONE,
    BACKWARD,
    BACKWARD_TRANSITIVE,
    FORWARD,
    FORWARD_TRANSITIVE,
    FULL,
    FULL_TRANSITIVE,
)


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A named type this schema takes from ``subject``'s ``version``."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaContent:
    """What a global id stands for: the schema's type, its text and its references."""

    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()


class Reference(Protocol):
    """A reference as any client of the registry holds one."""

    @property
    def name(self) -> str: ...

    @property
    def subject(self) -> str: ...

    @property
    def version(self) -> int: ...


# How deep references may nest (a schema, its references, theirs, ...).
MAX_REFERENCE_DEPTH = 32


def resolve_references(
    references: Sequence[Reference],
    find: Callable[[str, int], tuple[str, Sequence[Reference]]],
) -> list[tuple[str, str]]:
    """The (name, text) of each of ``references``, each one's own references before it, every
    name once (the first found), as Confluent's registry resolves them: what a parser needs
    before the schema itself. ``find(subject, version)`` (version -1: the latest) gives a
    version's text and references, and raises when there is none; 42201 past
    :data:`MAX_REFERENCE_DEPTH`."""
    found: list[tuple[str, str]] = []
    seen: set[str] = set()

    def walk(refs: Sequence[Reference], depth: int) -> None:
        if depth > MAX_REFERENCE_DEPTH:
            raise invalid_schema("references nest too deeply")
        for ref in refs:
            if ref.name in seen:
                continue
            seen.add(ref.name)
            text, inner = find(ref.subject, ref.version)
            walk(inner, depth + 1)
            found.append((ref.name, text))

    walk(references, 0)
    return found


class ParsedSchema(Protocol):
    """A schema its library has parsed."""

    @property
    def canonical(self) -> str: ...

    def normalized(self) -> str: ...

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema ([] if it can)."""
        ...


class AvroSchema:
    """An Avro schema parsed by Apache Avro's library, its references' named types first."""

    def __init__(self, text: str, references: Sequence[str] = ()) -> None:
        import avro.errors
        import avro.name
        import avro.schema

        names = avro.name.Names(validate_names=True)
        try:
            for referenced in references:
                avro.schema.make_avsc_object(json.loads(referenced), names)
            data = json.loads(text)
            self.parsed: avro.schema.Schema = avro.schema.make_avsc_object(data, names)
        except (
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            RecursionError,
            avro.errors.AvroException,
        ) as e:
            raise invalid_schema(str(e) or type(e).__name__) from e
        self._data: Any = data
        self._has_references = bool(references)

    @property
    def canonical(self) -> str:
        return json.dumps(self._data, separators=(",", ":"), ensure_ascii=False)

    def expanded(self) -> str:
        """The schema with its references' named types written out where first used: one
        schema that needs no registry to read (fastavro's, a container file's)."""
        if not self._has_references:
            return self.canonical
        return json.dumps(self.parsed.to_json(), separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        # With references the library would print the referenced types inline: keep the text.
        if self._has_references:
            return self.canonical
        return json.dumps(self.parsed.to_json(), separators=(",", ":"), ensure_ascii=False)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroSchema):
            return ["the schemas are of different types"]
        from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

        checker = ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
        result = checker.get_compatibility(self.parsed, writer.parsed)
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        kinds = ", ".join(sorted(k.name.upper() for k in result.incompatibilities))
        where = ", ".join(sorted(result.locations))
        detail = "; ".join(sorted(result.messages))
        return [f"{{errorType:'{kinds}', description:'{detail}', location:'{where}'}}"]


class JsonSchema:
    """A JSON Schema, checked against its draft's meta-schema by ``jsonschema``; compatibility
    by :mod:`.json_compat`."""

    def __init__(self, text: str, references: Sequence[str] = ()) -> None:
        import jsonschema.exceptions
        import jsonschema.validators

        try:
            data = json.loads(text)
            if not isinstance(data, (dict, bool)):
                raise ValueError("a JSON Schema is an object or a boolean")
            jsonschema.validators.validator_for(data).check_schema(data)
        except (ValueError, TypeError, RecursionError, jsonschema.exceptions.SchemaError) as e:
            raise invalid_schema(str(e).splitlines()[0] if str(e) else type(e).__name__) from e
        self._data: Any = data

    @property
    def canonical(self) -> str:
        return json.dumps(self._data, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(self._data, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonSchema):
            return ["the schemas are of different types"]
        return json_compat.reader_errors(self._data, writer._data)


def parse_schema(schema_type: str, text: str, references: Sequence[str] = ()) -> ParsedSchema:
    """``text`` parsed as ``schema_type``, the texts of its references (each one's own
    references before it) given; :class:`RegistryError` 42201 when it is not a valid schema."""
    if schema_type == AVRO:
        return AvroSchema(text, references)
    if schema_type == JSON:
        return JsonSchema(text, references)
    if schema_type == PROTOBUF:
        from odradek.registry.protobuf import ProtobufSchema

        return ProtobufSchema(text, references)
    raise invalid_schema(f"unknown schema type {schema_type!r}")


def record_names(schema_type: str, text: str) -> tuple[str, ...]:
    """The names Confluent's record name strategies give a schema's records (none when it has
    no such name): an Avro schema's full name (a primitive's type name, as Avro's own
    ``getFullName``), a JSON Schema's ``title``, the full name of each message of a Protobuf
    file (a serializer names the message it writes, which may be any of them). Read from the
    text alone: no references are needed for names."""
    try:
        if schema_type == PROTOBUF:
            from odradek.registry.protobuf import ProtobufSchema

            return ProtobufSchema(text).message_names()
        data = json.loads(text)
    except (ValueError, RecursionError, RegistryError):
        return ()
    if schema_type == JSON:
        title = data.get("title") if isinstance(data, dict) else None
        return (title,) if isinstance(title, str) else ()
    if isinstance(data, str):
        return (data,)
    if not isinstance(data, dict):
        return ()  # a union has no one name
    kind, name = data.get("type"), data.get("name")
    if kind in ("record", "enum", "fixed") and isinstance(name, str):
        namespace = data.get("namespace")
        if "." in name or not isinstance(namespace, str) or not namespace:
            return (name,)
        return (f"{namespace}.{name}",)
    return (kind,) if isinstance(kind, str) else ()


def compatibility_errors(
    level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]
) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) under ``level`` ([] if it may).

    BACKWARD: ``new`` reads what the latest wrote; FORWARD: the latest reads what ``new``
    writes; FULL: both; the ``_TRANSITIVE`` forms check against every earlier version, not only
    the latest; NONE checks nothing."""
    if level == NONE or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    errors: list[str] = []
    try:
        for old in reversed(against):
            if base in (BACKWARD, FULL):
                errors += new.read_errors(old)
            if base in (FORWARD, FULL):
                errors += old.read_errors(new)
    except RecursionError:
        return ["the schemas nest too deeply to be compared"]
    return errors


def check_level(level: object) -> str:
    if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
        raise invalid_compatibility_level(level)
    return level.upper()
