"""CreateTopics checks replication factors and assignments against the live brokers."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices
from tests.server.conftest import CREATE_TOPICS

from .conftest import NODE_ID, HandlerCaller


def _create(handlers: HandlerCaller, name: str, **fields: Any) -> Any:
    topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": []}
    topic.update(fields)
    (result,) = handlers.call(CREATE_TOPICS, 5, timeout=10_000, topics=[topic]).topics
    return result


def test_a_topic_is_created(handlers: HandlerCaller, services: BrokerServices) -> None:
    result = _create(handlers, "made", num_partitions=2)
    assert result.error_code == ErrorCode.none
    assert (result.num_partitions, result.replication_factor) == (2, 1)
    assert services.topics.partition("made", 1) is not None
    defaulted = _create(handlers, "defaulted", replication_factor=-1)  # default.replication.factor
    assert (defaulted.error_code, defaulted.replication_factor) == (ErrorCode.none, 1)


def test_replication_factor_beyond_the_live_brokers_is_refused(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    result = _create(handlers, "doubled", replication_factor=2)
    assert result.error_code == ErrorCode.invalid_replication_factor
    assert result.error_message == "replication factor 2 is larger than the 1 broker available"
    assert services.topics.topic("doubled") is None


def test_assignments_must_name_live_brokers(handlers: HandlerCaller) -> None:
    def assigned(name: str, *replicas: int) -> Any:
        return _create(
            handlers,
            name,
            num_partitions=-1,
            replication_factor=-1,
            assignments=[{"partition_index": 0, "broker_ids": list(replicas)}],
        )

    elsewhere = assigned("elsewhere", 7)
    assert elsewhere.error_code == ErrorCode.invalid_replica_assignment
    assert elsewhere.error_message == "Unknown broker(s) in replica assignment: 7."
    assert assigned("twice", NODE_ID, NODE_ID).error_code == ErrorCode.invalid_replica_assignment
    assert assigned("here", NODE_ID).error_code == ErrorCode.none


def test_logs_that_cannot_be_created_answer_kafka_storage_error(
    handlers: HandlerCaller, services: BrokerServices, monkeypatch: pytest.MonkeyPatch
) -> None:
    def out_of_descriptors(*_: object, **__: object) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(services.logs, "prepare", out_of_descriptors)
    result = _create(handlers, "starved", num_partitions=3)
    assert result.error_code == ErrorCode.kafka_storage_error
    assert "Too many open files" in result.error_message
