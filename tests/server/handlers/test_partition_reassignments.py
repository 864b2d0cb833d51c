"""AlterPartitionReassignments, ListPartitionReassignments and ElectLeaders on a broker that is
the whole cluster (no controller: every partition has its one replica here), and the broker
configs IncrementalAlterConfigs may change (the replication throttles)."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.services import BrokerServices

from .conftest import NODE_ID, HandlerCaller

ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_REASSIGNMENTS = 45
LIST_REASSIGNMENTS = 46


def _partitions(response: Any) -> dict[tuple[str, int], int]:
    return {
        (t.name, int(p.partition_index)): int(p.error_code)
        for t in response.responses
        for p in t.partitions
    }


def test_a_lone_broker_only_takes_itself_as_the_replicas(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("t", 1))
    response = handlers.call(
        ALTER_REASSIGNMENTS,
        1,
        allow_replication_factor_change=True,
        topics=[
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "replicas": [NODE_ID]},
                    {"partition_index": 5, "replicas": [NODE_ID]},
                ],
            },
            {"name": "u", "partitions": [{"partition_index": 0, "replicas": None}]},
        ],
    )
    assert response.error_code == ErrorCode.none
    assert _partitions(response) == {
        ("t", 0): ErrorCode.none,
        ("t", 5): ErrorCode.unknown_topic_or_partition,
        ("u", 0): ErrorCode.unknown_topic_or_partition,
    }
    moved = handlers.call(
        ALTER_REASSIGNMENTS,
        0,
        topics=[
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "replicas": [NODE_ID, 2]},
                ],
            }
        ],
    )
    assert _partitions(moved) == {("t", 0): ErrorCode.invalid_replica_assignment}
    cancelled = handlers.call(
        ALTER_REASSIGNMENTS,
        0,
        topics=[{"name": "t", "partitions": [{"partition_index": 0, "replicas": None}]}],
    )
    assert _partitions(cancelled) == {("t", 0): ErrorCode.no_reassignment_in_progress}


def test_a_lone_broker_lists_no_reassignments(handlers: HandlerCaller) -> None:
    response = handlers.call(LIST_REASSIGNMENTS, 0, topics=None)
    assert response.error_code == ErrorCode.none
    assert response.topics == ()


def test_an_unclean_election_on_a_lone_broker_is_never_needed(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("t", 1))
    response = handlers.call(
        ELECT_LEADERS, 2, election_type=1, topic_partitions=[{"topic": "t", "partitions": [0]}]
    )
    assert response.error_code == ErrorCode.none
    (topic,) = response.replica_election_results
    assert [int(p.error_code) for p in topic.partition_result] == [ErrorCode.election_not_needed]
    refused = handlers.call(ELECT_LEADERS, 2, election_type=7, topic_partitions=None)
    assert refused.error_code == ErrorCode.invalid_request


def _alter_broker(handlers: HandlerCaller, name: str, **values: str | None) -> Any:
    configs = [
        {"name": k.replace("_", "."), "config_operation": 0 if v is not None else 1, "value": v}
        for k, v in values.items()
    ]
    response = handlers.call(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        resources=[{"resource_type": 4, "resource_name": name, "configs": configs}],
        validate_only=False,
    )
    (result,) = response.responses
    return result


def test_the_throttle_rates_are_the_dynamic_broker_configs(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    store = services.topics.store
    ok = _alter_broker(handlers, "2", leader_replication_throttled_rate="1000")
    assert ok.error_code == ErrorCode.none
    assert asyncio.run(store.broker_configs(2)) == {"leader.replication.throttled.rate": "1000"}
    static = _alter_broker(handlers, "2", log_retention_ms="5")
    assert static.error_code == ErrorCode.invalid_config
    bad = _alter_broker(handlers, "2", follower_replication_throttled_rate="-5")
    assert bad.error_code == ErrorCode.invalid_config
    default = _alter_broker(handlers, "", leader_replication_throttled_rate="5")
    assert default.error_code == ErrorCode.invalid_request
    cleared = _alter_broker(handlers, "2", leader_replication_throttled_rate=None)
    assert cleared.error_code == ErrorCode.none
    assert asyncio.run(store.broker_configs(2)) == {}


def test_a_dynamic_rate_is_described_as_a_dynamic_broker_config(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    assert _alter_broker(
        handlers, str(NODE_ID), leader_replication_throttled_rate="7"
    ).error_code == (ErrorCode.none)
    response = handlers.call(
        32,
        4,
        resources=[
            {
                "resource_type": 4,
                "resource_name": str(NODE_ID),
                "configuration_keys": [
                    "leader.replication.throttled.rate",
                    "follower.replication.throttled.rate",
                ],
            }
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    (result,) = response.results
    described = {c.name: (c.value, int(c.config_source)) for c in result.configs}
    assert described["leader.replication.throttled.rate"] == ("7", 2)  # DYNAMIC_BROKER_CONFIG
    assert described["follower.replication.throttled.rate"][1] == 5  # DEFAULT_CONFIG
