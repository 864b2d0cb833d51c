"""Request and response (de)serialisation through kio, and version-independent construction.

Kafka's messages differ per version only by which fields exist. Handlers describe a response once,
as keyword arguments; :func:`build` makes the kio entity of the negotiated version from them,
dropping fields that version does not have and filling nested entities recursively.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import typing
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from kio.index import load_request_schema as _load_request_schema
from kio.index import load_response_schema as _load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

# MalformedRequest is re-exported: the error of every request decoder in the protocol layer
from odradek.protocol.bounds import MalformedRequest as MalformedRequest
from odradek.protocol.bounds import message_check
from odradek.protocol.framing import fill_size_prefix

E = TypeVar("E")

_REQUEST_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id


# kio resolves a schema by importing its module path on every call: a cost on each request.
load_request_schema = cache(_load_request_schema)
load_response_schema = cache(_load_response_schema)


class UnsupportedRequest(Exception):
    """A request header naming an API key or version this broker does not serve."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """API key, version and correlation id: the part of every header that never changes."""
    api_key, api_version, correlation_id = _REQUEST_PREFIX.unpack_from(frame, 0)
    return int(api_key), int(api_version), int(correlation_id)


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, RequestPayload]:
    """Parse a whole request frame (without its length prefix).

    Raises :class:`UnsupportedRequest` when kio has no schema for the key and version,
    :class:`MalformedRequest` when a length or count does not fit the frame (checked before kio
    reads it: see :mod:`odradek.protocol.bounds`), and ``ValueError``-like errors from kio when
    the body is otherwise malformed.
    """
    api_key, api_version, _ = peek_header(frame)
    try:
        schema = load_request_schema(api_key, api_version)
    except Exception as e:  # kio's UnknownAPIKey / UnknownEntity
        raise UnsupportedRequest(f"API key {api_key} version {api_version}") from e
    message_check(schema)(frame)
    header, size = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, size)
    return (
        RequestHeader(api_key, api_version, int(header.correlation_id), header.client_id),
        body,
    )


def encode_response(correlation_id: int, response: ResponsePayload) -> bytes:
    """A whole response frame, length prefix included."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    header_schema = type(response).__header_schema__
    header_kwargs: dict[str, Any] = {"correlation_id": correlation_id}
    entity_writer(header_schema)(buffer, header_schema(**header_kwargs))
    entity_writer(type(response))(buffer, response)
    frame = buffer.getbuffer()
    fill_size_prefix(frame)
    return bytes(frame)


def encode_request(header: RequestHeader, request: RequestPayload) -> bytes:
    """A whole request frame, length prefix included (used by the project's own client)."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    header_schema = type(request).__header_schema__
    kwargs: dict[str, Any] = {
        "request_api_key": header.api_key,
        "request_api_version": header.api_version,
        "correlation_id": header.correlation_id,
        "client_id": header.client_id,
    }
    entity_writer(header_schema)(buffer, header_schema(**kwargs))
    entity_writer(type(request))(buffer, request)
    frame = buffer.getbuffer()
    fill_size_prefix(frame)
    return bytes(frame)


def decode_response(schema: type[E], frame: bytes | memoryview) -> tuple[int, E]:
    """Correlation id and body of a response frame (without its length prefix)."""
    header_schema = typing.cast(Any, schema).__header_schema__
    message_check(typing.cast(type, schema))(frame)
    header, size = entity_reader(header_schema)(frame, 0)
    body, _ = entity_reader(typing.cast(Any, schema))(frame, size)
    return int(header.correlation_id), typing.cast(E, body)


def response_schema(api_key: int, api_version: int) -> type[ResponsePayload]:
    return load_response_schema(api_key, api_version)


def request_schema(api_key: int, api_version: int) -> type[RequestPayload]:
    return load_request_schema(api_key, api_version)


# -- version-independent construction -------------------------------------------------------------

_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str | None
    nested: type | None  # entity type for nested entities or tuples of them
    is_tuple: bool
    required: bool


@cache
def _plan(cls: type) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nested: type | None = None
        is_tuple = False
        for candidate in _unwrap(hint):
            origin = typing.get_origin(candidate)
            if origin is tuple:
                is_tuple = True
                inner = typing.get_args(candidate)[0]
                if dataclasses.is_dataclass(inner):
                    nested = typing.cast(type, inner)
            elif dataclasses.is_dataclass(candidate):
                nested = typing.cast(type, candidate)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plans.append(_FieldPlan(f.name, f.metadata.get("kafka_type"), nested, is_tuple, required))
    return tuple(plans)


def _unwrap(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return tuple(a for a in typing.get_args(hint) if a is not type(None))
    return (hint,)


def _convert(kafka_type: str | None, value: Any) -> Any:
    if value is None:
        return None
    if kafka_type == "timedelta_i32" or kafka_type == "timedelta_i64":
        return (
            value
            if isinstance(value, datetime.timedelta)
            else datetime.timedelta(milliseconds=value)
        )
    if kafka_type == "error_code":
        return value if isinstance(value, ErrorCode) else ErrorCode(value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    return value


def build(cls: type[E], values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> E:
    """Make ``cls`` from keyword values, ignoring fields ``cls`` lacks.

    Nested entities may be given as mappings (or sequences of mappings); fields the version
    lacks are dropped, fields it has but that are not given take their schema default, and
    missing required fields default to a zero value of their kind (as Kafka's generated code does).
    """
    source = dict(values or {}, **kwargs)
    args: dict[str, Any] = {}
    for plan in _plan(typing.cast(type, cls)):
        if plan.name not in source:
            if plan.required:
                args[plan.name] = _zero(plan)
            continue
        value = source[plan.name]
        if plan.nested is not None and value is not None:
            if plan.is_tuple:
                value = tuple(
                    item if isinstance(item, plan.nested) else build(plan.nested, item)
                    for item in value
                )
            elif not isinstance(value, plan.nested):
                value = build(plan.nested, value)
        elif plan.is_tuple and value is not None:
            value = tuple(value)
        args[plan.name] = _convert(plan.kafka_type, value)
    return cls(**args)


def _zero(plan: _FieldPlan) -> Any:
    if plan.is_tuple:
        return ()
    kind = plan.kafka_type
    if kind == "error_code":
        return ErrorCode.none
    if kind in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kind == "string":
        return ""
    if kind in ("bytes", "records"):
        return b""
    if kind == "bool":
        return False
    if kind == "uuid":
        return _ZERO_UUID
    if kind is not None and (kind.startswith("int") or kind.startswith("uint")):
        return 0
    if plan.nested is not None:
        return build(plan.nested)
    raise TypeError(f"no zero value for field {plan.name} ({kind})")


def entity_to_dict(entity: Entity) -> dict[str, Any]:
    """A shallow mapping of an entity's fields (for handlers reading any version alike)."""
    return {f.name: getattr(entity, f.name) for f in dataclasses.fields(typing.cast(Any, entity))}
