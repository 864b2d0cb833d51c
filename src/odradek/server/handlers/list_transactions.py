"""ListTransactions (66): the transactional ids this broker coordinates, filtered by state,
producer id and (v1) how long they have been running, as ``kafka-transactions.sh list``
gathers them from every broker."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.transaction.records import STATE_BY_NAME
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TRANSACTIONAL_ID, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=66, min_version=0, max_version=1)
async def handle_list_transactions(ctx: RequestContext, request: Any) -> Response:
    states = list(request.state_filters)
    unknown = [s for s in states if s not in STATE_BY_NAME]
    listing = ctx.services.transactions.coordinator.listing(
        [s for s in states if s in STATE_BY_NAME]
        if states and len(unknown) < len(states)
        else states,
        [int(p) for p in request.producer_id_filters],
        int(getattr(request, "duration_filter", -1)),
    )
    if states and len(unknown) == len(states):
        listing = []
    listing = [
        t for t in listing if permits(ctx, Op.DESCRIBE, TRANSACTIONAL_ID, t.transactional_id)
    ]
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=[
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state.kafka_name,
            }
            for t in listing
        ],
    )
