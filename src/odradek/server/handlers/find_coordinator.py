"""FindCoordinator (10): a group's coordinator is the leader of its partition of
``__consumer_offsets``, as the cluster view has it; transactions are not served yet."""

from __future__ import annotations

from typing import Any

from odradek.cluster.view import CONSUMER_OFFSETS, NO_NODE
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

GROUP_KEY = 0
TRANSACTION_KEY = 1


def _find(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    missing: dict[str, Any] = {"key": key, "node_id": NO_NODE, "host": "", "port": -1}
    if key_type == TRANSACTION_KEY:
        return missing | {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": "this broker has no transaction coordinator",
        }
    if key_type != GROUP_KEY:
        return missing | {
            "error_code": ErrorCode.invalid_request,
            "error_message": f"unknown coordinator key type {key_type}",
        }
    try:
        # Kafka creates the offsets topic when the first group looks for its coordinator.
        ctx.services.groups.offsets_topic.ensure()
    except KafkaError as e:
        return missing | {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": e.message,
        }
    coordinator = ctx.services.cluster.group_coordinator(key)
    if coordinator is None:
        return missing | {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": f"the partition of {CONSUMER_OFFSETS} for group {key!r} has no leader",
        }
    return {
        "key": key,
        "node_id": coordinator.node_id,
        "host": coordinator.host,
        "port": coordinator.port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }


@handles(api_key=10, min_version=0, max_version=6)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Response:
    key_type = int(getattr(request, "key_type", GROUP_KEY))
    if ctx.version >= 4:
        return ctx.respond(
            throttle_time=0,
            coordinators=[_find(ctx, key, key_type) for key in request.coordinator_keys],
        )
    found = _find(ctx, request.key, key_type)
    del found["key"]
    return ctx.respond(throttle_time=0, **found)
