"""The records of the ``_schemas`` topic, in Confluent Schema Registry's format, so that a topic
written by Confluent's registry replays here and the other way round.

Keys and values are JSON objects (UTF-8); the key names its kind in ``keytype``::

    SCHEMA          key {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
                    value {"subject":S,"version":V,"id":N,"schema":TEXT,"deleted":false,
                           "schemaType":"JSON"|"PROTOBUF" (absent for Avro),
                           "references":[{"name":..,"subject":..,"version":..}] (when some)}
                    a null value (tombstone): the version is deleted permanently
    CONFIG          key {"keytype":"CONFIG","subject":S|null,"magic":0}
                    value {"compatibilityLevel":LEVEL}; null: the subject's level is removed
    MODE            key {"keytype":"MODE","subject":S|null,"magic":0}, value {"mode":MODE}
    DELETE_SUBJECT  key {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}
                    value {"subject":S,"version":V}: versions up to V are soft-deleted
    CLEAR_SUBJECT   key {"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}, value {"subject":S}:
                    the subject's soft-deleted versions are gone
    NOOP            written by Confluent's registry to find the topic's end; ignored

A null subject in CONFIG and MODE is the global setting. The topic is compacted, so only the
last record of each key stays: that is why a schema's deletion rewrites its SCHEMA record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from odradek.registry.schemas import AVRO, SchemaContent, SchemaReference

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"

# One record of the topic: key and value (None: a tombstone).
Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One version of a subject: its global id and schema; ``deleted`` once soft-deleted."""

    subject: str
    version: int
    id: int
    content: SchemaContent
    deleted: bool = False

    def answer(self) -> dict[str, object]:
        """The registry's JSON for this version (GET /subjects/{s}/versions/{v})."""
        body: dict[str, object] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
        }
        body.update(content_answer(self.content))
        return body


def content_answer(content: SchemaContent) -> dict[str, object]:
    body: dict[str, object] = {}
    if content.schema_type != AVRO:
        body["schemaType"] = content.schema_type
    if content.references:
        body["references"] = [r.to_json() for r in content.references]
    body["schema"] = content.schema
    return body


def _dump(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def schema_value(v: SchemaVersion) -> bytes:
    value: dict[str, Any] = {
        "subject": v.subject,
        "version": v.version,
        "id": v.id,
        "schema": v.content.schema,
        "deleted": v.deleted,
    }
    if v.content.schema_type != AVRO:
        value["schemaType"] = v.content.schema_type
    if v.content.references:
        value["references"] = [r.to_json() for r in v.content.references]
    return _dump(value)


def schema_record(v: SchemaVersion) -> Record:
    return schema_key(v.subject, v.version), schema_value(v)


def config_record(subject: str | None, level: str | None) -> Record:
    key = _dump({"keytype": CONFIG, "subject": subject, "magic": 0})
    return key, None if level is None else _dump({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    key = _dump({"keytype": MODE, "subject": subject, "magic": 0})
    return key, None if mode is None else _dump({"mode": mode})


def delete_subject_record(subject: str, version: int) -> Record:
    key = _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})
    return key, _dump({"subject": subject, "version": version})


def decode_json(data: bytes | None) -> dict[str, Any] | None:
    """A key or value as a JSON object; None for a tombstone or anything else."""
    if data is None:
        return None
    try:
        decoded = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded if isinstance(decoded, dict) else None


def parse_references(raw: object) -> tuple[SchemaReference, ...]:
    """References as a request or a record gives them; ValueError when malformed."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError("references must be a list")
    found = []
    for item in raw:
        if not isinstance(item, dict):
            raise ValueError("a reference is an object")
        name, subject, version = item.get("name"), item.get("subject"), item.get("version")
        if not isinstance(name, str) or not isinstance(subject, str):
            raise ValueError("a reference has a name and a subject")
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError("a reference's version is a number")
        found.append(SchemaReference(name, subject, version))
    return tuple(found)


def decode_schema_value(value: dict[str, Any]) -> SchemaVersion | None:
    """A SCHEMA record's value, or None when it is not one."""
    subject, version, id_, schema = (
        value.get("subject"),
        value.get("version"),
        value.get("id"),
        value.get("schema"),
    )
    schema_type = value.get("schemaType") or AVRO
    if not (
        isinstance(subject, str)
        and isinstance(version, int)
        and isinstance(id_, int)
        and isinstance(schema, str)
        and isinstance(schema_type, str)
    ):
        return None
    try:
        references = parse_references(value.get("references"))
    except ValueError:
        return None
    return SchemaVersion(
        subject,
        version,
        id_,
        SchemaContent(schema_type, schema, references),
        bool(value.get("deleted", False)),
    )
