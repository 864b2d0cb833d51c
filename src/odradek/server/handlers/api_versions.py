"""ApiVersions (18): the versions of every API this broker registers, derived from the registry,
and (v3+) the features it supports and the cluster has finalized (Kafka's admin
``describeFeatures`` reads these). From v5 (KIP-1242) a client names the cluster and node it
meant to reach: a connection that reached another is refused with REBOOTSTRAP_REQUIRED, so the
client starts again from its bootstrap servers instead of talking to the wrong broker."""

from __future__ import annotations

from odradek.cluster import features
from odradek.protocol.api_versions_request import (
    FIRST_HAND_READ_VERSION,
    NO_NODE,
    RESPONSE_VERSION_OF_V5,
    ApiVersionsRequest,
    decode_api_versions_request,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build, response_schema
from odradek.server.context import RequestContext, Response
from odradek.server.registry import HANDLERS, handles

API_KEY = 18


def _misrouted(ctx: RequestContext, request: ApiVersionsRequest) -> ErrorCode | None:
    """Why a v5 request's expectations refuse this connection, as Kafka 4.4 judges them: a node
    named without a cluster is an invalid request; a cluster named must be this one, and the
    node this broker."""
    if request.cluster_id is None:
        return ErrorCode.invalid_request if request.node_id != NO_NODE else None
    cluster = ctx.services.cluster
    if request.cluster_id != cluster.cluster_id or request.node_id != cluster.node_id:
        return ErrorCode.rebootstrap_required
    return None


@handles(api_key=API_KEY, min_version=0, max_version=5, decode=decode_api_versions_request)
async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> Response:
    # v5's response is v4's, byte for byte: kio writes it as v4.
    schema = response_schema(API_KEY, min(ctx.version, RESPONSE_VERSION_OF_V5))
    refusal = _misrouted(ctx, request) if ctx.version >= FIRST_HAND_READ_VERSION else None
    if refusal is not None:
        return build(schema, error_code=refusal, api_keys=[], throttle_time=0)
    if ctx.version >= 3:
        # KIP-511: kept for what clients are asked to push (KIP-714's selectors).
        ctx.session.software_name = str(request.client_software_name)
        ctx.session.software_version = str(request.client_software_version)
    finalized = features.finalized(ctx.services.topics.store.finalized_features)
    # Before v4, clients (Kafka's 3.x among them) refuse a supported range that starts at 0:
    # those features are left out, as Kafka leaves them out.
    oldest = 0 if ctx.version >= 4 else 1
    return build(
        schema,
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
