"""The bounds check kio's reads go through (odradek.protocol.bounds).

A frame whose array count lies must be refused before kio reads it (kio alone aborts the process:
the first test shows it in a subprocess); every frame kio writes must pass and end where kio's
read ends, for every request and response version the broker serves.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import subprocess
import sys
import types
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from tests.protocol.lying_frames import (
    FETCH_V12_FIELDS,
    LYING_FRAMES,
    METADATA_V12,
    header,
)
from tests.protocol.null_arrays import NullArray, null_arrays, request_with_null

from odradek.protocol import fetch_request, old_messages, produce_request
from odradek.protocol.bounds import MalformedRequest, message_check
from odradek.protocol.messages import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    request_schema,
    response_schema,
)
from odradek.server.registry import load_handlers

HANDLERS = load_handlers()


def kio_versions() -> list[tuple[int, int]]:
    """(API key, version) of every request the broker serves that kio reads."""
    served = []
    for handler in HANDLERS.values():
        for version in range(handler.min_version, handler.max_version + 1):
            try:
                request_schema(handler.api_key, version)
            except Exception:
                continue  # a version read by hand (old_messages, fetch_request, ...)
            served.append((handler.api_key, version))
    return sorted(served)


KIO_VERSIONS = kio_versions()
KIO_APIS = {key: [v for k, v in KIO_VERSIONS if k == key] for key, _ in KIO_VERSIONS}


def test_the_31_byte_metadata_frame_aborts_kio_alone() -> None:
    """Why the check exists: kio's reader, given the frame without the check, kills its process."""
    assert len(METADATA_V12) + 4 == 31
    program = (
        "from kio.serial import entity_reader\n"
        "from odradek.protocol.messages import request_schema\n"
        f"frame = {METADATA_V12!r}\n"
        "schema = request_schema(3, 12)\n"
        "_, size = entity_reader(schema.__header_schema__)(frame, 0)\n"
        "entity_reader(schema)(frame, size)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "memory allocation of" in result.stderr


@pytest.mark.parametrize("name", sorted(LYING_FRAMES))
def test_lying_count_is_refused_before_kio_reads_it(name: str) -> None:
    # In a subprocess, so that a regression shows as a failed test, not a dead test run.
    program = (
        "from odradek.protocol.messages import decode_request, MalformedRequest\n"
        f"try:\n    decode_request({LYING_FRAMES[name]!r})\n"
        "except MalformedRequest as e:\n    print('refused:', e)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "refused:" in result.stdout
    assert "claims" in result.stdout


def test_short_frame_is_malformed() -> None:
    with pytest.raises(MalformedRequest):
        decode_request(METADATA_V12[:10])


def flexible_metadata_request(tagged: bytes) -> bytes:
    # Metadata v12 with one topic (a zero topic id and the name "a"), then the tagged section
    topic = b"\x00" * 16 + b"\x02a" + b"\x00"
    return header(3, 12, True) + b"\x02" + topic + b"\x01\x00" + tagged


def test_unknown_tagged_field_is_malformed() -> None:
    frame = flexible_metadata_request(b"\x01\x09\x01\x00")
    with pytest.raises(MalformedRequest, match="unknown tag"):
        decode_request(frame)


def test_tagged_field_size_must_match_its_value() -> None:
    # Fetch v12's tag 0 is cluster_id, a compact string: "ab" takes 3 bytes, not the 5 claimed
    body = FETCH_V12_FIELDS + b"\x01\x01\x01"  # no topics, none forgotten, rack ""
    base = header(1, 12, True) + body
    ok = base + b"\x01\x00\x03\x03ab"
    assert decode_request(ok)[1].cluster_id == "ab"
    with pytest.raises(MalformedRequest, match="takes 3"):
        decode_request(base + b"\x01\x00\x05\x03ab\x00\x00")
    with pytest.raises(MalformedRequest, match="tagged fields in"):
        decode_request(base + b"\xff\xff\xff\xff\x0f\x00\x03\x03ab")


def test_array_of_fixed_size_elements_is_checked_at_once() -> None:
    # DescribeLogDirs v1 would read topics [name, partitions int32[]]: a count of 2^31-2 int32s
    topic = struct.pack(">h", 1) + b"a" + struct.pack(">i", 0x7FFFFFFE) + b"\x00" * 8
    frame = header(35, 1, False) + struct.pack(">i", 1) + topic
    with pytest.raises(MalformedRequest, match="partitions claims 2147483646"):
        decode_request(frame)


# -- round trips: whatever kio writes passes, and the walk ends where kio's read ends ----------

_INTS = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint8": (0, (1 << 8) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
    "uint64": (0, (1 << 64) - 1),
}
_MS = datetime.timedelta(milliseconds=1)


def primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        return st.integers(*_INTS[kafka_type])
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "string":
        return st.text(max_size=8)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=16)
    if kafka_type == "uuid":
        return st.uuids()
    if kafka_type == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kafka_type == "timedelta_i32":
        return st.integers(0, (1 << 31) - 1).map(lambda ms: ms * _MS)
    if kafka_type == "timedelta_i64":
        return st.integers(0, 1 << 40).map(lambda ms: ms * _MS)
    if kafka_type == "datetime_i64":
        return st.integers(0, 1 << 42).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
        )
    raise AssertionError(f"no strategy for {kafka_type}")


