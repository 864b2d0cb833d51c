"""The registry's pure core: versions, ids, compatibility verdicts, deletes, config and mode,
and replay of the ``_schemas`` records (as a compaction leaves them too)."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from odradek.registry.contexts import context_of
from odradek.registry.errors import RegistryError
from odradek.registry.records import Record, schema_key
from odradek.registry.schemas import SchemaReference
from odradek.registry.state import IMPORT, READONLY, RegistryState, SchemaRequest


def avro_record(*fields: Mapping[str, object], name: str = "User") -> SchemaRequest:
    return SchemaRequest(json.dumps({"type": "record", "name": name, "fields": list(fields)}))


ID = {"name": "id", "type": "long"}
NAME = {"name": "name", "type": "string"}
EMAIL_WITH_DEFAULT = {"name": "email", "type": "string", "default": ""}
AGE_REQUIRED = {"name": "age", "type": "int"}


class Registry:
    """The state with a log: each change's records are appended and applied, as the store does."""

    def __init__(self) -> None:
        self.state = RegistryState()
        self.log: list[Record] = []

    def write(self, records: tuple[Record, ...]) -> None:
        for key, value in records:
            self.log.append((key, value))
            self.state.apply(key, value)

    def register(self, subject: str, request: SchemaRequest, **kw: bool) -> int:
        plan = self.state.plan_register(subject, request, **kw)
        self.write(plan.records)
        return plan.version.id

    def replayed(self, *, compacted: bool = False) -> RegistryState:
        records = self.log
        if compacted:
            last = {key: i for i, (key, _) in enumerate(records)}
            records = [r for i, r in enumerate(records) if last[r[0]] == i]
        state = RegistryState()
        for key, value in records:
            state.apply(key, value)
        return state


def x_record(name: str, *fields: tuple[str, str]) -> str:
    """An Avro record of namespace ``x`` whose fields are (name, type) pairs, as JSON."""
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "namespace": "x",
            "fields": [{"name": f, "type": t} for f, t in fields],
        }
    )


def code_of(call: object) -> int:
    assert callable(call)
    with pytest.raises(RegistryError) as caught:
        call()
    return caught.value.code


def test_versions_and_ids() -> None:
    r = Registry()
    first = r.register("users-value", avro_record(ID, NAME))
    assert first == 1
    # The same schema again (other spacing) is the same version and id: nothing written.
    same = SchemaRequest(json.dumps(json.loads(avro_record(ID, NAME).schema), indent=4))
    assert r.state.plan_register("users-value", same).records == ()
    second = r.register("users-value", avro_record(ID, NAME, EMAIL_WITH_DEFAULT))
    assert second == 2
    # The same schema in another subject keeps its id.
    assert r.register("other-value", avro_record(ID, NAME)) == 1
    assert r.state.versions("users-value") == [1, 2]
    assert r.state.version("users-value", "latest").id == 2
    assert r.state.lookup("users-value", same).version == 1
    assert r.state.id_usages(1) == [("other-value", 1), ("users-value", 1)]
    assert code_of(lambda: r.state.schema_by_id(3)) == 40403
    assert code_of(lambda: r.state.version("nobody", "1")) == 40401
    assert code_of(lambda: r.state.version("users-value", "7")) == 40402
    assert code_of(lambda: r.state.version("users-value", "zero")) == 42202
    assert code_of(lambda: r.state.lookup("users-value", avro_record(ID))) == 40403


def test_invalid_schemas_are_42201() -> None:
    state = RegistryState()
    for text in ("{not json", '{"type": "record", "name": "R"}', '"nothing"', "[]x"):
        assert code_of(lambda t=text: state.plan_register("s", SchemaRequest(t))) == 42201
    bad_json_schema = SchemaRequest('{"type": 12}', schema_type="JSON")
    assert code_of(lambda: state.plan_register("s", bad_json_schema)) == 42201


