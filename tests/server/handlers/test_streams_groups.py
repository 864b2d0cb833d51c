"""The streams group handlers (StreamsGroupHeartbeat 88, StreamsGroupDescribe 89) and what the
other group APIs answer for a streams group: bytes a client would receive, decoded. ACLs as
Kafka checks them: READ on the group, DESCRIBE on the topology's topics, CREATE for the internal
topics the broker makes."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.server.authorizer import Authorizer
from odradek.server.services import BrokerServices, Session

from .conftest import HandlerCaller

HEARTBEAT, DESCRIBE = 88, 89
LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_COMMIT, OFFSET_FETCH = 16, 15, 8, 9
MS = datetime.timedelta(milliseconds=1)
MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS = 1, 3
ALICE = Session("10.0.0.2:4000", principal="User:alice")

TOPOLOGY = {
    "epoch": 1,
    "subtopologies": [
        {
            "subtopology_id": "0",
            "source_topics": ["lines"],
            "repartition_sink_topics": ["app-rep"],
            "state_changelog_topics": [],
            "repartition_source_topics": [],
            "copartition_groups": [],
        },
        {
            "subtopology_id": "1",
            "source_topics": [],
            "state_changelog_topics": [
                {
                    "name": "app-changelog",
                    "partitions": 0,
                    "replication_factor": 1,
                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}],
                }
            ],
            "repartition_sink_topics": [],
            "repartition_source_topics": [
                {"name": "app-rep", "partitions": 0, "replication_factor": 1, "topic_configs": []}
            ],
            "copartition_groups": [],
        },
    ],
}


def heartbeat(
    handlers: HandlerCaller,
    member: str,
    epoch: int,
    active: list[dict[str, Any]] | None = None,
    group: str = "app",
    instance: str | None = None,
    process: str | None = None,
) -> Any:
    joining = epoch == 0
    return handlers.call(
        HEARTBEAT,
        0,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        instance_id=instance,
        endpoint_information_epoch=0,
        rebalance_timeout=60_000 * MS if joining else -1 * MS,
        topology=TOPOLOGY if joining else None,
        process_id=(process or f"process-{member}") if joining else None,
        active_tasks=[] if joining else active,
        standby_tasks=[] if joining else None,
        warmup_tasks=[] if joining else None,
        client_tags=[] if joining else None,
        task_offsets=None,
        task_end_offsets=None,
    )


def tasks(listed: Any) -> set[tuple[str, int]]:
    return {(t.subtopology_id, int(p)) for t in listed for p in t.partitions}


def test_a_member_joins_the_internal_topics_are_made_and_it_gets_every_task(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    first = heartbeat(handlers, "m1", 0)
    assert first.error_code == ErrorCode.none
    assert [s.status_code for s in first.status] == [MISSING_SOURCE_TOPICS]
    assert first.heartbeat_interval == 5_000 * MS
    assert tasks(first.active_tasks) == set()
    asyncio.run(services.topics.create_topic("lines", 3, 1))
    second = heartbeat(handlers, "m1", first.member_epoch, [])
    assert [s.status_code for s in second.status] == [MISSING_INTERNAL_TOPICS]
    changelog = services.topics.topic("app-changelog")
    assert changelog is not None and changelog.partitions == 3
    assert services.topics.topic("app-rep") is not None
    third = heartbeat(handlers, "m1", second.member_epoch, [])
    assert list(third.status) == []
    assert tasks(third.active_tasks) == {(s, p) for s in "01" for p in range(3)}

    (described,) = handlers.call(DESCRIBE, 0, group_ids=["app", "nope"]).groups[:1]
    assert described.error_code == ErrorCode.none and described.group_state == "Stable"
    assert described.topology.epoch == 1
    (member,) = described.members
    assert member.process_id == "process-m1"
    assert tasks(member.assignment.active_tasks) == tasks(third.active_tasks)
    missing = handlers.call(DESCRIBE, 0, group_ids=["nope"]).groups[0]
    assert missing.error_code == ErrorCode.group_id_not_found

    listed = handlers.call(LIST_GROUPS, 5, states_filter=[], types_filter=["streams"]).groups
    assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [
        ("app", "streams", "Stable")
    ]
    classic = handlers.call(DESCRIBE_GROUPS, 6, groups=["app"]).groups[0]
    assert classic.error_code == ErrorCode.group_id_not_found

    def commit(epoch: int) -> ErrorCode:
        response = handlers.call(
            OFFSET_COMMIT,
            9,
            group_id="app",
            generation_id_or_member_epoch=epoch,
            member_id="m1",
            topics=[
                {
                    "name": "lines",
                    "partitions": [{"partition_index": 0, "committed_offset": 5}],
                }
            ],
        )
        return ErrorCode(response.topics[0].partitions[0].error_code)

    assert commit(third.member_epoch) == ErrorCode.none
    assert commit(third.member_epoch + 1) == ErrorCode.stale_member_epoch
    left = heartbeat(handlers, "m1", -1)
    assert left.error_code == ErrorCode.none and left.member_epoch == -1


def test_a_static_member_leaves_for_now_and_its_instance_takes_its_tasks_back(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("lines", 2, 1))
    heartbeat(handlers, "m1", 0, instance="i1")  # the internal topics are made
    joined = heartbeat(handlers, "m1", 1, [], instance="i1")
    held = tasks(joined.active_tasks)
    assert held == {(s, p) for s in "01" for p in range(2)}
    twin = heartbeat(handlers, "m9", 0, instance="i1")
    assert (twin.error_code, twin.member_epoch) == (ErrorCode.unreleased_instance_id, -1)
    left = heartbeat(handlers, "m1", -2, instance="i1")
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -2)
    (described,) = handlers.call(DESCRIBE, 0, group_ids=["app"]).groups
    (member,) = described.members
    assert (member.member_id, member.instance_id, member.member_epoch) == ("m1", "i1", -2)
    epoch = described.group_epoch
    # The instance restarted: a new member id, the same process id (Kafka Streams keeps it in
    # its state directory).
    back = heartbeat(handlers, "m2", 0, instance="i1", process="process-m1")
    assert back.error_code == ErrorCode.none and back.member_epoch == joined.member_epoch
    assert tasks(back.active_tasks) == held
    (described,) = handlers.call(DESCRIBE, 0, group_ids=["app"]).groups
    assert described.group_epoch == epoch and described.group_state == "Stable"
    assert [m.member_id for m in described.members] == ["m2"]
    stale = heartbeat(handlers, "m1", joined.member_epoch, [], instance="i1")
    assert stale.error_code == ErrorCode.fenced_instance_id


@pytest.fixture
def secured(services: BrokerServices) -> BrokerServices:
    authorizer = Authorizer(services.topics.store, frozenset({"User:admin"}))
    asyncio.run(services.topics.create_topic("lines", 2, 1))
    return dataclasses.replace(services, authorizer=authorizer)


@pytest.fixture
def alice(secured: BrokerServices) -> Iterator[HandlerCaller]:
    caller = HandlerCaller(secured, ALICE)
    yield caller
    caller.close()


def grant(services: BrokerServices, rtype: ResourceType, name: str, op: AclOperation) -> None:
    assert services.authorizer is not None
    asyncio.run(
        services.authorizer.create(
            [
                AclBinding(
                    ResourcePattern(rtype, name, PatternType.LITERAL),
                    AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW),
                )
            ]
        )
    )


def test_acls(alice: HandlerCaller, secured: BrokerServices) -> None:
    assert heartbeat(alice, "m1", 0).error_code == ErrorCode.group_authorization_failed
    grant(secured, ResourceType.GROUP, "app", AclOperation.READ)
    refused = heartbeat(alice, "m1", 0)
    assert refused.error_code == ErrorCode.topic_authorization_failed
    for topic in ("lines", "app-rep", "app-changelog"):
        grant(secured, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    joined = heartbeat(alice, "m1", 0)
    assert joined.error_code == ErrorCode.none
    details = [s.status_detail for s in joined.status if s.status_code == MISSING_INTERNAL_TOPICS]
    assert any("Unauthorized to CREATE" in d for d in details)
    assert secured.topics.topic("app-changelog") is None
    for topic in ("app-rep", "app-changelog"):
        grant(secured, ResourceType.TOPIC, topic, AclOperation.CREATE)
    again = heartbeat(alice, "m1", joined.member_epoch, [])
    assert not any("Unauthorized" in s.status_detail for s in again.status)
    assert secured.topics.topic("app-changelog") is not None
    # READ on the group lets alice describe it (as Kafka: READ implies DESCRIBE); bob may not.
    assert alice.call(DESCRIBE, 0, group_ids=["app"]).groups[0].error_code == ErrorCode.none
    bob = alice.with_session(Session("10.0.0.3:4000", principal="User:bob"))
    described = bob.call(DESCRIBE, 0, group_ids=["app"]).groups[0]
    assert described.error_code == ErrorCode.group_authorization_failed


def test_streams_group_configs(handlers: HandlerCaller, services: BrokerServices) -> None:
    """streams.* group configs (resource type GROUP): described with the broker's values as
    defaults, altered, and taken by the group's next heartbeat."""
    describe_configs, incremental_alter_configs, group_resource = 32, 44, 32

    def described() -> dict[str, tuple[str, int]]:
        (result,) = handlers.call(
            describe_configs,
            4,
            resources=[
                {
                    "resource_type": group_resource,
                    "resource_name": "app",
                    "configuration_keys": None,
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        ).results
        return {c.name: (c.value, int(c.config_source)) for c in result.configs}

    assert described()["streams.num.standby.replicas"] == ("0", 5)
    assert described()["streams.session.timeout.ms"] == ("45000", 5)
    assert described()["streams.num.warmup.replicas"] == ("2", 5)
    assert described()["streams.acceptable.recovery.lag"] == ("10000", 5)
    assert described()["streams.task.offset.interval.ms"] == ("60000", 5)
    (altered,) = handlers.call(
        incremental_alter_configs,
        1,
        resources=[
            {
                "resource_type": group_resource,
                "resource_name": "app",
                "configs": [
                    {
                        "name": "streams.heartbeat.interval.ms",
                        "config_operation": 0,
                        "value": "900",
                    },
                    {
                        "name": "streams.acceptable.recovery.lag",
                        "config_operation": 0,
                        "value": "7",
                    },
                    {
                        "name": "streams.task.offset.interval.ms",
                        "config_operation": 0,
                        "value": "20000",
                    },
                ],
            }
        ],
        validate_only=False,
    ).responses
    assert altered.error_code == ErrorCode.none
    assert described()["streams.heartbeat.interval.ms"] == ("900", 8)
    asyncio.run(services.topics.create_topic("lines", 1, 1))
    joined = heartbeat(handlers, "m1", 0)
    assert joined.heartbeat_interval == 900 * MS
    assert (joined.acceptable_recovery_lag, joined.task_offset_interval) == (7, 20_000 * MS)
