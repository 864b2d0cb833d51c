"""What the ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) share: their requests' bindings and
filters as :mod:`odradek.security.acl` values, and the answer of a broker without an authorizer."""

from __future__ import annotations

from typing import Any

from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAclError,
    PatternType,
    ResourceType,
    binding_of,
)

# Kafka's message with SECURITY_DISABLED when no authorizer is configured.
NO_AUTHORIZER = "No Authorizer is configured."


def creation_binding(creation: Any) -> AclBinding:
    """The binding a creation asks for; InvalidAclError for values Kafka has no name for."""
    try:
        return binding_of(
            creation.resource_type,
            creation.resource_name,
            creation.resource_pattern_type,
            creation.principal,
            creation.host,
            creation.operation,
            creation.permission_type,
        )
    except ValueError as e:
        raise InvalidAclError(str(e)) from e


def binding_filter(item: Any) -> AclBindingFilter:
    """A DescribeAcls request's or DeleteAcls filter's selection; ValueError for a value Kafka has
    no name for."""
    return AclBindingFilter(
        ResourceType(int(item.resource_type_filter)),
        item.resource_name_filter,
        PatternType(int(item.pattern_type_filter)),
        item.principal_filter,
        item.host_filter,
        AclOperation(int(item.operation)),
        AclPermissionType(int(item.permission_type)),
    )


def filter_error(item: Any) -> tuple[AclBindingFilter | None, str | None]:
    """The filter, or the reason Kafka refuses it (INVALID_REQUEST)."""
    try:
        selection = binding_filter(item)
    except ValueError as e:
        return None, str(e)
    unknown = selection.unknown_field()
    if unknown is not None:
        return None, f"The filter has an UNKNOWN {unknown}"
    return selection, None
