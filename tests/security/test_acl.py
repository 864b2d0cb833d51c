"""Kafka's StandardAuthorizer rules, decided from bindings alone."""

from __future__ import annotations

import pytest

from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclRules,
    InvalidAclError,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_enum,
    parse_super_users,
    validate_binding,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
HOST = "10.0.0.5"


def rules(*bindings: AclBinding, **kwargs: object) -> AclRules:
    acls: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        acls.setdefault(b.pattern, set()).add(b.entry)
    return AclRules(acls, **kwargs)  # type: ignore[arg-type]


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    *,
    rtype: ResourceType = TOPIC,
    pattern: PatternType = LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern),
        AccessControlEntry(principal, host, operation, permission),
    )


def may(r: AclRules, op: AclOperation, name: str, principal: str = "User:alice") -> bool:
    return r.authorize(principal, HOST, op, TOPIC, name)


def test_literal_allow_is_for_that_name_and_principal_only() -> None:
    r = rules(acl("orders", Op.READ))
    assert may(r, Op.READ, "orders")
    assert not may(r, Op.WRITE, "orders")
    assert not may(r, Op.READ, "orders2")  # a literal name is not a prefix
    assert not may(r, Op.READ, "orders", "User:bob")


def test_implied_operations() -> None:
    r = rules(
        acl("w", Op.WRITE),
        acl("d", Op.DELETE),
        acl("a", Op.ALTER),
        acl("c", Op.ALTER_CONFIGS),
        acl("x", Op.CREATE),
        acl("all", Op.ALL),
    )
    for name in ("w", "d", "a", "all"):
        assert may(r, Op.DESCRIBE, name), name
    assert not may(r, Op.DESCRIBE, "x")  # CREATE implies nothing
    assert may(r, Op.DESCRIBE_CONFIGS, "c")
    assert not may(r, Op.DESCRIBE, "c")
    assert may(r, Op.DELETE, "all") and may(r, Op.ALTER_CONFIGS, "all")
    assert not may(r, Op.READ, "w")


def test_deny_wins_over_allow_and_is_not_widened_by_implication() -> None:
    r = rules(acl("t", Op.ALL), acl("t", Op.WRITE, DENY))
    assert not may(r, Op.WRITE, "t")
    assert may(r, Op.READ, "t")
    assert may(r, Op.DESCRIBE, "t")  # a WRITE deny does not deny DESCRIBE
    everyone_denied = rules(acl("t", Op.READ), acl("*", Op.READ, DENY, "User:*"))
    assert not may(everyone_denied, Op.READ, "t")


def test_prefixed_and_wildcard_patterns() -> None:
    r = rules(
        acl("fin-", Op.READ, pattern=PREFIXED),
        acl("*", Op.DESCRIBE, principal="User:bob"),
        acl("fin-secret", Op.READ, DENY),
    )
    assert may(r, Op.READ, "fin-ledger")
    assert not may(r, Op.READ, "fin")
    assert not may(r, Op.READ, "fin-secret")
    assert may(r, Op.DESCRIBE, "anything", "User:bob")
    assert not may(r, Op.READ, "anything", "User:bob")


def test_wildcard_principal_and_hosts() -> None:
    r = rules(acl("t", Op.READ, principal="User:*"), acl("h", Op.READ, host=HOST))
    assert may(r, Op.READ, "t", "User:anyone")
    assert may(r, Op.READ, "h")
    assert not rules(acl("h", Op.READ, host="10.9.9.9")).authorize(
        "User:alice", HOST, Op.READ, TOPIC, "h"
    )


def test_a_host_in_cidr_form_matches_the_addresses_in_its_range() -> None:
    r = rules(
        acl("loopback", Op.READ, host="127.0.0.0/8"),
        acl("v6", Op.READ, host="fd00::/8"),
        acl("loopback", Op.WRITE, host="10.0.0.0/8"),
    )
    for host in ("127.0.0.1", "127.200.3.4", "::ffff:127.0.0.9"):
        assert r.authorize("User:alice", host, Op.READ, TOPIC, "loopback"), host
    assert not r.authorize("User:alice", "128.0.0.1", Op.READ, TOPIC, "loopback")
    assert not r.authorize("User:alice", "127.0.0.1", Op.WRITE, TOPIC, "loopback")
    assert r.authorize("User:alice", "fd12::1", Op.READ, TOPIC, "v6")
    assert not r.authorize("User:alice", "127.0.0.1", Op.READ, TOPIC, "v6")


