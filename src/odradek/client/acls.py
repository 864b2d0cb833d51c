"""What ``kafka-acls.sh`` asks of a cluster: CreateAcls, DescribeAcls and DeleteAcls, sent to the
bootstrap broker (ACLs live in the metadata store, so any broker answers for the cluster)."""

from __future__ import annotations

from collections.abc import Sequence

from odradek.client.admin import AdminClient
from odradek.client.core import ClientError
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclBinding, AclBindingFilter, binding_of

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


def _filter_fields(selection: AclBindingFilter) -> dict[str, object]:
    return {
        "resource_type_filter": selection.resource_type,
        "resource_name_filter": selection.name,
        "pattern_type_filter": selection.pattern_type,
        "principal_filter": selection.principal,
        "host_filter": selection.host,
        "operation": selection.operation,
        "permission_type": selection.permission,
    }


def _failure(api: str, code: ErrorCode, message: str | None) -> ClientError:
    return ClientError(f"{api} failed: {code.name}" + (f" ({message})" if message else ""))


class AclAdmin(AdminClient):
    """Create, list and delete ACL bindings."""

    CLIENT_ID = "odradek-acls"

    async def create(self, bindings: Sequence[AclBinding]) -> None:
        """Store every binding; ClientError naming the first one refused."""
        creations = [
            {
                "resource_type": b.pattern.resource_type,
                "resource_name": b.pattern.name,
                "resource_pattern_type": b.pattern.pattern_type,
                "principal": b.entry.principal,
                "host": b.entry.host,
                "operation": b.entry.operation,
                "permission_type": b.entry.permission,
            }
            for b in bindings
        ]
        response = await self._bootstrap.request(CREATE_ACLS, {"creations": creations}, highest=3)
        for binding, result in zip(bindings, response.results, strict=True):
            if result.error_code != ErrorCode.none:
                raise _failure(
                    f"CreateAcls of {binding.pattern} {binding.entry}",
                    result.error_code,
                    result.error_message,
                )

    async def describe(self, selection: AclBindingFilter) -> list[AclBinding]:
        response = await self._bootstrap.request(
            DESCRIBE_ACLS, _filter_fields(selection), highest=3
        )
        if response.error_code != ErrorCode.none:
            raise _failure("DescribeAcls", response.error_code, response.error_message)
        return [
            binding_of(
                r.resource_type,
                r.resource_name,
                r.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
            )
            for r in response.resources
            for a in r.acls
        ]

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        """Remove what the filters select; the bindings removed."""
        response = await self._bootstrap.request(
            DELETE_ACLS, {"filters": [_filter_fields(f) for f in filters]}, highest=3
        )
        removed: list[AclBinding] = []
        for result in response.filter_results:
            if result.error_code != ErrorCode.none:
                raise _failure("DeleteAcls", result.error_code, result.error_message)
            removed += [
                binding_of(
                    m.resource_type,
                    m.resource_name,
                    m.pattern_type,
                    m.principal,
                    m.host,
                    m.operation,
                    m.permission_type,
                )
                for m in result.matching_acls
            ]
        return removed
