"""InitProducerId (22): producer ids and epochs for idempotent producers."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=22, min_version=0, max_version=5)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Response:
    if request.transactional_id is not None:
        # Transactions need a transaction coordinator, which this broker does not have yet.
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.coordinator_not_available,
            producer_id=-1,
            producer_epoch=-1,
        )
    producer_id = int(getattr(request, "producer_id", -1))
    epoch = int(getattr(request, "producer_epoch", -1))
    if producer_id >= 0 and 0 <= epoch < 32767:
        # KIP-360: a producer recovering from an error bumps its own epoch and keeps its id.
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.none,
            producer_id=producer_id,
            producer_epoch=epoch + 1,
        )
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        producer_id=ctx.services.producer_ids.next_id(),
        producer_epoch=0,
    )
