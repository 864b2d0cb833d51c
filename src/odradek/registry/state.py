"""The registry's state and its rules, with no I/O: what replaying ``_schemas`` builds, the
answers to reads, and the records each change must write.

:meth:`RegistryState.apply` takes the topic's records in order. Replay is deterministic, so every
broker that has read the same prefix holds the same state, and a compaction does not change it:

- a SCHEMA record for a version that exists with another id or another schema is ignored (the
  first writer of a version wins; the loser writes the winner's value again, so that compaction,
  which keeps a key's last record, keeps the winner);
- a SCHEMA record whose id already stands for another schema (in a version not deleted
  permanently) is ignored, so one id never names two schemas.

Schema contexts (Confluent's): a subject qualified as ``:.name:subject`` lives in the context
``.name``, one unqualified (or qualified ``:.:``) in the default context ``.``. Each context
numbers its ids on its own, so an id names a schema within one context; the records are
Confluent's, the subject carrying its context.

Changes are planned here and written by the store: a ``plan_*`` method checks the request
against the state (mode, compatibility, references) and returns the records to write and the
answer to give once they are committed and read back.

Not thread-safe: one thread owns it (the store's).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from odradek.registry import errors
from odradek.registry.contexts import DEFAULT_CONTEXT, context_of, qualified
from odradek.registry.errors import RegistryError
from odradek.registry.records import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    Record,
    SchemaVersion,
    config_record,
    decode_json,
    decode_schema_value,
    delete_subject_record,
    mode_record,
    schema_key,
    schema_record,
)
from odradek.registry.schemas import (
    AVRO,
    BACKWARD,
    SCHEMA_TYPES,
    ParsedSchema,
    SchemaContent,
    SchemaReference,
    check_level,
    compatibility_errors,
    parse_schema,
    record_names,
    resolve_references,
)

log = logging.getLogger(__name__)

READWRITE = "READWRITE"
READONLY = "READONLY"
READONLY_OVERRIDE = "READONLY_OVERRIDE"
IMPORT = "IMPORT"
MODES = (READWRITE, READONLY, READONLY_OVERRIDE, IMPORT)
# An id within its context.
ContextId = tuple[str, int]

DEFAULT_COMPATIBILITY = BACKWARD


class SchemaIdUse:
    """What schema id validation needs of one id: the subjects it is registered under (in
    versions soft-deleted or not), and the names the record name strategies give its schema
    (:func:`record_names`, read from the schema the first time they are asked for: only topics
    under those strategies ask). Immutable once made, but for that cache: any thread may read
    it."""

    __slots__ = ("_content", "_names", "subjects")

    def __init__(self, subjects: frozenset[str], content: SchemaContent) -> None:
        self.subjects = subjects
        self._content = content
        self._names: tuple[str, ...] | None = None

    @property
    def record_names(self) -> tuple[str, ...]:
        names = self._names
        if names is None:
            names = self._names = record_names(self._content.schema_type, self._content.schema)
        return names


@dataclass(frozen=True, slots=True)
class Registration:
    """What a registration needs: the records to write (none when the schema is already there)
    and the version the answer names."""

    records: tuple[Record, ...]
    version: SchemaVersion


@dataclass(frozen=True, slots=True)
class Change:
    """Records to write, and the answer to give once they are committed."""

    records: tuple[Record, ...]
    answer: object


@dataclass(frozen=True, slots=True)
class SchemaRequest:
    """A schema as a request gives it (POST /subjects/{s}/versions and friends)."""

    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    id: int | None = None
    version: int | None = None


class RegistryState:
    """Subjects, versions, ids, compatibility levels and modes (see the module doc)."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self._id_users: dict[ContextId, set[tuple[str, int]]] = {}
        self._id_content: dict[ContextId, SchemaContent] = {}
        self._max_ids: dict[str, int] = {}
        # Moves whenever an id comes or goes or a subject takes or leaves one, so that a reader
        # of schema_ids() knows when to read it again.
        self.ids_generation = 0
        self._uses: dict[int, SchemaIdUse] = {}

    # -- replay ------------------------------------------------------------------------------

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record of ``_schemas``, in the topic's order; malformed ones are skipped."""
        decoded_key = decode_json(key)
        if decoded_key is None:
            return
        keytype = decoded_key.get("keytype")
        subject = decoded_key.get("subject")
        body = decode_json(value)
        if keytype == SCHEMA:
            version = decoded_key.get("version")
            if isinstance(subject, str) and isinstance(version, int):
                self._apply_schema(subject, version, body)
        elif keytype == CONFIG and (subject is None or isinstance(subject, str)):
            level = (
                None if body is None else body.get("compatibilityLevel", body.get("compatibility"))
            )
            self._set(self.configs, subject, level)
        elif keytype == MODE and (subject is None or isinstance(subject, str)):
            self._set(self.modes, subject, None if body is None else body.get("mode"))
        elif keytype == DELETE_SUBJECT and isinstance(subject, str) and body is not None:
            up_to = body.get("version")
            if isinstance(up_to, int):
                for v in list(self.subjects.get(subject, {}).values()):
                    if v.version <= up_to and not v.deleted:
                        self._put(replace(v, deleted=True))
        elif keytype == CLEAR_SUBJECT and isinstance(subject, str):
            for v in list(self.subjects.get(subject, {}).values()):
                if v.deleted:
                    self._remove(subject, v.version)

    @staticmethod
    def _set(table: dict[str | None, str], subject: str | None, setting: object) -> None:
        if isinstance(setting, str):
            table[subject] = setting.upper()
        else:
            table.pop(subject, None)

    def _apply_schema(self, subject: str, version: int, body: dict[str, object] | None) -> None:
        if body is None:
            self._remove(subject, version)
            return
        new = decode_schema_value(body)
        if new is None or new.subject != subject or new.version != version:
            return
        old = self.subjects.get(subject, {}).get(version)
        if old is not None and (old.id != new.id or old.content != new.content):
            log.info(
                "schema registry: %s version %d is taken, a later write ignored", subject, version
            )
            return
        taken = self._id_content.get((context_of(subject)[0], new.id))
        if taken is not None and taken != new.content:
            log.info("schema registry: id %d is taken, a later write ignored", new.id)
            return
        self._put(new)

    def _put(self, v: SchemaVersion) -> None:
        self.subjects.setdefault(v.subject, {})[v.version] = v
        context = context_of(v.subject)[0]
        users = self._id_users.setdefault((context, v.id), set())
        if (v.subject, v.version) not in users:
            users.add((v.subject, v.version))
            self.ids_generation += 1
        self._id_content[(context, v.id)] = v.content
        self._max_ids[context] = max(self._max_ids.get(context, 0), v.id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if versions is None or version not in versions:
            return
        v = versions.pop(version)
        if not versions:
            del self.subjects[subject]
        key = (context_of(subject)[0], v.id)
        users = self._id_users.get(key, set())
        users.discard((subject, version))
        self.ids_generation += 1
        if not users:
            self._id_users.pop(key, None)
            self._id_content.pop(key, None)

    # -- reads -------------------------------------------------------------------------------

    def subject_names(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            s
            for s, versions in self.subjects.items()
            if s.startswith(prefix) and any(deleted or not v.deleted for v in versions.values())
        )

    def _versions_of(self, subject: str, deleted: bool) -> list[SchemaVersion]:
        """A subject's versions, oldest first; 40401 when it has none to show."""
        found = [
            v for _, v in sorted(self.subjects.get(subject, {}).items()) if deleted or not v.deleted
        ]
        if not found:
            raise errors.subject_not_found(subject)
        return found

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        return [v.version for v in self._versions_of(subject, deleted)]

    def version(self, subject: str, spec: str, *, deleted: bool = False) -> SchemaVersion:
        """A version by number, or ``latest`` (also ``-1``): the last one not deleted."""
        number = parse_version(spec)
        if number == -1:
            return self._versions_of(subject, deleted)[-1]
        versions = self._versions_of(subject, True)
        found = next((v for v in versions if v.version == number), None)
        if found is None or (found.deleted and not deleted):
            raise errors.version_not_found(subject, number)
        return found

    def counts(self) -> tuple[int, int, int]:
        """Subjects with a version not deleted, schema ids, and versions (deleted or not)."""
        return (
            len(self.subject_names()),
            len(self._id_content),
            sum(len(versions) for versions in self.subjects.values()),
        )

    def max_id(self, context: str = DEFAULT_CONTEXT) -> int:
        """The greatest id a context has given (0: none)."""
        return self._max_ids.get(context, 0)

    def contexts(self) -> list[str]:
        """The contexts that hold a subject, and the default context (always)."""
        named = {context_of(subject)[0] for subject in self.subjects}
        return sorted(named | {DEFAULT_CONTEXT})

    def schema_ids(self) -> Mapping[int, SchemaIdUse]:
        """Every id of the default context that names a schema (in a version soft-deleted or
        not: those that ``/schemas/ids/{id}`` answers), with the subjects that hold it: a new
        mapping, for a reader on another thread (an id's use is kept from the last call while
        its subjects are the same, and with it the record names read of its schema). Schema
        id validation reads it: as Confluent's, it covers the default context only."""
        uses: dict[int, SchemaIdUse] = {}
        for (context, schema_id), content in self._id_content.items():
            if context != DEFAULT_CONTEXT:
                continue
            subjects = frozenset(s for s, _ in self._id_users.get((context, schema_id), ()))
            old = self._uses.get(schema_id)
            uses[schema_id] = (
                old
                if old is not None and old.subjects == subjects
                else SchemaIdUse(subjects, content)
            )
        self._uses = uses
        return MappingProxyType(dict(uses))

    def schema_by_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> SchemaContent:
        """The schema ``schema_id`` names in ``context``."""
        content = self._id_content.get((context, schema_id))
        if content is None:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return content

    def id_usages(
        self, schema_id: int, context: str = DEFAULT_CONTEXT, *, deleted: bool = False
    ) -> list[tuple[str, int]]:
        self.schema_by_id(schema_id, context)
        return sorted(
            (s, n)
            for s, n in self._id_users.get((context, schema_id), set())
            if deleted or not self.subjects[s][n].deleted
        )

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """The ids of the schemas (in versions not deleted) that reference ``subject`` v."""
        return sorted(
            {
                v.id
                for versions in self.subjects.values()
                for v in versions.values()
                if not v.deleted
                and any(
                    qualified(r.subject, context_of(v.subject)[0]) == subject
                    and r.version == version
                    for r in v.content.references
                )
            }
        )

    def compatibility(self, subject: str | None, *, default_to_global: bool = True) -> str:
        level = self.configs.get(subject)
        if level is not None:
            return level
        if subject is not None and not default_to_global:
            raise errors.compatibility_not_configured(subject)
        return self.configs.get(None, DEFAULT_COMPATIBILITY)

    def mode(self, subject: str | None, *, default_to_global: bool = True) -> str:
        mode = self.modes.get(subject)
        if mode is not None:
            return mode
        if subject is not None and not default_to_global:
            raise errors.mode_not_configured(subject)
        return self.modes.get(None, READWRITE)

    def parse(self, content: SchemaContent, context: str = DEFAULT_CONTEXT) -> ParsedSchema:
        """``content`` (of a subject in ``context``) parsed with its references (42201 when a
        reference is not there)."""
        texts = [text for _, text in self.referenced(content.references, context)]
        return parse_schema(content.schema_type, content.schema, texts)

    def referenced(
        self, references: tuple[SchemaReference, ...], context: str = DEFAULT_CONTEXT
    ) -> list[tuple[str, str]]:
        """The (name, text) of each of ``references`` (of a schema in ``context``), each one's
        own references first (42201 when one is not there)."""

        def within(refs: tuple[SchemaReference, ...], context: str) -> list[SchemaReference]:
            return [replace(r, subject=qualified(r.subject, context)) for r in refs]

        def find(subject: str, version: int) -> tuple[str, list[SchemaReference]]:
            found = self.subjects.get(subject, {}).get(version)
            if version == -1:
                live = [v for v in self.subjects.get(subject, {}).values() if not v.deleted]
                found = max(live, key=lambda v: v.version) if live else None
            if found is None:
                raise errors.invalid_schema(f"reference to {subject!r} version {version} not found")
            return found.content.schema, within(found.content.references, context_of(subject)[0])

        return resolve_references(within(references, context), find)

    def _normalized(
        self, request: SchemaRequest, normalize: bool, subject: str
    ) -> tuple[SchemaContent, ParsedSchema]:
        if request.schema_type not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"unknown schema type {request.schema_type!r}")
        raw = SchemaContent(request.schema_type, request.schema, request.references)
        parsed = self.parse(raw, context_of(subject)[0])
        text = parsed.normalized() if normalize else parsed.canonical
        return replace(raw, schema=text), parsed

    def lookup(
        self,
        subject: str,
        request: SchemaRequest,
        *,
        normalize: bool = False,
        deleted: bool = False,
    ) -> SchemaVersion:
        """The version of ``subject`` holding this schema (POST /subjects/{s})."""
        if subject not in self.subjects:
            raise errors.subject_not_found(subject)
        content, _ = self._normalized(request, normalize, subject)
        for v in sorted(self.subjects[subject].values(), key=lambda v: v.version):
            if (deleted or not v.deleted) and self._same(v.content, content, normalize, subject):
                return v
        raise errors.schema_not_found()

    def _same(
        self, stored: SchemaContent, asked: SchemaContent, normalize: bool, subject: str
    ) -> bool:
        if stored == asked:
            return True
        if not normalize or stored.schema_type != asked.schema_type:
            return False
        try:
            parsed = self.parse(stored, context_of(subject)[0])
            return replace(stored, schema=parsed.normalized()) == asked
        except RegistryError:
            return False

    # -- compatibility -----------------------------------------------------------------------

    def compatibility_messages(
        self,
        subject: str,
        request: SchemaRequest,
        *,
        version: str | None = None,
        normalize: bool = False,
    ) -> list[str]:
        """Why the schema may not follow ``version`` of ``subject`` (all versions the level
        covers when None); [] when it may (POST /compatibility/...)."""
        _, parsed = self._normalized(request, normalize, subject)
        level = self.compatibility(subject)
        context = context_of(subject)[0]
        if version is None:
            if subject not in self.subjects:
                return []
            previous = [self.parse(v.content, context) for v in self._live(subject)]
            return compatibility_errors(level, parsed, previous)
        old = self.version(subject, version)
        base = level.removesuffix("_TRANSITIVE")
        return compatibility_errors(base, parsed, [self.parse(old.content, context)])

    def _live(self, subject: str) -> list[SchemaVersion]:
        return [v for _, v in sorted(self.subjects.get(subject, {}).items()) if not v.deleted]

    # -- changes -----------------------------------------------------------------------------

    def _check_writable(self, subject: str) -> str:
        mode = self.mode(subject)
        if mode in (READONLY, READONLY_OVERRIDE):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        return mode

    def plan_register(
        self, subject: str, request: SchemaRequest, *, normalize: bool = False
    ) -> Registration:
        """The records that register the schema under ``subject``, or none when a version not
        deleted already holds it."""
        mode = self._check_writable(subject)
        content, parsed = self._normalized(request, normalize, subject)
        live = self._live(subject)
        for v in live:
            same = self._same(v.content, content, normalize, subject)
            if same and request.id in (None, -1, v.id):
                return Registration((), v)
        all_versions = self.subjects.get(subject, {})
        next_version = max(all_versions, default=0) + 1
        if mode == IMPORT:
            if request.id is None or request.id < 0:
                raise errors.operation_not_permitted("a schema imported needs its id")
            version = request.version if request.version not in (None, -1) else next_version
            assert version is not None
            existing = all_versions.get(version)
            if existing is not None and (existing.content != content or existing.id != request.id):
                raise errors.operation_not_permitted(
                    f"Overwrite new schema with version {version} is not permitted"
                )
            schema_id = request.id
        else:
            if request.id not in (None, -1):
                raise errors.operation_not_permitted(
                    "a schema's id may be given only in IMPORT mode"
                )
            if request.version not in (None, -1, next_version):
                raise errors.operation_not_permitted(
                    f"version {request.version} is not the next version ({next_version})"
                )
            messages = compatibility_errors(
                self.compatibility(subject),
                parsed,
                [self.parse(v.content, context_of(subject)[0]) for v in live],
            )
            if messages:
                raise errors.incompatible(messages)
            version = next_version
            schema_id = self._id_for(content, context_of(subject)[0])
        taken = self._id_content.get((context_of(subject)[0], schema_id))
        if taken is not None and taken != content:
            raise errors.operation_not_permitted(
                f"Overwrite new schema with id {schema_id} is not permitted"
            )
        new = SchemaVersion(subject, version, schema_id, content)
        return Registration((schema_record(new),), new)

    def _id_for(self, content: SchemaContent, context: str) -> int:
        for (within, schema_id), existing in self._id_content.items():
            if within == context and existing == content:
                return schema_id
        return self.max_id(context) + 1

    def plan_delete_subject(self, subject: str, *, permanent: bool = False) -> Change:
        """Soft: every version is marked deleted; permanent (after a soft delete): gone."""
        self._check_writable(subject)
        versions = self._versions_of(subject, True)
        live = [v for v in versions if not v.deleted]
        self._check_unreferenced(live if not permanent else versions)
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            return Change(
                tuple((schema_key(subject, v.version), None) for v in versions),
                [v.version for v in versions],
            )
        if not live:
            raise errors.subject_soft_deleted(subject)
        records = [schema_record(replace(v, deleted=True)) for v in live]
        records.append(delete_subject_record(subject, versions[-1].version))
        return Change(tuple(records), [v.version for v in live])

    def plan_delete_version(self, subject: str, spec: str, *, permanent: bool = False) -> Change:
        self._check_writable(subject)
        target = self.version(subject, spec, deleted=permanent)
        self._check_unreferenced([target])
        if permanent:
            if not target.deleted:
                raise errors.version_not_soft_deleted(subject, target.version)
            return Change(((schema_key(subject, target.version), None),), target.version)
        if target.deleted:
            raise errors.version_soft_deleted(subject, target.version)
        return Change((schema_record(replace(target, deleted=True)),), target.version)

    def _check_unreferenced(self, versions: list[SchemaVersion]) -> None:
        for v in versions:
            if self.referenced_by(v.subject, v.version):
                raise errors.reference_exists(
                    f"One or more references exist to the schema {{subject={v.subject}, "
                    f"version={v.version}}}"
                )

    def plan_config(self, subject: str | None, level: object) -> Change:
        checked = check_level(level)
        return Change((config_record(subject, checked),), {"compatibility": checked})

    def plan_delete_config(self, subject: str | None) -> Change:
        previous = self.compatibility(subject, default_to_global=False)
        return Change((config_record(subject, None),), {"compatibilityLevel": previous})

    def plan_mode(self, subject: str | None, mode: object, *, force: bool = False) -> Change:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == IMPORT and not force:
            has_schemas = (
                self.subject_names(deleted=True) if subject is None else subject in self.subjects
            )
            if has_schemas:
                raise errors.operation_not_permitted("Cannot import since found existing subjects")
        return Change((mode_record(subject, mode),), {"mode": mode})

    def plan_delete_mode(self, subject: str) -> Change:
        previous = self.mode(subject, default_to_global=False)
        return Change((mode_record(subject, None),), {"mode": previous})


def parse_version(spec: str) -> int:
    """A version in a path: a number from 1, or ``latest`` / ``-1`` (returned as -1)."""
    if spec == "latest":
        return -1
    try:
        number = int(spec)
    except ValueError:
        raise errors.invalid_version(spec) from None
    if number == -1:
        return -1
    if not 1 <= number <= 2**31 - 1:
        raise errors.invalid_version(spec)
    return number
