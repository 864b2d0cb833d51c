"""CreateAcls, DescribeAcls and DeleteAcls called directly, by a super user and by others."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation, AclPermissionType, ResourceType
from odradek.server.authorizer import Authorizer
from odradek.server.services import BrokerServices, Session

from .conftest import HandlerCaller

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ADMIN = Session("10.0.0.1:4000", principal="User:admin")
ALICE = Session("10.0.0.2:4000", principal="User:alice")
ANY, LITERAL, PREFIXED, MATCH = 1, 3, 4, 2
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


@pytest.fixture
def secured(services: BrokerServices) -> BrokerServices:
    authorizer = Authorizer(services.topics.store, frozenset({"User:admin"}))
    return dataclasses.replace(services, authorizer=authorizer)


@pytest.fixture
def admin(secured: BrokerServices) -> Iterator[HandlerCaller]:
    caller = HandlerCaller(secured, ADMIN)
    yield caller
    caller.close()


def creation(
    name: str,
    operation: int = READ,
    permission: int = ALLOW,
    principal: str = "User:alice",
    rtype: int = TOPIC,
    pattern: int = LITERAL,
) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": "*",
        "operation": operation,
        "permission_type": permission,
    }


def selection(
    rtype: int = ANY, name: str | None = None, pattern: int = ANY, principal: str | None = None
) -> dict[str, Any]:
    return {
        "resource_type_filter": rtype,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }


def described(caller: HandlerCaller, version: int = 3, **fields: Any) -> list[tuple[Any, ...]]:
    response = caller.call(DESCRIBE_ACLS, version, **(selection() | fields))
    assert response.error_code == ErrorCode.none, response
    return sorted(
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.operation)
        for r in response.resources
        for a in r.acls
    )


def test_without_an_authorizer_acls_are_security_disabled(handlers: HandlerCaller) -> None:
    (result,) = handlers.call(CREATE_ACLS, 3, creations=[creation("t")]).results
    assert result.error_code == ErrorCode.security_disabled
    assert handlers.call(DESCRIBE_ACLS, 3, **selection()).error_code == ErrorCode.security_disabled
    (deleted,) = handlers.call(DELETE_ACLS, 3, filters=[selection()]).filter_results
    assert deleted.error_code == ErrorCode.security_disabled


def test_created_acls_are_described_by_filters_and_stored(
    admin: HandlerCaller, secured: BrokerServices
) -> None:
    results = admin.call(
        CREATE_ACLS,
        3,
        creations=[
            creation("orders"),
            creation("fin-", WRITE, DENY, "User:bob", pattern=PREFIXED),
            creation("g", rtype=GROUP),
            creation("bad", pattern=MATCH),  # only LITERAL and PREFIXED are stored
            creation("x", principal="nobody"),
        ],
    ).results
    assert [r.error_code for r in results] == [ErrorCode.none] * 3 + [ErrorCode.invalid_request] * 2
    assert results[3].error_message == "Invalid patternType MATCH"
    assert described(admin) == [
        (TOPIC, "fin-", PREFIXED, "User:bob", WRITE),
        (TOPIC, "orders", LITERAL, "User:alice", READ),
        (GROUP, "g", LITERAL, "User:alice", READ),
    ]
    assert described(admin, 1, resource_type_filter=TOPIC, pattern_type_filter=LITERAL) == [
        (TOPIC, "orders", LITERAL, "User:alice", READ)
    ]
    # MATCH: every ACL that applies to the named topic.
    assert described(
        admin, resource_type_filter=TOPIC, resource_name_filter="fin-x", pattern_type_filter=MATCH
    ) == [(TOPIC, "fin-", PREFIXED, "User:bob", WRITE)]
    assert described(admin, principal_filter="User:bob") == [
        (TOPIC, "fin-", PREFIXED, "User:bob", WRITE)
    ]
    assert len(secured.topics.store.acls) == 3
    bad = admin.call(DESCRIBE_ACLS, 3, **(selection() | {"operation": 0}))
    assert bad.error_code == ErrorCode.invalid_request


def test_delete_reports_what_each_filter_removed(admin: HandlerCaller) -> None:
    admin.call(
        CREATE_ACLS,
        2,
        creations=[creation("a"), creation("b"), creation("b", WRITE), creation("g", rtype=GROUP)],
    )
    first, second, invalid = admin.call(
        DELETE_ACLS,
        3,
        filters=[
            selection(TOPIC, "b", LITERAL),
            selection(TOPIC),  # "b" is the first filter's: only "a" is left to it
            selection() | {"permission_type": 0},
        ],
    ).filter_results
    assert sorted((m.resource_name, m.operation) for m in first.matching_acls) == [
        ("b", READ),
        ("b", WRITE),
    ]
    assert [m.resource_name for m in second.matching_acls] == ["a"]
    assert invalid.error_code == ErrorCode.invalid_request
    assert described(admin) == [(GROUP, "g", LITERAL, "User:alice", READ)]


def test_changing_or_seeing_acls_needs_alter_or_describe_on_the_cluster(
    admin: HandlerCaller, secured: BrokerServices
) -> None:
    alice = admin.with_session(ALICE)
    (refused,) = alice.call(CREATE_ACLS, 3, creations=[creation("t")]).results
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert not secured.topics.store.acls
    denied = alice.call(DESCRIBE_ACLS, 3, **selection())
    assert denied.error_code == ErrorCode.cluster_authorization_failed
    # DESCRIBE lets her see them; ALTER (which implies DESCRIBE) lets her change them.
    admin.call(
        CREATE_ACLS, 3, creations=[creation("kafka-cluster", AclOperation.DESCRIBE, rtype=4)]
    )
    assert described(alice) == [(4, "kafka-cluster", LITERAL, "User:alice", 8)]
    (still,) = alice.call(DELETE_ACLS, 3, filters=[selection()]).filter_results
    assert still.error_code == ErrorCode.cluster_authorization_failed
    admin.call(CREATE_ACLS, 3, creations=[creation("kafka-cluster", AclOperation.ALTER, rtype=4)])
    (removed,) = alice.call(DELETE_ACLS, 3, filters=[selection(rtype=4)]).filter_results
    assert removed.error_code == ErrorCode.none and len(removed.matching_acls) == 2
