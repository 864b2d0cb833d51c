"""Each API's authorisation check, called directly with principals set on the session: what is
refused gets Kafka's error and changes nothing; what an ACL allows works."""

from __future__ import annotations

import asyncio
import dataclasses
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
from tests.server.conftest import (
    CREATE_TOPICS,
    FETCH,
    FETCH_VERSION,
    METADATA,
    PRODUCE,
    PRODUCE_VERSION,
    batch_of,
)

from .conftest import HandlerCaller

Op = AclOperation
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
CLUSTER, TXN = ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
ALICE = Session("10.0.0.2:4000", principal="User:alice")
JOIN_GROUP, OFFSET_COMMIT, INIT_PRODUCER_ID, DELETE_TOPICS, DESCRIBE_CONFIGS = 11, 8, 22, 20, 32
FIND_COORDINATOR, DESCRIBE_CLUSTER, DESCRIBE_GROUPS = 10, 60, 15


@pytest.fixture
def secured(services: BrokerServices) -> BrokerServices:
    authorizer = Authorizer(services.topics.store, frozenset({"User:admin"}))
    for name in ("orders", "fin-ledger", "other"):
        asyncio.run(services.topics.create_topic(name, 1))
    return dataclasses.replace(services, authorizer=authorizer)


@pytest.fixture
def alice(secured: BrokerServices) -> Iterator[HandlerCaller]:
    caller = HandlerCaller(secured, ALICE)
    yield caller
    caller.close()


def grant(
    services: BrokerServices,
    rtype: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = "User:alice",
    host: str = "*",
) -> None:
    assert services.authorizer is not None
    asyncio.run(
        services.authorizer.create(
            [
                AclBinding(
                    ResourcePattern(rtype, name, pattern),
                    AccessControlEntry(principal, host, operation, permission),
                )
            ]
        )
    )


def produce(caller: HandlerCaller, topic: str, transactional_id: str | None = None) -> Any:
    response = caller.call(
        PRODUCE,
        PRODUCE_VERSION,
        acks=1,
        timeout=10_000,
        transactional_id=transactional_id,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch_of(b"v")}]}],
    )
    ((partition,),) = [t.partition_responses for t in response.responses]
    return partition.error_code


