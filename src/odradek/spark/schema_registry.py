"""A small blocking client of a Confluent Schema Registry (the broker's own, see
:mod:`odradek.registry`, or any other) for the Spark data source's typed columns.

Spark asks for a schema where it plans a query (the driver) and for writers' schemas by id where
it decodes (executors); both go through :func:`registry_client`, which keeps one client per URL
per process, and each client caches what it looked up: a schema id's text never changes, so a
worker asks for each id once.

Only the standard library: a Spark worker should not need an HTTP stack for a few GETs.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from odradek.registry.contexts import DEFAULT_CONTEXT, context_of

#: Confluent's wire format: this byte, then the schema id as a 4-byte big-endian integer.
MAGIC_BYTE = 0
FRAMING_BYTES = 5

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_TIMEOUT_S = 30.0


class SchemaRegistryError(RuntimeError):
    """The registry answered with an error (``status`` and Confluent's ``error_code``), or could
    not be reached (status 0)."""

    def __init__(self, message: str, status: int = 0, error_code: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry keeps it; ``subject``/``version`` are empty/0 when it was looked
    up by id alone."""

    id: int
    schema_type: str  # AVRO, PROTOBUF or JSON
    text: str
    subject: str = ""
    version: int = 0
    references: tuple[Reference, ...] = field(default=())


def _schema_of(answer: dict[str, Any], schema_id: int | None = None) -> RegisteredSchema:
    return RegisteredSchema(
        id=int(answer["id"]) if schema_id is None else schema_id,
        schema_type=str(answer.get("schemaType") or "AVRO"),
        text=str(answer["schema"]),
        subject=str(answer.get("subject", "")),
        version=int(answer.get("version", 0)),
        references=tuple(
            Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
            for r in answer.get("references") or ()
        ),
    )


class SchemaRegistryClient:
    """Subjects' versions, schemas by id, and registration, over the registry's REST API."""

    def __init__(self, url: str, user_info: str | None = None) -> None:
        self.url = url.rstrip("/")
        self._auth = (
            "Basic " + base64.standard_b64encode(user_info.encode()).decode() if user_info else None
        )
        # By (context, id): each schema context numbers its ids on its own.
        self._by_id: dict[tuple[str, int], RegisteredSchema] = {}
        self._lock = threading.Lock()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Accept", _CONTENT_TYPE)
        if data is not None:
            request.add_header("Content-Type", _CONTENT_TYPE)
        if self._auth is not None:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as e:
            try:
                detail = json.loads(e.read())
            except ValueError:
                detail = {}
            message = detail.get("message") or str(e)
            raise SchemaRegistryError(
                f"schema registry {self.url}: {method} {path}: {message}",
                e.code,
                int(detail.get("error_code", 0)),
            ) from None
        except (urllib.error.URLError, OSError) as e:
            raise SchemaRegistryError(f"schema registry {self.url} is unreachable: {e}") from None

    def by_id(self, schema_id: int, subject: str = "") -> RegisteredSchema:
        """The schema ``schema_id`` names in the context of ``subject`` (a subject qualified
        ``:.name:...`` is in context ``.name``; others, and none, in the default context)."""
        context = context_of(subject)[0]
        with self._lock:
            found = self._by_id.get((context, schema_id))
        if found is None:
            path = f"/schemas/ids/{schema_id}"
            if context != DEFAULT_CONTEXT:
                path += "?subject=" + urllib.parse.quote(f":{context}:", safe="")
            found = _schema_of(self._call("GET", path), schema_id)
            with self._lock:
                self._by_id[(context, schema_id)] = found
        return found

    def version(self, subject: str, version: int | None = None) -> RegisteredSchema:
        """A subject's ``version`` (its latest when None)."""
        which = "latest" if version is None else str(version)
        quoted = urllib.parse.quote(subject, safe="")
        found = _schema_of(self._call("GET", f"/subjects/{quoted}/versions/{which}"))
        with self._lock:
            self._by_id.setdefault((context_of(subject)[0], found.id), found)
        return found

    def register(self, subject: str, text: str, schema_type: str = "AVRO") -> int:
        """The id of ``text`` under ``subject``, registering it as a new version if needed."""
        body: dict[str, Any] = {"schema": text}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        quoted = urllib.parse.quote(subject, safe="")
        return int(self._call("POST", f"/subjects/{quoted}/versions", body)["id"])


_CLIENTS: dict[tuple[str, str | None], SchemaRegistryClient] = {}


def registry_client(url: str, user_info: str | None = None) -> SchemaRegistryClient:
    """This process's client for ``url`` (its cache of schemas by id is shared by tasks)."""
    key = (url, user_info)
    client = _CLIENTS.get(key)
    if client is None:
        client = _CLIENTS[key] = SchemaRegistryClient(url, user_info)
    return client
