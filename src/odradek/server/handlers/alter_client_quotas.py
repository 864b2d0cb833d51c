"""AlterClientQuotas (49): set and remove quotas of users, client ids, both, and IP addresses
(KIP-546), stored in the metadata store where every broker applies them; each entry is checked
and answered on its own, ``validate_only`` checks without storing."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol.errors import ErrorCode
from odradek.quotas.entities import InvalidQuota, QuotaEntity, check_value, entity
from odradek.security.acl import AclOperation
from odradek.server.authorize import permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _changes(quota_entity: QuotaEntity, ops: Any) -> tuple[dict[str, str], set[str]]:
    """The keys set (as stored) and removed by one entry's ops."""
    setting: dict[str, str] = {}
    removing: set[str] = set()
    for op in ops:
        if op.key in setting or op.key in removing:
            raise InvalidQuota(f"Duplicate quota key {op.key} not updating quota")
        if op.remove:
            check_value(quota_entity, op.key, 1.0)  # a known key for the entity type
            removing.add(op.key)
        else:
            setting[op.key] = check_value(quota_entity, op.key, float(op.value))
    return setting, removing


@handles(api_key=49, min_version=0, max_version=1)
async def handle_alter_client_quotas(ctx: RequestContext, request: Any) -> Response:
    allowed = permits_cluster(ctx, AclOperation.ALTER_CONFIGS)
    store = ctx.services.topics.store
    answers = []
    current: dict[QuotaEntity, dict[str, str]] | None = None
    for entry in request.entries:
        components = [(e.entity_type, e.entity_name) for e in entry.entity]
        code, message = ErrorCode.none, None
        try:
            if not allowed:
                code, message = ErrorCode.cluster_authorization_failed, None
            else:
                quota_entity = entity(components)
                setting, removing = _changes(quota_entity, entry.ops)
                if not request.validate_only:
                    if current is None:
                        current = await store.quota_configs()
                    # The store answers quota keys only: what is not removed stays.
                    kept = current.get(quota_entity, {})
                    updated = {k: v for k, v in kept.items() if k not in removing} | setting
                    await store.set_quota_configs(quota_entity, updated)
                    current[quota_entity] = updated
        except InvalidQuota as e:
            code, message = ErrorCode.invalid_request, str(e)
        except MetadataStoreError as e:
            code, message = ErrorCode.unknown_server_error, f"metadata store: {e}"
        answers.append(
            {
                "error_code": code,
                "error_message": message,
                "entity": [{"entity_type": k, "entity_name": n} for k, n in components],
            }
        )
    return ctx.respond(throttle_time=0, entries=answers)