def entities(entity: type) -> st.SearchStrategy[Any]:
    values: dict[str, st.SearchStrategy[Any]] = {}
    for f in dataclasses.fields(entity):
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            nested = kind.type_
            strategy: st.SearchStrategy[Any] = st.lists(
                st.deferred(lambda nested=nested: entities(nested)), max_size=2
            ).map(tuple)
        elif isinstance(kind, PrimitiveTupleField):
            strategy = st.lists(primitive(get_schema_field_type(f)), max_size=3).map(tuple)
        elif isinstance(kind, EntityField):
            nested = kind.type_
            strategy = st.deferred(lambda nested=nested: entities(nested))
        else:
            strategy = primitive(get_schema_field_type(f))
        if kind.is_array:
            nullable = typing.get_origin(f.type) in (typing.Union, types.UnionType)
        elif get_field_tag(f) is not None:
            # kio writes a tagged field only when it differs from its default, and reads it
            # back as not nullable
            nullable = f.default is None
        else:
            nullable = is_optional(f)
        values[f.name] = st.none() | strategy if nullable else strategy
    return st.builds(entity, **values)


def encode_response(correlation_id: int, response: Any) -> bytes:
    buffer = io.BytesIO()
    header_schema = type(response).__header_schema__
    entity_writer(header_schema)(buffer, header_schema(correlation_id=correlation_id))
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


@settings(max_examples=12, suppress_health_check=list(HealthCheck))
@given(data=st.data())
@pytest.mark.parametrize("api_key", sorted(KIO_APIS))
def test_every_request_kio_writes_passes(api_key: int, data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(KIO_APIS[api_key]))
    schema = request_schema(api_key, version)
    request = data.draw(entities(schema))
    client_id = data.draw(st.none() | st.text(max_size=8))
    frame = encode_request(RequestHeader(api_key, version, 5, client_id), request)[4:]
    assert message_check(schema)(frame) == len(frame)
    header, decoded = decode_request(frame)
    assert decoded == request
    assert header.client_id == client_id


@settings(max_examples=12, suppress_health_check=list(HealthCheck))
@given(data=st.data())
@pytest.mark.parametrize("api_key", sorted(KIO_APIS))
def test_every_response_kio_writes_passes(api_key: int, data: st.DataObject) -> None:
    version = data.draw(st.sampled_from(KIO_APIS[api_key]))
    schema = response_schema(api_key, version)
    response = data.draw(entities(schema))
    frame = encode_response(9, response)
    assert message_check(schema)(frame) == len(frame)
    assert decode_response(schema, frame) == (9, response)


