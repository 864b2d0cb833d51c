"""ACL bindings and Kafka's StandardAuthorizer rules for them: pure data and functions, no I/O.

A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an access control entry
(principal, host, operation, ALLOW or DENY). :class:`AclRules` answers whether a principal on a
host may perform an operation on a resource, as Kafka's StandardAuthorizer does:

- a super user may do anything;
- the ACLs that apply to a resource are those on its exact name, on the LITERAL wildcard ``*``
  and PREFIXED ones whose name starts the resource's name;
- of those, an entry matches when its principal is the caller's or ``User:*``, its host the
  caller's, ``*``, or an address range in CIDR form holding the caller's (KIP-1276, Kafka 4.3:
  ``127.0.0.0/8`` matches 127.0.0.1), and its operation the one asked, ``ALL``, or (for ALLOW
  entries) one that implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS
  implies DESCRIBE_CONFIGS;
- a matching DENY refuses whatever ALLOW there is; otherwise a matching ALLOW permits;
- when no ACL at all applies to the resource (for anyone), ``allow.everyone.if.no.acl.found``
  decides.

The numeric values of the enums are Kafka's wire values; :func:`zk_name` gives the names Kafka
writes in ZooKeeper's ``/kafka-acl`` znodes.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

E = TypeVar("E", bound="IntEnum")


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def zk_name(member: IntEnum) -> str:
    """Kafka's SecurityUtils name of a resource type, operation or permission, as its ZooKeeper
    znodes and tools spell it: ``Topic``, ``TransactionalId``, ``ClusterAction``, ``Allow``."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def parse_enum(enum: type[E], text: str) -> E:
    """A member from any of Kafka's spellings of it: ``TransactionalId``, ``TRANSACTIONAL_ID``,
    ``transactional-id``; ValueError if none."""
    key = text.strip().replace("-", "").replace("_", "").lower()
    for member in enum:
        if member.name.replace("_", "").lower() == key:
            return member
    raise ValueError(f"unknown {enum.__name__}: {text!r}")