@pytest.mark.parametrize(
    ("level", "add_with_default", "add_required", "remove_required"),
    [
        ("BACKWARD", True, False, True),
        ("FORWARD", True, True, False),
        ("FULL", True, False, False),
        ("NONE", True, True, True),
    ],
)
def test_compatibility_verdicts(
    level: str, add_with_default: bool, add_required: bool, remove_required: bool
) -> None:
    """Adding a field with a default, adding a required one, removing a required one."""
    registry = Registry()
    registry.write(registry.state.plan_config(None, level).records)
    registry.register("s", avro_record(ID, NAME))
    state = registry.state
    for fields, allowed in (
        ((ID, NAME, EMAIL_WITH_DEFAULT), add_with_default),
        ((ID, NAME, AGE_REQUIRED), add_required),
        ((ID,), remove_required),
    ):
        messages = state.compatibility_messages("s", avro_record(*fields))
        assert (messages == []) is allowed, (fields, messages)
        if not allowed:
            assert code_of(lambda f=fields: state.plan_register("s", avro_record(*f))) == 409


def test_transitive_levels_check_every_version() -> None:
    """v1 {id}, v2 {id, name=""} (a default), v3 {id, name} (required): under BACKWARD v3
    reads v2's data, but not v1's, which has no name: only BACKWARD_TRANSITIVE refuses."""
    r = Registry()
    r.write(r.state.plan_config("s", "NONE").records)
    r.register("s", avro_record(ID))
    r.register("s", avro_record(ID, {"name": "name", "type": "string", "default": ""}))
    v3 = avro_record(ID, NAME)
    for level, allowed in (
        ("BACKWARD", True),
        ("BACKWARD_TRANSITIVE", False),
        ("FULL", True),
        ("FULL_TRANSITIVE", False),
        ("FORWARD_TRANSITIVE", True),
    ):
        r.write(r.state.plan_config("s", level).records)
        assert (r.state.compatibility_messages("s", v3) == []) is allowed, level
    # Against one version, the level's transitive part does not apply.
    r.write(r.state.plan_config("s", "BACKWARD_TRANSITIVE").records)
    assert r.state.compatibility_messages("s", v3, version="1") != []
    assert r.state.compatibility_messages("s", v3, version="latest") == []


def test_config_levels() -> None:
    r = Registry()
    assert r.state.compatibility(None) == "BACKWARD"
    assert code_of(lambda: r.state.compatibility("s", default_to_global=False)) == 40408
    assert code_of(lambda: r.state.plan_config("s", "SIDEWAYS")) == 42203
    r.write(r.state.plan_config("s", "full_transitive").records)
    assert r.state.compatibility("s") == "FULL_TRANSITIVE"
    change = r.state.plan_delete_config("s")
    assert change.answer == {"compatibilityLevel": "FULL_TRANSITIVE"}
    r.write(change.records)
    assert r.state.compatibility("s") == "BACKWARD"


def test_soft_and_hard_deletes() -> None:
    r = Registry()
    r.register("s", avro_record(ID))
    r.register("s", avro_record(ID, EMAIL_WITH_DEFAULT))
    assert code_of(lambda: r.state.plan_delete_version("s", "1", permanent=True)) == 40407
    change = r.state.plan_delete_version("s", "1")
    assert change.answer == 1
    r.write(change.records)
    assert r.state.versions("s") == [2]
    assert r.state.versions("s", deleted=True) == [1, 2]
    assert code_of(lambda: r.state.plan_delete_version("s", "1")) == 40402
    # A soft-deleted schema is still found by id.
    assert r.state.schema_by_id(1).schema == avro_record(ID).schema.replace(" ", "")
    assert code_of(lambda: r.state.plan_delete_subject("s", permanent=True)) == 40405
    change = r.state.plan_delete_subject("s")
    assert change.answer == [2]
    r.write(change.records)
    assert r.state.subject_names() == []
    assert r.state.subject_names(deleted=True) == ["s"]
    assert code_of(lambda: r.state.versions("s")) == 40401
    assert code_of(lambda: r.state.plan_delete_subject("s")) == 40404
    # Registering again continues the version numbers.
    assert r.register("s", avro_record(ID, NAME)) == 3
    assert r.state.versions("s") == [3]
    r.write(r.state.plan_delete_subject("s").records)
    change = r.state.plan_delete_subject("s", permanent=True)
    assert change.answer == [1, 2, 3]
    r.write(change.records)
    assert r.state.subject_names(deleted=True) == []
    assert code_of(lambda: r.state.schema_by_id(1)) == 40403
    # Ids are never given twice, even after a permanent delete.
    assert r.register("t", avro_record(ID, AGE_REQUIRED)) == 4


