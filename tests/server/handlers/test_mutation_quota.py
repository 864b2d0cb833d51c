"""KIP-599's controller mutation quota as CreateTopics, CreatePartitions and DeleteTopics apply
it, called as handlers on a manual clock: strict for the versions that know the error, only a
throttle time for the older ones, nothing counted for validate-only requests."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from odradek.clock import ManualClock
from odradek.protocol.errors import ErrorCode
from odradek.quotas.entities import CONTROLLER_MUTATION_RATE, USER
from odradek.quotas.manager import ClientQuotas
from odradek.server.services import BrokerServices
from tests.server.handlers.conftest import HandlerCaller

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
ZERO, MS = timedelta(0), timedelta(milliseconds=1)
# Partitions per second, for every user: ten partitions (a topic here) take a user over it, two
# do not (a rate is measured over the 11 one-second samples).
RATE = 0.5


@pytest.fixture
def quoted(services: BrokerServices, clock: ManualClock) -> Iterator[HandlerCaller]:
    quotas = ClientQuotas(clock, samples=11, sample_ms=1000)
    quotas.update({((USER, None),): {CONTROLLER_MUTATION_RATE: str(RATE)}})
    caller = HandlerCaller(dataclasses.replace(services, quotas=quotas))
    yield caller
    caller.close()


def create(handlers: HandlerCaller, version: int, *names: str, validate_only: bool = False) -> Any:
    return handlers.call(
        CREATE_TOPICS,
        version,
        topics=[
            {
                "name": name,
                "num_partitions": 10,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for name in names
        ],
        timeout_ms=5000,
        validate_only=validate_only,
    )


def test_strict_versions_refuse_topics_while_over_the_quota(
    quoted: HandlerCaller, clock: ManualClock
) -> None:
    # A quota not yet exceeded takes a whole topic, even one that goes past it.
    first = create(quoted, 7, "first")
    assert [t.error_code for t in first.topics] == [ErrorCode.none]
    assert first.throttle_time > ZERO
    second = create(quoted, 7, "second", "third")
    assert [t.error_code for t in second.topics] == [ErrorCode.throttling_quota_exceeded] * 2
    assert second.topics[0].error_message == "The throttling quota has been exceeded."
    assert second.throttle_time > ZERO
    assert quoted.services.topics.topic("second") is None
    # Validating counts nothing and is not refused.
    checked = create(quoted, 7, "checked", validate_only=True)
    assert [t.error_code for t in checked.topics] == [ErrorCode.none]

    clock.advance(20_000)  # the window has forgotten the first topic
    again = create(quoted, 7, "second")
    assert [t.error_code for t in again.topics] == [ErrorCode.none]


def test_older_versions_are_only_throttled(quoted: HandlerCaller) -> None:
    for name in ("old-1", "old-2"):
        answer = create(quoted, 5, name)
        assert [t.error_code for t in answer.topics] == [ErrorCode.none]
        assert answer.throttle_time > ZERO
    assert quoted.services.topics.topic("old-2") is not None


def test_added_and_deleted_partitions_count(quoted: HandlerCaller, clock: ManualClock) -> None:
    assert create(quoted, 5, "grown").throttle_time > ZERO  # permissive: 10 partitions counted
    grown = quoted.call(
        CREATE_PARTITIONS,
        3,
        topics=[{"name": "grown", "count": 12, "assignments": None}],
        timeout_ms=5000,
        validate_only=False,
    )
    assert [r.error_code for r in grown.results] == [ErrorCode.throttling_quota_exceeded]
    deleted = quoted.call(DELETE_TOPICS, 5, topic_names=["grown"], timeout_ms=5000)
    assert [r.error_code for r in deleted.responses] == [ErrorCode.throttling_quota_exceeded]
    assert quoted.services.topics.topic("grown") is not None

    clock.advance(20_000)  # the window has forgotten the topic
    grown = quoted.call(
        CREATE_PARTITIONS,
        3,
        topics=[{"name": "grown", "count": 12, "assignments": None}],
        timeout_ms=5000,
        validate_only=False,
    )
    assert [r.error_code for r in grown.results] == [ErrorCode.none]
    assert grown.throttle_time == ZERO  # two partitions in a window of their own
    clock.advance(20_000)
    deleted = quoted.call(DELETE_TOPICS, 5, topic_names=["grown"], timeout_ms=5000)
    assert [r.error_code for r in deleted.responses] == [ErrorCode.none]
    assert deleted.throttle_time > ZERO  # twelve partitions
