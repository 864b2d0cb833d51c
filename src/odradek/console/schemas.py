"""The console's view of the schema registry: subjects, their versions, a version's text, a line
diff between two versions, compatibility levels and modes.

In a broker, read from the registry it runs (``schema.registry.listener``), in its state as
replayed from ``_schemas``, through :meth:`odradek.registry.http.RegistryServer.read`
(:func:`in_process`: a page is one read, one catch-up with the topic): the registry's own
answers, without a second copy of its state. The registry reads ``_schemas`` as the console's
own Kafka principal (``console.client.config``), so the page shows what the console could read
from that topic anyway. ``odradek console --schema-registry URL`` reads any registry's REST API
instead (:func:`over_rest`: Confluent's or a broker's). Read only: changes go through the
registry's API, where its authentication and compatibility checks apply.

Routes (under the console's ``/api``)::

    GET /api/schemas                          global level, every subject: versions, latest id
                                              and type, level
    GET /api/schemas/S                        a subject's versions (id, type, references)
                                              and its level
    GET /api/schemas/S/versions/V             a version (number or latest): its schema's text
                                              (JSON ones indented, one member a line)
    GET /api/schemas/S/diff?from=V&to=W       a unified line diff of two versions' texts

Threads: :class:`SchemaView` is called on the console's HTTP threads; in process, the pages
are made on the registry's store thread (they are the ``query`` of a read).
"""

from __future__ import annotations

import concurrent.futures
import difflib
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote

from odradek.console.api import ApiError
from odradek.registry.client import RegistryCallError, RegistryClient, quote
from odradek.registry.errors import RegistryError
from odradek.registry.records import SchemaVersion, parse_references
from odradek.registry.schemas import AVRO, JSON, SchemaContent
from odradek.registry.state import DEFAULT_COMPATIBILITY, READWRITE, RegistryState

T = TypeVar("T")

# The registry's read: a query run against its state on its store thread.
RegistryRead = Callable[[Callable[[RegistryState], Any]], Any]


def schema_text(version: SchemaVersion) -> str:
    """The schema as a person reads it: an Avro or JSON schema indented (it is usually kept on
    one line, which no line diff can show), a Protobuf one as registered."""
    text = version.content.schema
    if version.content.schema_type in (AVRO, JSON):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            pass
    return text


class Registry(Protocol):
    """What the pages are made of: the registry's answers, from its state in process
    (:class:`StateRegistry`) or over its REST API (:class:`RestRegistry`)."""

    def subject_names(self) -> list[str]: ...

    def versions(self, subject: str) -> list[int]: ...

    def version(self, subject: str, spec: str) -> SchemaVersion: ...

    def compatibility(self, subject: str | None) -> str:
        """The level that applies (the subject's, else the global one)."""
        ...

    def subject_compatibility(self, subject: str) -> str | None:
        """The subject's own level, None when it follows the global one."""
        ...

    def mode(self, subject: str | None) -> str: ...


class StateRegistry:
    """The answers of a :class:`~odradek.registry.state.RegistryState` (on its store thread)."""

    def __init__(self, state: RegistryState) -> None:
        self._state = state

    def subject_names(self) -> list[str]:
        return self._state.subject_names()

    def versions(self, subject: str) -> list[int]:
        return self._state.versions(subject)

    def version(self, subject: str, spec: str) -> SchemaVersion:
        return self._state.version(subject, spec)

    def compatibility(self, subject: str | None) -> str:
        return self._state.compatibility(subject)

    def subject_compatibility(self, subject: str) -> str | None:
        return self._state.configs.get(subject)

    def mode(self, subject: str | None) -> str:
        return self._state.mode(subject)


class RestRegistry:
    """The answers of a registry's REST API (Confluent's or odradek's), through ``client``.
    Blocks: call it on the console's HTTP threads."""

    def __init__(self, client: RegistryClient) -> None:
        self._client = client

    def _get(self, path: str) -> Any:
        try:
            return self._client.call("GET", path)
        except RegistryCallError as e:
            if e.code is not None:
                raise RegistryError(e.code, str(e)) from e
            if e.status is not None:
                raise ApiError(502, f"the schema registry answered: {e}") from e
            raise ApiError(503, f"the schema registry: {e}") from e

    def subject_names(self) -> list[str]:
        return sorted(str(s) for s in self._get("/subjects"))

    def versions(self, subject: str) -> list[int]:
        return [int(v) for v in self._get(f"/subjects/{quote(subject)}/versions")]

    def version(self, subject: str, spec: str) -> SchemaVersion:
        body = self._get(f"/subjects/{quote(subject)}/versions/{quote(spec)}")
        try:
            content = SchemaContent(
                str(body.get("schemaType") or AVRO),
                str(body["schema"]),
                parse_references(body.get("references")),
            )
            return SchemaVersion(subject, int(body["version"]), int(body["id"]), content)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ApiError(502, f"the schema registry answered an unreadable version: {e}") from e

    def _level(self, path: str) -> str | None:
        try:
            body = self._get(path)
        except RegistryError as e:
            if e.status == 404:
                return None
            raise
        return str(body.get("compatibilityLevel") or body.get("compatibility") or "") or None

    def compatibility(self, subject: str | None) -> str:
        if subject is not None:
            level = self._level(f"/config/{quote(subject)}?defaultToGlobal=true")
        else:
            level = self._level("/config")
        return level or DEFAULT_COMPATIBILITY

    def subject_compatibility(self, subject: str) -> str | None:
        return self._level(f"/config/{quote(subject)}?defaultToGlobal=false")

    def mode(self, subject: str | None) -> str:
        path = "/mode"
        if subject is not None:
            path += f"/{quote(subject)}?defaultToGlobal=true"
        try:
            return str(self._get(path).get("mode") or READWRITE)
        except RegistryError as e:
            if e.status == 404:
                return READWRITE
            raise


