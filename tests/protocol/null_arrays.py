"""Requests with one array set to null, for every array of every request version the broker
serves through kio: a client may send a null length for any array, and kio reads it as None
whatever the schema says. Used by the protocol tests (a null where Kafka's schema allows none is
refused) and the handler tests (a null where it allows one gets Kafka's answer)."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from odradek.protocol.messages import build, request_schema
from odradek.server.registry import load_handlers


@dataclasses.dataclass(frozen=True)
class NullArray:
    api_key: int
    version: int
    path: tuple[str, ...]  # field names from the request down to the array
    nullable: bool  # whether Kafka's schema lets the array be null

    @property
    def id(self) -> str:
        return f"{self.api_key}v{self.version}-{'.'.join(self.path)}"


def _nullable(f: dataclasses.Field[Any]) -> bool:
    return typing.get_origin(f.type) in (typing.Union, types.UnionType)


def _array_paths(entity: type, prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], bool]]:
    for f in dataclasses.fields(entity):
        kind = classify_field(f)
        path = (*prefix, f.name)
        if kind.is_array:
            yield path, _nullable(f)
        if isinstance(kind, EntityField | EntityTupleField):
            yield from _array_paths(kind.type_, path)


def null_arrays() -> list[NullArray]:
    found = []
    for handler in sorted(load_handlers().values(), key=lambda h: h.api_key):
        for version in range(handler.min_version, handler.max_version + 1):
            try:
                schema = request_schema(handler.api_key, version)
            except Exception:
                continue  # read by hand (odradek.protocol.old_messages and the like)
            for path, nullable in _array_paths(schema, ()):
                found.append(NullArray(handler.api_key, version, path, nullable))
    return found


def request_with_null(entity: type, path: tuple[str, ...], **values: Any) -> Any:
    """The smallest request of ``entity`` whose array at ``path`` is null: every array on the way
    holds one element, the rest take their zero values (``values`` override top-level fields)."""
    fields: dict[str, Any] = dict(values)
    for f in dataclasses.fields(entity):
        if f.name != path[0]:
            continue
        kind = classify_field(f)
        if len(path) == 1:
            fields[f.name] = None
        elif isinstance(kind, EntityTupleField):
            fields[f.name] = (request_with_null(kind.type_, path[1:]),)
        else:
            assert isinstance(kind, EntityField)
            fields[f.name] = request_with_null(kind.type_, path[1:])
    request = build(entity, fields)
    if len(path) == 1:
        # kio's constructor keeps a None it is given, and its writer writes it as a null length
        object.__setattr__(request, path[0], None)
    return request