def test_references() -> None:
    r = Registry()
    address = SchemaRequest(
        json.dumps(
            {
                "type": "record",
                "name": "Address",
                "namespace": "x",
                "fields": [{"name": "city", "type": "string"}],
            }
        )
    )
    r.register("address", address)
    user = SchemaRequest(
        json.dumps(
            {"type": "record", "name": "User", "fields": [{"name": "home", "type": "x.Address"}]}
        ),
        references=(SchemaReference("x.Address", "address", 1),),
    )
    assert r.register("user", user) == 2
    assert r.state.referenced_by("address", 1) == [2]
    assert code_of(lambda: r.state.plan_delete_version("address", "1")) == 42206
    missing = SchemaRequest(user.schema, references=(SchemaReference("x.Address", "address", 9),))
    assert code_of(lambda: r.state.plan_register("user2", missing)) == 42201
    assert code_of(lambda: r.state.plan_register("user2", SchemaRequest(user.schema))) == 42201


def test_a_type_two_references_share_is_resolved_once() -> None:
    """A diamond: both of the schema's references take ``x.City`` from one subject; Avro
    refuses a name defined twice, so it is parsed once (as Confluent resolves references)."""
    r = Registry()

    r.register("city", SchemaRequest(x_record("City", ("name", "string"))))
    city = (SchemaReference("x.City", "city", 1),)
    r.register("home", SchemaRequest(x_record("Home", ("city", "x.City")), references=city))
    r.register("work", SchemaRequest(x_record("Work", ("city", "x.City")), references=city))
    both = (SchemaReference("x.Home", "home", 1), SchemaReference("x.Work", "work", 1))
    user = SchemaRequest(x_record("User", ("home", "x.Home"), ("work", "x.Work")), references=both)
    assert r.register("user", user) == 4
    assert [name for name, _ in r.state.referenced(both)] == ["x.City", "x.Home", "x.Work"]


def test_modes() -> None:
    r = Registry()
    r.register("s", avro_record(ID))
    r.write(r.state.plan_mode("s", READONLY).records)
    assert code_of(lambda: r.state.plan_register("s", avro_record(ID, NAME))) == 42205
    assert code_of(lambda: r.state.plan_delete_subject("s")) == 42205
    assert r.register("t", avro_record(ID)) == 1  # other subjects are writable
    assert code_of(lambda: r.state.plan_mode(None, "SOMETIMES")) == 42204
    assert code_of(lambda: r.state.plan_mode(None, IMPORT)) == 42205  # subjects exist
    r.write(r.state.plan_mode(None, IMPORT, force=True).records)
    r.write(r.state.plan_delete_mode("s").records)
    # IMPORT: the id and version are the request's, and no compatibility is checked.
    assert code_of(lambda: r.state.plan_register("u", avro_record(NAME))) == 42205
    imported = SchemaRequest(avro_record(AGE_REQUIRED).schema, id=100, version=5)
    assert r.register("u", imported) == 100
    assert r.state.version("u", "5").id == 100
    taken = SchemaRequest(avro_record(NAME).schema, id=100, version=6)
    assert code_of(lambda: r.state.plan_register("u", taken)) == 42205
    assert code_of(lambda: r.state.mode("u", default_to_global=False)) == 40409
    assert r.state.mode("u") == IMPORT


def test_replay_rebuilds_the_state_compacted_or_not() -> None:
    r = Registry()
    r.register("s", avro_record(ID))
    r.register("s", avro_record(ID, EMAIL_WITH_DEFAULT))
    r.write(r.state.plan_config("s", "FULL").records)
    r.write(r.state.plan_delete_version("s", "1").records)
    r.register("t", avro_record(NAME))
    for replayed in (r.replayed(), r.replayed(compacted=True)):
        assert replayed.subjects == r.state.subjects
        assert replayed.configs == r.state.configs
        assert replayed.max_id() == r.state.max_id()


def test_concurrent_writers_first_one_wins() -> None:
    """Two brokers plan against the same state; the log's first record of a version or an id
    wins, the other is ignored on replay everywhere."""
    r = Registry()
    r.register("s", avro_record(ID))
    a = r.state.plan_register("s", avro_record(ID, EMAIL_WITH_DEFAULT))
    b = r.state.plan_register("s", avro_record(ID, {"name": "x", "type": "int", "default": 0}))
    c = r.state.plan_register("other", avro_record(NAME))
    assert a.version.version == b.version.version == 2
    assert a.version.id == b.version.id == c.version.id == 2
    r.write(a.records)
    r.write(b.records)
    r.write(c.records)
    assert r.state.version("s", "2") == a.version
    assert r.state.subject_names() == ["s"]  # c's id was taken: ignored
    assert r.replayed().subjects == r.state.subjects
    # The losers make a compaction keep the winners: b writes a's record again (b's key is
    # a's), c a tombstone of its own key.
    r.write(a.records)
    r.write(((schema_key("other", 1), None),))
    assert r.replayed(compacted=True).subjects == r.state.subjects