def _summary(registry: Registry, subject: str) -> dict[str, Any]:
    versions = registry.versions(subject)
    latest = registry.version(subject, "latest")
    return {
        "subject": subject,
        "versions": versions,
        "latest": latest.version,
        "id": latest.id,
        "schema_type": latest.content.schema_type,
        "compatibility": registry.compatibility(subject),
    }


def _version_answer(v: SchemaVersion) -> dict[str, Any]:
    return {
        "version": v.version,
        "id": v.id,
        "schema_type": v.content.schema_type,
        "references": [r.to_json() for r in v.content.references],
    }


def subjects(registry: Registry) -> dict[str, Any]:
    return {
        "compatibility": registry.compatibility(None),
        "mode": registry.mode(None),
        "subjects": [_summary(registry, s) for s in registry.subject_names()],
    }


def subject(registry: Registry, name: str) -> dict[str, Any]:
    versions = [registry.version(name, str(n)) for n in registry.versions(name)]
    return {
        "subject": name,
        "compatibility": registry.compatibility(name),
        "subject_compatibility": registry.subject_compatibility(name),
        "mode": registry.mode(name),
        "versions": [_version_answer(v) for v in versions],
    }


def version(registry: Registry, name: str, spec: str) -> dict[str, Any]:
    found = registry.version(name, spec)
    return {"subject": name, **_version_answer(found), "schema": schema_text(found)}


def diff(registry: Registry, name: str, old: str, new: str) -> dict[str, Any]:
    before, after = registry.version(name, old), registry.version(name, new)
    lines = difflib.unified_diff(
        schema_text(before).splitlines(),
        schema_text(after).splitlines(),
        f"{name} version {before.version}",
        f"{name} version {after.version}",
        lineterm="",
    )
    return {"subject": name, "from": before.version, "to": after.version, "diff": list(lines)}


def in_process(read: RegistryRead) -> Callable[[Callable[[Registry], T]], T]:
    """A page made in one read of the registry's state (one catch-up with ``_schemas``)."""

    def ask(page: Callable[[Registry], T]) -> T:
        answer: T = read(lambda state: page(StateRegistry(state)))
        return answer

    return ask


def over_rest(registry: RestRegistry) -> Callable[[Callable[[Registry], T]], T]:
    def ask(page: Callable[[Registry], T]) -> T:
        return page(registry)

    return ask


class SchemaView:
    """The schema routes of the console's API; ``ask`` makes a page of a :class:`Registry`
    (:func:`in_process` or :func:`over_rest`)."""

    def __init__(self, ask: Callable[[Callable[[Registry], Any]], Any]) -> None:
        self._ask_registry = ask

    def _ask(self, page: Callable[[Registry], T]) -> T:
        try:
            answer: T = self._ask_registry(page)
        except RegistryError as e:
            raise ApiError(e.status, e.message) from e
        except concurrent.futures.TimeoutError:
            raise ApiError(504, "the schema registry did not answer in time") from None
        return answer

    def route(self, method: str, parts: list[str], query: Mapping[str, str]) -> Any:
        """The answer to ``/api/schemas/...`` (``parts`` after ``schemas``)."""
        if method != "GET":
            raise ApiError(405, f"{method} is not allowed here (only GET)")
        match [unquote(p) for p in parts]:
            case []:
                return self._ask(subjects)
            case [name]:
                return self._ask(lambda s: subject(s, name))
            case [name, "versions", spec]:
                return self._ask(lambda s: version(s, name, spec))
            case [name, "diff"]:
                old, new = query.get("from"), query.get("to")
                if not old or not new:
                    raise ApiError(400, "a diff needs ?from=VERSION&to=VERSION")
                return self._ask(lambda s: diff(s, name, old, new))
        raise ApiError(404, f"no such API: /api/schemas/{'/'.join(parts)}")