def test_check_source_is_compiled_once() -> None:
    assert message_check(request_schema(3, 12)) is message_check(request_schema(3, 12))


# -- null arrays: refused where Kafka's schema allows none, read as None where it allows one ----

NULL_ARRAYS = null_arrays()


@pytest.mark.parametrize("case", NULL_ARRAYS, ids=lambda c: c.id)
def test_null_array(case: NullArray) -> None:
    request = request_with_null(request_schema(case.api_key, case.version), case.path)
    frame = encode_request(RequestHeader(case.api_key, case.version, 3, "null"), request)[4:]
    if not case.nullable:
        with pytest.raises(MalformedRequest, match=r"non-nullable field .* serialized as null"):
            decode_request(frame)
        return
    _, decoded = decode_request(frame)
    for name in case.path[:-1]:
        decoded = getattr(decoded, name)
        decoded = decoded[0] if isinstance(decoded, tuple) else decoded
    assert getattr(decoded, case.path[-1]) is None


# -- the hand-written readers check counts the same way ------------------------------------------

HAND_READ = {
    # Produce v3: transactional id (null), acks, timeout, then the topic count
    "produce-v3": (
        produce_request.decode_produce_request,
        header(0, 3, False) + struct.pack(">hhi", -1, 1, 1000) + struct.pack(">i", 0x7FFFFFFF),
    ),
    # Produce v9: compact, with tagged-field sections
    "produce-v9": (
        produce_request.decode_produce_request,
        header(0, 9, True) + b"\x00" + struct.pack(">hi", 1, 1000) + b"\xff\xff\xff\xff\x0f",
    ),
    "produce-v9-tags": (
        produce_request.decode_produce_request,
        header(0, 9, True)[:-1] + b"\xff\xff\xff\xff\x0f",
    ),
    # Fetch v0: replica id, max wait, min bytes, then the topic count
    "fetch-v0": (
        fetch_request.decode_fetch_request,
        header(1, 0, False) + struct.pack(">iiii", -1, 100, 1, 0x7FFFFFFF),
    ),
    # Fetch v3, one topic claiming 2^28 partitions of 16 bytes each
    "fetch-v3-partitions": (
        fetch_request.decode_fetch_request,
        header(1, 3, False)
        + struct.pack(">iiiii", -1, 100, 1, 1 << 20, 1)
        + b"\x00\x01t"
        + struct.pack(">i", 1 << 28)
        + b"\x00" * 64,
    ),
    # ListOffsets v0 (old_messages): replica id, then the topic count
    "list-offsets-v0": (
        old_messages.decode_old_request,
        header(2, 0, False) + struct.pack(">ii", -1, 0x7FFFFFFF),
    ),
    # DeleteTopics v0: a string array claiming 2^31-1 names
    "delete-topics-v0": (
        old_messages.decode_old_request,
        header(20, 0, False) + struct.pack(">i", 0x7FFFFFFF) + b"\x00\x01a",
    ),
}


@pytest.mark.parametrize("name", sorted(HAND_READ))
def test_hand_written_reader_refuses_a_count_past_the_frame(name: str) -> None:
    decode, frame = HAND_READ[name]
    with pytest.raises(MalformedRequest, match="claimed with"):
        decode(memoryview(frame))


def test_a_consumer_assignment_with_a_lying_count_is_unreadable() -> None:
    """A member's assignment bytes are the group leader's to choose; the admin client (odradek
    groups describe, the console) reads them with kio."""
    from odradek.client.admin import decode_assignment
    from odradek.client.core import ClientError

    # version 3: assigned_partitions claims 2^31-2 topics
    lying = struct.pack(">hi", 3, 0x7FFFFFFE) + b"\x00" * 8
    with pytest.raises(ClientError, match="claims 2147483646 elements"):
        decode_assignment(lying)
    good = struct.pack(">hi", 3, 1) + b"\x00\x01t" + struct.pack(">ii", 1, 4) + b"\xff\xff\xff\xff"
    assert decode_assignment(good) == (("t", 4),)