_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE}
    | {AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def applies_to(self, name: str) -> bool:
        """Whether this (concrete) pattern covers the resource called ``name``."""
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name == name or self.name == WILDCARD


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission.name})"
        )

    def grants(self, principals: frozenset[str], host: str, operation: AclOperation) -> bool:
        """Whether this entry matches the caller and operation (as allow or deny alike)."""
        if self.principal not in principals:
            return False
        if self.host not in (WILDCARD, host) and not _host_in_range(self.host, host):
            return False
        if self.operation in (AclOperation.ALL, operation):
            return True
        if self.permission is not AclPermissionType.ALLOW:
            return False
        if operation is AclOperation.DESCRIBE:
            return self.operation in _IMPLIES_DESCRIBE
        if operation is AclOperation.DESCRIBE_CONFIGS:
            return self.operation in _IMPLIES_DESCRIBE_CONFIGS
        return False


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def binding_of(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    """A binding from its wire values; ValueError for a value Kafka has no name for."""
    return AclBinding(
        ResourcePattern(ResourceType(resource_type), name, PatternType(pattern_type)),
        AccessControlEntry(principal, host, AclOperation(operation), AclPermissionType(permission)),
    )


class InvalidAclError(ValueError):
    """A binding Kafka refuses to store (INVALID_REQUEST)."""


def validate_binding(binding: AclBinding) -> None:
    """Raise :class:`InvalidAclError` for a binding that is not concrete or not well formed,
    with Kafka's reasons."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise InvalidAclError(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAclError(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise InvalidAclError(f"Invalid operation {entry.operation.name}")
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAclError(f"Invalid permissionType {entry.permission.name}")
    if not pattern.name:
        raise InvalidAclError("Resource name should not be empty")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        raise InvalidAclError(f"Could not parse principal from `{entry.principal}`")
    if not entry.host:
        raise InvalidAclError("Invalid host: empty")
    if "/" in entry.host and _network(entry.host) is None:
        raise InvalidAclError(f"Invalid host: {entry.host} is not an address range in CIDR form")


@functools.lru_cache(maxsize=1024)
def _network(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)
def _host_in_range(acl_host: str, host: str) -> bool:
    """Whether ``host`` lies in the range an ACL host in CIDR form names (KIP-1276:
    ``127.0.0.0/8`` matches 127.0.0.1)."""
    if "/" not in acl_host:
        return False
    network = _network(acl_host)
    if network is None:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.version == network.version and address in network


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None (and ANY) fields match everything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def unknown_field(self) -> str | None:
        """The name of a field holding UNKNOWN (such a filter matches nothing: Kafka refuses it)."""
        for name, value in (
            ("resourceType", self.resource_type),
            ("patternType", self.pattern_type),
            ("operation", self.operation),
            ("permissionType", self.permission),
        ):
            if value == 0:
                return name
        return None

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding.pattern) and self._matches_entry(binding.entry)

    def _matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type is PatternType.MATCH:
            # MATCH selects every pattern that would apply to the named resource.
            return self.name is None or pattern.applies_to(self.name)
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def _matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )


def parse_super_users(raw: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons."""
    return frozenset(p.strip() for p in (raw or "").split(";") if p.strip())


class AclRules:
    """The bindings in force, indexed by resource type, and the decisions taken from them.

    Immutable once built: a change of ACLs builds a new one (cheap at the sizes ACL sets have),
    so a decision never sees half an update.
    """

    def __init__(
        self,
        acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]],
        super_users: frozenset[str] = frozenset(),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._by_type: dict[
            ResourceType, list[tuple[ResourcePattern, tuple[AccessControlEntry, ...]]]
        ]
        self._by_type = {}
        for pattern, entries in sorted(acls.items()):
            listed = tuple(sorted(entries))
            if listed:
                self._by_type.setdefault(pattern.resource_type, []).append((pattern, listed))

    def bindings(self) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for patterns in self._by_type.values()
            for pattern, entries in patterns
            for entry in entries
        ]

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        principals = frozenset((principal, WILDCARD_PRINCIPAL))
        applicable = allowed = False
        for pattern, entries in self._by_type.get(resource_type, ()):
            if not pattern.applies_to(name):
                continue
            applicable = True
            for entry in entries:
                if entry.grants(principals, host, operation):
                    if entry.permission is AclPermissionType.DENY:
                        return False
                    allowed = True
        return allowed or (not applicable and self.allow_if_no_acl)

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether the principal may perform ``operation`` on some resource of the type (Kafka's
        authorizeByResourceType, used where any topic will do): an ALLOW on some pattern that
        no DENY of the caller covers (a DENY on the wildcard or on a prefix of the allowed name
        covers it)."""
        if principal in self.super_users:
            return True
        principals = frozenset((principal, WILDCARD_PRINCIPAL))
        patterns = self._by_type.get(resource_type, [])
        denied = [
            pattern
            for pattern, entries in patterns
            for entry in entries
            if entry.permission is AclPermissionType.DENY
            and entry.grants(principals, host, operation)
        ]
        for pattern, entries in patterns:
            if not any(
                e.permission is AclPermissionType.ALLOW and e.grants(principals, host, operation)
                for e in entries
            ):
                continue
            if not any(_covers(deny, pattern) for deny in denied):
                return True
        return not patterns and self.allow_if_no_acl


def _covers(deny: ResourcePattern, allowed: ResourcePattern) -> bool:
    """Whether every resource ``allowed`` applies to is also under ``deny``."""
    if deny.pattern_type is PatternType.LITERAL:
        return deny.name == WILDCARD or (
            allowed.pattern_type is PatternType.LITERAL and deny.name == allowed.name
        )
    return allowed.name.startswith(deny.name) and allowed.name != WILDCARD


def encode_entries(entries: Iterable[AccessControlEntry]) -> dict[str, object]:
    """A resource's entries as Kafka's ``/kafka-acl`` znodes hold them (JSON-ready)."""
    return {
        "version": 1,
        "acls": [
            {
                "principal": e.principal,
                "permissionType": zk_name(e.permission),
                "operation": zk_name(e.operation),
                "host": e.host,
            }
            for e in sorted(entries)
        ],
    }


def decode_entries(document: Mapping[str, object]) -> frozenset[AccessControlEntry]:
    """The inverse of :func:`encode_entries`; ValueError for another version or bad names."""
    if document.get("version") != 1:
        raise ValueError(f"unsupported ACL document version {document.get('version')!r}")
    items = document.get("acls")
    if not isinstance(items, list):
        raise ValueError("ACL document without an acls list")
    return frozenset(
        AccessControlEntry(
            str(item["principal"]),
            str(item["host"]),
            parse_enum(AclOperation, str(item["operation"])),
            parse_enum(AclPermissionType, str(item["permissionType"])),
        )
        for item in items
    )
