"""ApiVersions (18): the versions of every API this broker registers, derived from the registry,
and (v3+) the features it supports and the cluster has finalized (Kafka's admin
``describeFeatures`` reads these)."""

from __future__ import annotations

from typing import Any

from odradek.cluster import features
from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import HANDLERS, handles


@handles(api_key=18, min_version=0, max_version=4)
async def handle_api_versions(ctx: RequestContext, request: Any) -> Response:
    if ctx.version >= 3:
        # KIP-511: kept for what clients are asked to push (KIP-714's selectors).
        ctx.session.software_name = str(request.client_software_name)
        ctx.session.software_version = str(request.client_software_version)
    finalized = features.finalized(ctx.services.topics.store.finalized_features)
    # Before v4, clients (Kafka's 3.x among them) refuse a supported range that starts at 0:
    # those features are left out, as Kafka leaves them out.
    oldest = 0 if ctx.version >= 4 else 1
    return ctx.respond(
        error_code=ErrorCode.none,
        api_keys=[
            {"api_key": h.api_key, "min_version": h.min_version, "max_version": h.max_version}
            for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
        ],
        throttle_time=0,
        supported_features=[
            {"name": name, "min_version": r.min_level, "max_version": r.max_level}
            for name, r in sorted(features.SUPPORTED.items())
            if r.min_level >= oldest
        ],
        finalized_features_epoch=finalized.epoch,
        finalized_features=[
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in sorted(finalized.levels.items())
        ],
    )
