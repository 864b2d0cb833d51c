"""The console's view of the schema registry: subjects, their versions, a version's text, a line
diff between two versions, compatibility levels.

Read from the registry that the broker serving the console runs (``schema.registry.listener``),
in its state as replayed from ``_schemas``, through
:meth:`odradek.registry.http.RegistryServer.read` (the ``read`` given here): the same answers as
the registry's REST API, without a second copy of its state. The registry reads ``_schemas`` as
the console's own Kafka principal (``console.client.config``), so the page shows what the console
could read from that topic anyway. Read only: changes go through the registry's API, where its
authentication and compatibility checks apply.

Routes (under the console's ``/api``)::

    GET /api/schemas                          global level, every subject: versions, latest id
                                              and type, level
    GET /api/schemas/S                        a subject's versions (id, type, references)
                                              and its level
    GET /api/schemas/S/versions/V             a version (number or latest): its schema's text
                                              (JSON ones indented, one member a line)
    GET /api/schemas/S/diff?from=V&to=W       a unified line diff of two versions' texts

Threads: the functions here run on the registry's store thread (they are the ``query`` of a
read); :class:`SchemaView` is called on the console's HTTP threads.
"""

from __future__ import annotations

import concurrent.futures
import difflib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote

from odradek.console.api import ApiError
from odradek.registry.errors import RegistryError
from odradek.registry.records import SchemaVersion
from odradek.registry.schemas import AVRO, JSON
from odradek.registry.state import RegistryState

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


def _summary(state: RegistryState, subject: str) -> dict[str, Any]:
    versions = [state.version(subject, str(n)) for n in state.versions(subject)]
    latest = versions[-1]
    return {
        "subject": subject,
        "versions": [v.version for v in versions],
        "latest": latest.version,
        "id": latest.id,
        "schema_type": latest.content.schema_type,
        "compatibility": state.compatibility(subject),
    }


def _version_answer(v: SchemaVersion) -> dict[str, Any]:
    return {
        "version": v.version,
        "id": v.id,
        "schema_type": v.content.schema_type,
        "references": [r.to_json() for r in v.content.references],
    }


def subjects(state: RegistryState) -> dict[str, Any]:
    return {
        "compatibility": state.compatibility(None),
        "mode": state.mode(None),
        "subjects": [_summary(state, s) for s in state.subject_names()],
    }


def subject(state: RegistryState, name: str) -> dict[str, Any]:
    versions = [state.version(name, str(n)) for n in state.versions(name)]
    return {
        "subject": name,
        "compatibility": state.compatibility(name),
        "subject_compatibility": state.configs.get(name),
        "mode": state.mode(name),
        "versions": [_version_answer(v) for v in versions],
    }


def version(state: RegistryState, name: str, spec: str) -> dict[str, Any]:
    found = state.version(name, spec)
    return {"subject": name, **_version_answer(found), "schema": schema_text(found)}


def diff(state: RegistryState, name: str, old: str, new: str) -> dict[str, Any]:
    before, after = state.version(name, old), state.version(name, new)
    lines = difflib.unified_diff(
        schema_text(before).splitlines(),
        schema_text(after).splitlines(),
        f"{name} version {before.version}",
        f"{name} version {after.version}",
        lineterm="",
    )
    return {"subject": name, "from": before.version, "to": after.version, "diff": list(lines)}


class SchemaView:
    """The schema routes of the console's API over a registry's ``read``."""

    def __init__(self, read: RegistryRead) -> None:
        self._read = read

    def _ask(self, query: Callable[[RegistryState], T]) -> T:
        try:
            answer: T = self._read(query)
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
