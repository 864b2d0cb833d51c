"""DescribeTransactions (65): the state of transactional ids this broker coordinates, as
``kafka-transactions.sh describe`` shows it."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TRANSACTIONAL_ID, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _describe(ctx: RequestContext, transactional_id: str) -> dict[str, Any]:
    coordinator = ctx.services.transactions.coordinator
    status = coordinator.status(transactional_id)
    if not permits(ctx, Op.DESCRIBE, TRANSACTIONAL_ID, transactional_id):
        status = ErrorCode.transactional_id_authorization_failed
    metadata = coordinator.metadata(transactional_id)
    answer: dict[str, Any] = {
        "error_code": status,
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": datetime.datetime.fromtimestamp(0, datetime.UTC),
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }
    if status != ErrorCode.none:
        return answer
    if metadata is None:
        return answer | {"error_code": ErrorCode.transactional_id_not_found}
    topics: dict[str, list[int]] = {}
    for topic, index in sorted(metadata.partitions):
        topics.setdefault(topic, []).append(index)
    start = max(metadata.start_ms, 0) if metadata.start_ms >= 0 else 0
    return answer | {
        "transaction_state": metadata.state.kafka_name,
        "transaction_timeout": metadata.timeout_ms,
        "transaction_start_time": datetime.datetime.fromtimestamp(start / 1000, datetime.UTC),
        "producer_id": metadata.producer_id,
        "producer_epoch": metadata.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
    }


@handles(api_key=65, min_version=0, max_version=0)
async def handle_describe_transactions(ctx: RequestContext, request: Any) -> Response:
    return ctx.respond(
        throttle_time=0,
        transaction_states=[_describe(ctx, t) for t in request.transactional_ids],
    )
