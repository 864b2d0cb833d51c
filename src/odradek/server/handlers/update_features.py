"""UpdateFeatures (57): finalize feature levels for the whole cluster (``kafka-features upgrade``
/ ``downgrade`` / ``disable``), stored in the metadata store where every broker reads them; all the
request's updates or none, ``validate_only`` checks without storing."""

from __future__ import annotations

from typing import Any

from odradek.cluster import features
from odradek.cluster.metadata.store import MetadataStoreError, StaleVersionError
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation
from odradek.server.authorize import permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

# Another broker finalizing at the same moment makes a write stale; read again this often.
ATTEMPTS = 5


def _updates(request: Any, version: int) -> list[features.FeatureUpdate]:
    updates = []
    for u in request.feature_updates:
        if version == 0:
            # v0 had a flag: a lower level is a safe downgrade when allowed.
            kind = features.SAFE_DOWNGRADE if u.allow_downgrade else features.UPGRADE
        else:
            kind = int(u.upgrade_type)
        updates.append(features.FeatureUpdate(u.feature, int(u.max_version_level), kind))
    return updates


async def _update(
    ctx: RequestContext, updates: list[features.FeatureUpdate], validate: bool
) -> None:
    store = ctx.services.topics.store
    for _ in range(ATTEMPTS):
        stored = store.finalized_features
        current = features.finalized(stored)
        levels = features.apply_updates(current, updates)
        if validate:
            return
        try:
            await store.write_finalized_features(levels, 0 if stored is None else stored.epoch)
            return
        except StaleVersionError:
            continue
    raise MetadataStoreError("the finalized features kept changing under this update")


@handles(api_key=57, min_version=0, max_version=2)
async def handle_update_features(ctx: RequestContext, request: Any) -> Response:
    updates = _updates(request, ctx.version)
    code, message = ErrorCode.none, None
    if not permits_cluster(ctx, AclOperation.ALTER):
        code, message = ErrorCode.cluster_authorization_failed, None
    else:
        try:
            await _update(ctx, updates, bool(getattr(request, "validate_only", False)))
        except features.UpdateRefused as e:
            code, message = e.error, e.message
        except MetadataStoreError as e:
            code, message = ErrorCode.feature_update_failed, f"metadata store: {e}"
    return ctx.respond(
        throttle_time=0,
        error_code=code,
        error_message=message,
        results=[
            {"feature": u.name, "error_code": code, "error_message": message} for u in updates
        ],
    )