def fetch(caller: HandlerCaller, topic: str) -> Any:
    response = caller.call(
        FETCH,
        FETCH_VERSION,
        replica_id=-1,
        max_bytes=1 << 20,
        topics=[
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    )
    ((partition,),) = [t.partitions for t in response.responses]
    return partition


def end_offset(services: BrokerServices, topic: str) -> int:
    partition = services.topics.partition(topic, 0)
    assert partition is not None
    return partition.log.log_end_offset


def test_produce_needs_write_and_a_refused_one_leaves_the_log_unchanged(
    alice: HandlerCaller, secured: BrokerServices
) -> None:
    assert produce(alice, "orders") == ErrorCode.topic_authorization_failed
    assert end_offset(secured, "orders") == 0
    grant(secured, TOPIC, "orders", Op.WRITE)
    assert produce(alice, "orders") == ErrorCode.none
    assert end_offset(secured, "orders") == 1
    # A transactional produce also needs WRITE on its transactional id.
    assert produce(alice, "orders", "tx") == ErrorCode.transactional_id_authorization_failed
    assert end_offset(secured, "orders") == 1
    # A missing topic one may not write is not told apart from an existing one.
    assert produce(alice, "nowhere") == ErrorCode.topic_authorization_failed


def test_fetch_needs_read(alice: HandlerCaller, secured: BrokerServices) -> None:
    produce(alice.with_session(Session("10.0.0.1:1", principal="User:admin")), "orders")
    refused = fetch(alice, "orders")
    assert refused.error_code == ErrorCode.topic_authorization_failed and not refused.records
    grant(secured, TOPIC, "orders", Op.WRITE)  # WRITE does not imply READ
    assert fetch(alice, "orders").error_code == ErrorCode.topic_authorization_failed
    grant(secured, TOPIC, "orders", Op.READ)
    assert fetch(alice, "orders").records


def test_prefixed_deny_and_host_acls(alice: HandlerCaller, secured: BrokerServices) -> None:
    grant(secured, TOPIC, "fin-", Op.WRITE, pattern=PatternType.PREFIXED)
    assert produce(alice, "fin-ledger") == ErrorCode.none
    grant(secured, TOPIC, "fin-ledger", Op.WRITE, AclPermissionType.DENY)
    assert produce(alice, "fin-ledger") == ErrorCode.topic_authorization_failed
    grant(secured, TOPIC, "other", Op.WRITE, host="10.9.9.9")  # not alice's host
    assert produce(alice, "other") == ErrorCode.topic_authorization_failed
    grant(secured, TOPIC, "other", Op.WRITE, host="10.0.0.2")
    assert produce(alice, "other") == ErrorCode.none


def test_metadata_shows_only_described_topics_and_auto_create_needs_create(
    alice: HandlerCaller, secured: BrokerServices
) -> None:
    grant(secured, TOPIC, "orders", Op.READ)  # implies DESCRIBE
    listed = alice.call(METADATA, 12, topics=None).topics
    assert [t.name for t in listed] == ["orders"]
    named = alice.call(METADATA, 12, topics=[{"name": "other"}, {"name": "orders"}]).topics
    assert [t.error_code for t in named] == [ErrorCode.topic_authorization_failed, ErrorCode.none]
    grant(secured, TOPIC, "*", Op.DESCRIBE)
    (fresh,) = alice.call(
        METADATA, 12, topics=[{"name": "fresh"}], allow_auto_topic_creation=True
    ).topics
    assert fresh.error_code == ErrorCode.topic_authorization_failed
    assert secured.topics.topic("fresh") is None
    grant(secured, CLUSTER, "kafka-cluster", Op.CREATE)
    alice.call(METADATA, 12, topics=[{"name": "fresh"}], allow_auto_topic_creation=True)
    assert secured.topics.topic("fresh") is not None


def test_topic_admin_apis(alice: HandlerCaller, secured: BrokerServices) -> None:
    def create(name: str) -> Any:
        topic = {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": []}
        (result,) = alice.call(CREATE_TOPICS, 7, timeout=10_000, topics=[topic]).topics
        return result.error_code

    assert create("mine") == ErrorCode.topic_authorization_failed
    grant(secured, TOPIC, "mine", Op.CREATE)
    assert create("mine") == ErrorCode.none

    def delete(name: str) -> Any:
        (result,) = alice.call(DELETE_TOPICS, 5, timeout_ms=10_000, topic_names=[name]).responses
        return result.error_code

    assert delete("orders") == ErrorCode.topic_authorization_failed
    assert secured.topics.topic("orders") is not None
    grant(secured, TOPIC, "orders", Op.DELETE)
    assert delete("orders") == ErrorCode.none

    def describe_configs(kind: int, name: str) -> Any:
        resource = {"resource_type": kind, "resource_name": name, "configuration_keys": None}
        (result,) = alice.call(DESCRIBE_CONFIGS, 4, resources=[resource]).results
        return result.error_code

    assert describe_configs(2, "other") == ErrorCode.topic_authorization_failed
    assert describe_configs(4, "1") == ErrorCode.cluster_authorization_failed
    grant(secured, TOPIC, "other", Op.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    assert describe_configs(2, "other") == ErrorCode.none


def test_groups_need_group_acls(alice: HandlerCaller, secured: BrokerServices) -> None:
    def join(version: int = 9) -> Any:
        return alice.call(
            JOIN_GROUP,
            version,
            group_id="g",
            session_timeout=6000,
            rebalance_timeout=6000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b""}],
            reason=None,
        ).error_code

    for version in (0, 6, 9):
        assert join(version) == ErrorCode.group_authorization_failed
    found = alice.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=["g"]).coordinators
    assert found[0].error_code == ErrorCode.group_authorization_failed

    def commit() -> Any:
        response = alice.call(
            OFFSET_COMMIT,
            8,
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                {
                    "name": "orders",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        )
        ((partition,),) = [t.partitions for t in response.topics]
        return partition.error_code

    assert commit() == ErrorCode.group_authorization_failed
    grant(secured, GROUP, "g", Op.READ)
    assert join() == ErrorCode.member_id_required  # past the check: KIP-394's first round
    assert commit() == ErrorCode.topic_authorization_failed  # the topic needs READ too
    grant(secured, TOPIC, "orders", Op.READ)
    assert commit() == ErrorCode.none


def test_init_producer_id(alice: HandlerCaller, secured: BrokerServices) -> None:
    def init(transactional_id: str | None) -> Any:
        return alice.call(
            INIT_PRODUCER_ID,
            5,
            transactional_id=transactional_id,
            transaction_timeout=60_000,
            producer_id=-1,
            producer_epoch=-1,
        )

    refused = init(None)
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert refused.producer_id == -1
    grant(secured, TOPIC, "orders", Op.WRITE)  # WRITE on any topic is enough
    assert init(None).error_code == ErrorCode.none
    assert init("tx").error_code == ErrorCode.transactional_id_authorization_failed


def test_cluster_apis(alice: HandlerCaller, secured: BrokerServices) -> None:
    refused = alice.call(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=False)
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    grant(secured, CLUSTER, "kafka-cluster", Op.DESCRIBE)
    assert alice.call(DESCRIBE_CLUSTER, 1).error_code == ErrorCode.none


def bits(*operations: AclOperation) -> int:
    return sum(1 << op.value for op in operations)


def test_authorized_operations_are_answered_when_asked(
    alice: HandlerCaller, secured: BrokerServices
) -> None:
    grant(secured, TOPIC, "orders", Op.READ)
    grant(secured, TOPIC, "orders", Op.DESCRIBE_CONFIGS)
    grant(secured, CLUSTER, "kafka-cluster", Op.DESCRIBE)
    asked = alice.call(
        METADATA,
        10,
        topics=[{"name": "orders"}],
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    # READ implies DESCRIBE; DESCRIBE_CONFIGS as granted; nothing else.
    assert asked.topics[0].topic_authorized_operations == bits(
        Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS
    )
    assert asked.cluster_authorized_operations == bits(Op.DESCRIBE)
    not_asked = alice.call(METADATA, 10, topics=[{"name": "orders"}])
    assert not_asked.topics[0].topic_authorized_operations == -(2**31)
    assert not_asked.cluster_authorized_operations == -(2**31)
    cluster = alice.call(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True)
    assert cluster.cluster_authorized_operations == bits(Op.DESCRIBE)
    # The super user may do all a topic and the cluster have.
    admin = alice.with_session(Session("10.0.0.3:4000", principal="User:admin"))
    everything = admin.call(
        DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True
    ).cluster_authorized_operations
    assert everything == bits(
        Op.CREATE,
        Op.CLUSTER_ACTION,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
        Op.IDEMPOTENT_WRITE,
        Op.ALTER,
        Op.DESCRIBE,
    )


def test_a_groups_authorized_operations_are_answered_when_asked(
    alice: HandlerCaller, secured: BrokerServices
) -> None:
    grant(secured, GROUP, "readers", Op.READ)
    (group,) = alice.call(
        DESCRIBE_GROUPS, 5, groups=["readers"], include_authorized_operations=True
    ).groups
    assert group.error_code == ErrorCode.none
    assert group.authorized_operations == bits(Op.READ, Op.DESCRIBE)
    (unasked,) = alice.call(
        DESCRIBE_GROUPS, 5, groups=["readers"], include_authorized_operations=False
    ).groups
    assert unasked.authorized_operations == -(2**31)