def test_malformed_records_are_skipped() -> None:
    state = RegistryState()
    for key, value in (
        (b"not json", b"{}"),
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"[]"),
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s"}'),
        (b'{"keytype":"NOOP","magic":0}', None),
        (None, b"{}"),
    ):
        state.apply(key, value)
    assert state.subjects == {}


def test_deeply_nested_schemas_are_refused_not_crashed() -> None:
    state = RegistryState()
    deep = '{"type": "array", "items": ' * 5000 + '"int"' + "}" * 5000
    assert code_of(lambda: state.plan_register("s", SchemaRequest(deep))) == 42201
    deep_json = '{"items": ' * 5000 + "{}" + "}" * 5000
    assert code_of(lambda: state.plan_register("s", SchemaRequest(deep_json, "JSON"))) == 42201


def test_schema_ids_give_each_ids_subjects_and_record_names() -> None:
    r = Registry()
    reading = SchemaRequest(
        json.dumps({"type": "record", "name": "Reading", "namespace": "iot", "fields": [ID]})
    )
    schema_id = r.register("a-value", reading)
    before = r.state.ids_generation
    uses = r.state.schema_ids()
    assert uses[schema_id].subjects == {"a-value"}
    assert uses[schema_id].record_names == ("iot.Reading",)
    # The same schema under one more subject: the same id, and its subjects change with it.
    assert r.register("iot.Reading", reading) == schema_id
    assert r.state.ids_generation != before
    assert r.state.schema_ids()[schema_id].subjects == {"a-value", "iot.Reading"}
    r.write(r.state.plan_delete_subject("a-value").records)
    assert r.state.schema_ids()[schema_id].subjects == {"a-value", "iot.Reading"}  # soft
    r.write(r.state.plan_delete_subject("a-value", permanent=True).records)
    assert r.state.schema_ids()[schema_id].subjects == {"iot.Reading"}


def test_each_context_numbers_its_own_ids() -> None:
    r = Registry()
    assert r.register("a", avro_record(ID)) == 1
    assert r.register(":.team:a", avro_record(NAME)) == 1
    assert r.register(":.team:b", avro_record(ID)) == 2  # the default context's 1 is not seen
    for state in (r.state, r.replayed(), r.replayed(compacted=True)):
        assert json.loads(state.schema_by_id(1).schema) == json.loads(avro_record(ID).schema)
        team = json.loads(state.schema_by_id(1, ".team").schema)
        assert team == json.loads(avro_record(NAME).schema)
        assert state.id_usages(2, ".team") == [(":.team:b", 1)]
        assert code_of(lambda s=state: s.schema_by_id(2)) == 40403
        assert state.contexts() == [".", ".team"]
        assert set(state.schema_ids()) == {1}  # validation: the default context only
    assert context_of(":.team:a") == (".team", "a")
    assert context_of(":.:a") == (".", "a")
    assert context_of("a:b") == (".", "a:b")


def test_a_reference_without_a_context_is_in_its_schemas_context() -> None:
    """As Confluent's: a schema in .team referencing "address" takes :.team:address, and so
    do that one's own unqualified references."""
    r = Registry()

    r.register("city", SchemaRequest(x_record("Town", ("name", "string"))))  # default: not used
    r.register(":.team:city", SchemaRequest(x_record("City", ("name", "string"))))
    city = (SchemaReference("x.City", "city", 1),)
    r.register(
        ":.team:address", SchemaRequest(x_record("Address", ("city", "x.City")), references=city)
    )
    user = SchemaRequest(
        x_record("User", ("home", "x.Address")),
        references=(SchemaReference("x.Address", "address", 1),),
    )
    assert r.register(":.team:user", user) == 3
    assert r.state.referenced_by(":.team:address", 1) == [3]
    assert r.state.referenced_by("address", 1) == []
    assert code_of(lambda: r.state.plan_register("user", user)) == 42201  # no default address
