"""DescribeTopicPartitions pages through partitions with its cursor and authorizes topics as
Metadata does."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.server.authorizer import Authorizer
from odradek.server.services import BrokerServices, Session

from .conftest import NODE_ID, HandlerCaller

DESCRIBE_TOPIC_PARTITIONS = 75


def describe(handlers: HandlerCaller, *names: str, limit: int = 2000, cursor: Any = None) -> Any:
    return handlers.call(
        DESCRIBE_TOPIC_PARTITIONS,
        0,
        topics=[{"name": n} for n in names],
        response_partition_limit=limit,
        cursor=cursor,
    )


def pages(handlers: HandlerCaller, *names: str, limit: int) -> list[list[tuple[str, int]]]:
    """Every page, following the cursor: (topic, partition) of each partition of each page."""
    found = []
    cursor = None
    while True:
        response = describe(handlers, *names, limit=limit, cursor=cursor)
        found.append([(t.name, p.partition_index) for t in response.topics for p in t.partitions])
        if response.next_cursor is None:
            return found
        cursor = {
            "topic_name": response.next_cursor.topic_name,
            "partition_index": response.next_cursor.partition_index,
        }


def test_all_topics_in_name_order_with_their_partitions(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("b", 2))
    asyncio.run(services.topics.create_topic("a", 1))
    response = describe(handlers)
    assert [t.name for t in response.topics] == ["a", "b"]
    a, _ = response.topics
    assert a.topic_id == services.topics.topic("a").topic_id
    (p,) = a.partitions
    assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) == (
        ErrorCode.none,
        NODE_ID,
        (NODE_ID,),
        (NODE_ID,),
    )
    assert p.eligible_leader_replicas == ()
    assert a.topic_authorized_operations != -(2**31)
    assert response.next_cursor is None


def test_the_cursor_pages_through_every_partition_once(
    handlers: HandlerCaller, services: BrokerServices
) -> None:
    asyncio.run(services.topics.create_topic("x", 5))
    asyncio.run(services.topics.create_topic("y", 3))
    every = [("x", p) for p in range(5)] + [("y", p) for p in range(3)]
    assert pages(handlers, limit=3) == [every[0:3], every[3:6], every[6:8]]
    # a page ending where a topic ends points at the next topic's first partition
    assert pages(handlers, "x", "y", limit=5) == [every[0:5], every[5:8]]
    assert pages(handlers, "y", limit=1) == [[("y", 0)], [("y", 1)], [("y", 2)]]


def test_unknown_and_bad_cursors(handlers: HandlerCaller, services: BrokerServices) -> None:
    asyncio.run(services.topics.create_topic("known", 1))
    response = describe(handlers, "known", "missing")
    assert {t.name: t.error_code for t in response.topics} == {
        "known": ErrorCode.none,
        "missing": ErrorCode.unknown_topic_or_partition,
    }
    stray = describe(handlers, "known", cursor={"topic_name": "other", "partition_index": 0})
    assert [t.error_code for t in stray.topics] == [ErrorCode.invalid_request]


def test_topics_are_authorized_like_metadata(services: BrokerServices) -> None:
    asyncio.run(services.topics.create_topic("open", 1))
    asyncio.run(services.topics.create_topic("secret", 1))
    asyncio.run(
        services.topics.store.change_acls(
            ResourcePattern(ResourceType.TOPIC, "open", PatternType.LITERAL),
            add=[
                AccessControlEntry(
                    "User:alice", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW
                )
            ],
        )
    )
    authorizer = Authorizer(services.topics.store, frozenset())
    alice = HandlerCaller(
        dataclasses.replace(services, authorizer=authorizer),
        Session("10.0.0.2:4000", principal="User:alice"),
    )
    try:
        assert [t.name for t in describe(alice).topics] == ["open"]
        named = describe(alice, "open", "secret")
    finally:
        alice.close()
    assert {t.name: t.error_code for t in named.topics} == {
        "open": ErrorCode.none,
        "secret": ErrorCode.topic_authorization_failed,
    }