def test_a_host_range_must_be_well_formed() -> None:
    for bad in ("127.0.0.0/33", "not-an-address/8"):
        with pytest.raises(InvalidAclError):
            validate_binding(acl("t", Op.READ, host=bad))
    validate_binding(acl("t", Op.READ, host="10.1.0.0/16"))


def test_super_users_and_no_acl_found() -> None:
    r = rules(
        acl("guarded", Op.READ, principal="User:bob"),
        super_users=parse_super_users("User:admin; User:broker"),
    )
    assert may(r, Op.DELETE, "guarded", "User:admin") and may(r, Op.READ, "x", "User:broker")
    assert not may(r, Op.READ, "open")  # default: no ACL means no access
    open_r = rules(acl("guarded", Op.READ, principal="User:bob"), allow_if_no_acl=True)
    assert may(open_r, Op.READ, "open")
    assert not may(open_r, Op.READ, "guarded")  # an ACL for someone else applies to it


def test_resource_types_are_separate() -> None:
    r = rules(acl("g", Op.READ, rtype=GROUP), acl("kafka-cluster", Op.ALTER, rtype=CLUSTER))
    assert r.authorize("User:alice", HOST, Op.READ, GROUP, "g")
    assert not may(r, Op.READ, "g")
    assert r.authorize("User:alice", HOST, Op.DESCRIBE, CLUSTER, "kafka-cluster")


def test_authorize_any_resource_of_a_type() -> None:
    assert rules(acl("t", Op.WRITE)).authorize_any("User:alice", HOST, Op.WRITE, TOPIC)
    assert not rules(acl("t", Op.READ)).authorize_any("User:alice", HOST, Op.WRITE, TOPIC)
    assert not rules(
        acl("t-", Op.WRITE, pattern=PREFIXED), acl("t", Op.WRITE, DENY, pattern=PREFIXED)
    ).authorize_any("User:alice", HOST, Op.WRITE, TOPIC)
    assert not rules(acl("t", Op.WRITE), acl("*", Op.WRITE, DENY)).authorize_any(
        "User:alice", HOST, Op.WRITE, TOPIC
    )


def test_filters_as_describe_and_delete_use_them() -> None:
    prefixed = acl("fin-", Op.READ, pattern=PREFIXED)
    literal = acl("fin-ledger", Op.WRITE, DENY, "User:bob")
    wildcard = acl("*", Op.DESCRIBE)
    group = acl("fin-ledger", Op.READ, rtype=GROUP)
    every = [prefixed, literal, wildcard, group]

    def selected(f: AclBindingFilter) -> list[AclBinding]:
        return [b for b in every if f.matches(b)]

    assert selected(AclBindingFilter()) == every
    assert selected(AclBindingFilter(TOPIC, "fin-ledger")) == [literal]
    assert selected(AclBindingFilter(TOPIC, "fin-ledger", PatternType.MATCH)) == [
        prefixed,
        literal,
        wildcard,
    ]
    assert selected(AclBindingFilter(pattern_type=PREFIXED)) == [prefixed]
    assert selected(AclBindingFilter(principal="User:bob")) == [literal]
    assert selected(AclBindingFilter(permission=ALLOW, operation=Op.READ)) == [prefixed, group]
    assert AclBindingFilter(resource_type=ResourceType.UNKNOWN).unknown_field() == "resourceType"


def test_validation_refuses_what_kafka_refuses() -> None:
    validate_binding(acl("t", Op.READ))
    for bad in (
        acl("t", Op.ANY),
        acl("t", Op.READ, AclPermissionType.ANY),
        acl("t", Op.READ, pattern=PatternType.MATCH),
        acl("t", Op.READ, rtype=ResourceType.ANY),
        acl("", Op.READ),
        acl("other", Op.ALTER, rtype=CLUSTER),
        acl("t", Op.READ, principal="alice"),
    ):
        with pytest.raises(InvalidAclError):
            validate_binding(bad)


def test_names_as_kafka_spells_them() -> None:
    assert parse_enum(ResourceType, "TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert parse_enum(ResourceType, "transactional-id") is ResourceType.TRANSACTIONAL_ID
    assert parse_enum(AclOperation, "IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert parse_enum(AclOperation, "DESCRIBE_CONFIGS") is Op.DESCRIBE_CONFIGS
    assert parse_enum(AclPermissionType, "Allow") is ALLOW
    with pytest.raises(ValueError):
        parse_enum(AclOperation, "Fly")
