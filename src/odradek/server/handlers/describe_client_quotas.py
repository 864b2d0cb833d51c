"""DescribeClientQuotas (48): the quotas of the entities a filter matches, as Kafka answers it
(KIP-546): each component matches an entity type by exact name, by the default, or by any
specified name; ``strict`` leaves out entities with types the filter does not name."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol.errors import ErrorCode
from odradek.quotas.entities import CLIENT_ID, IP, USER, QuotaEntity, quota_values
from odradek.security.acl import AclOperation
from odradek.server.authorize import permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _BadFilter(ValueError):
    pass


def _filter(components: Any) -> dict[str, tuple[int, str | None]]:
    wanted: dict[str, tuple[int, str | None]] = {}
    for c in components:
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise _BadFilter(f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in wanted:
            raise _BadFilter(f"Duplicate {c.entity_type} filter component entity type")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise _BadFilter("Exact match requires a name to match")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise _BadFilter(f"Unknown match type {c.match_type}")
        wanted[c.entity_type] = (int(c.match_type), c.match)
    if IP in wanted and len(wanted) > 1:
        raise _BadFilter(
            "Invalid entity filter component combination, IP filter component "
            "should not be used with user or clientId filter component."
        )
    return wanted


def _matches(entity: QuotaEntity, wanted: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    names = dict(entity)
    if strict and set(names) != set(wanted):
        return False
    for kind, (match_type, match) in wanted.items():
        if kind not in names:
            return False
        name = names[kind]
        if match_type == MATCH_EXACT and name != match:
            return False
        if match_type == MATCH_DEFAULT and name is not None:
            return False
        if match_type == MATCH_SPECIFIED and name is None:
            return False
    return True


def _error(ctx: RequestContext, code: ErrorCode, message: str) -> Response:
    return ctx.respond(throttle_time=0, error_code=code, error_message=message, entries=None)


@handles(api_key=48, min_version=0, max_version=1)
async def handle_describe_client_quotas(ctx: RequestContext, request: Any) -> Response:
    if not permits_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return _error(ctx, ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    try:
        wanted = _filter(request.components)
    except _BadFilter as e:
        return _error(ctx, ErrorCode.invalid_request, str(e))
    try:
        configs = await ctx.services.topics.store.quota_configs()
    except MetadataStoreError as e:
        return _error(ctx, ErrorCode.unknown_server_error, f"metadata store: {e}")
    entries = []
    for entity, values in sorted(configs.items(), key=lambda item: repr(item[0])):
        quotas = quota_values(values)
        if quotas and _matches(entity, wanted, bool(request.strict)):
            entries.append(
                {
                    "entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity],
                    "values": [{"key": k, "value": v} for k, v in sorted(quotas.items())],
                }
            )
    return ctx.respond(
        throttle_time=0, error_code=ErrorCode.none, error_message=None, entries=entries
    )
