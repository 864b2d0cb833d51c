"""FindCoordinator (10): this broker coordinates every group; transactions are not served yet."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

GROUP_KEY = 0
TRANSACTION_KEY = 1


def _find(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    host, port = ctx.broker.advertised
    found: dict[str, Any] = {
        "key": key,
        "node_id": ctx.broker.node_id,
        "host": host,
        "port": port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    missing = {"node_id": -1, "host": "", "port": -1}
    if key_type == TRANSACTION_KEY:
        return (
            found
            | missing
            | {
                "error_code": ErrorCode.coordinator_not_available,
                "error_message": "this broker has no transaction coordinator",
            }
        )
    if key_type != GROUP_KEY:
        return (
            found
            | missing
            | {
                "error_code": ErrorCode.invalid_request,
                "error_message": f"unknown coordinator key type {key_type}",
            }
        )
    try:
        # Kafka creates the offsets topic when the first group looks for its coordinator.
        ctx.broker.groups.offsets_topic.ensure()
    except KafkaError as e:
        return (
            found
            | missing
            | {"error_code": ErrorCode.coordinator_not_available, "error_message": e.message}
        )
    return found


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
