"""The throttle time written into encoded Produce and Fetch answers, decoded back by kio."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest

from odradek.clock import ManualClock
from odradek.protocol import fetch_response, produce_response
from odradek.protocol.messages import build, encode_response, response_schema
from odradek.quotas.entities import REQUEST_PERCENTAGE, USER
from odradek.quotas.manager import ClientQuotas
from odradek.server.client_throttle import (
    FETCH,
    PRODUCE,
    answer_throttle_time,
    record_time,
    user_of,
    with_throttle_field,
    with_throttle_time,
)
from odradek.server.context import FrameParts
from tests.server.conftest import decode_exactly

PARTITION = {
    "index": 0,
    "error_code": 0,
    "base_offset": 5,
    "log_append_time": -1,
    "log_start_offset": 0,
    "record_errors": [],
    "error_message": None,
}


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_a_produce_answer_carries_the_throttle_time(version: int) -> None:
    if version > produce_response.MAX_VERSION:
        pytest.skip(f"produce v{version} is not written by hand")
    frame = produce_response.encode(version, 7, [("t", [PARTITION])])
    patched = with_throttle_time(PRODUCE, version, frame, 1234)
    assert isinstance(patched, bytes)
    body = decode_exactly(0, version, patched[4:], 7)
    assert body.throttle_time == timedelta(milliseconds=1234)
    assert body.responses[0].partition_responses[0].base_offset == 5


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_fetch_answer_carries_the_throttle_time(version: int) -> None:
    parts, size = fetch_response.encode(version, 9, [], session_id=0)
    patched = with_throttle_time(FETCH, version, FrameParts(list(parts), size), 250)
    assert isinstance(patched, FrameParts)
    frame = b"".join(bytes(p) for p in patched.parts)
    assert len(frame) == size
    assert decode_exactly(1, version, frame[4:], 9).throttle_time == timedelta(milliseconds=250)


def test_version_zero_has_no_throttle_time_to_write() -> None:
    frame = produce_response.encode(0, 7, [("t", [PARTITION])])
    assert with_throttle_time(PRODUCE, 0, frame, 99) is frame


def test_the_user_of_a_principal() -> None:
    assert user_of("User:alice") == "alice"
    assert user_of("User:ANONYMOUS") == "ANONYMOUS"


def test_a_fetch_answer_encoded_whole_carries_the_throttle_time() -> None:
    payload = build(response_schema(1, 16), {"error_code": 0, "session_id": 3, "responses": []})
    frame = bytes(encode_response(11, payload))
    patched = with_throttle_time(FETCH, 16, frame, 40)
    assert isinstance(patched, bytes)
    body = decode_exactly(1, 16, patched[4:], 11)
    assert body.throttle_time == timedelta(milliseconds=40) and body.session_id == 3


def test_handling_time_counts_against_the_request_quota_except_where_kafka_exempts_it() -> None:
    clock = ManualClock(0)
    quotas = ClientQuotas(clock, samples=11, sample_ms=1000)
    quotas.update({((USER, None),): {REQUEST_PERCENTAGE: "10"}})  # 100 ms a second
    second = 1_000_000_000
    consumer = SimpleNamespace(replica_id=-1)
    follower = SimpleNamespace(replica_id=2)
    acks_none = SimpleNamespace(acks=0)
    for api_key, request in ((18, None), (36, None), (FETCH, follower), (PRODUCE, acks_none)):
        assert record_time(quotas, api_key, "User:ann", "app", request, second) == 0
    assert quotas.request.rate("ann", "app") == 0  # nothing was recorded
    assert record_time(quotas, FETCH, "User:ann", "app", consumer, 2 * second) > 0


def test_a_throttle_time_is_set_in_an_answer_that_has_the_field() -> None:
    describe_acls = response_schema(29, 2)
    answer = build(describe_acls, throttle_time=0, error_code=0, resources=[])
    assert answer_throttle_time(answer) == 0
    raised = with_throttle_field(answer, 250)
    assert answer_throttle_time(raised) == 250
    assert with_throttle_field(raised, 100) is raised  # a longer time already there stays
    assert with_throttle_field(b"encoded", 100) == b"encoded"
