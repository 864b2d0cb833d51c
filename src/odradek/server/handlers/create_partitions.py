"""CreatePartitions (37): add partitions to existing topics."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.deadline import request_timeout_ms, within_timeout
from odradek.server.mutation_quota import MutationQuota
from odradek.server.registry import handles


@handles(api_key=37, min_version=0, max_version=3)
async def handle_create_partitions(ctx: RequestContext, request: Any) -> Response:
    results = []
    quota = MutationQuota(ctx, strict=ctx.version >= 3, validate_only=bool(request.validate_only))
    for item in request.topics:
        if not permits(ctx, Op.ALTER, TOPIC, item.name):
            code = ErrorCode.topic_authorization_failed
            results.append({"name": item.name, "error_code": code, "error_message": None})
            continue
        assignments = (
            None
            if item.assignments is None
            else [[int(b) for b in a.broker_ids] for a in item.assignments]
        )
        topics = ctx.services.topics
        existing = topics.topic(item.name)
        before = existing.partitions if existing is not None else 0
        try:
            quota.check()
            await within_timeout(
                topics.create_partitions(
                    item.name,
                    int(item.count),
                    assignments,
                    validate_only=bool(request.validate_only),
                ),
                request_timeout_ms(request),
            )
        except KafkaError as e:
            results.append({"name": item.name, "error_code": e.code, "error_message": e.message})
            continue
        quota.record(int(item.count) - before)
        results.append({"name": item.name, "error_code": ErrorCode.none, "error_message": None})
    return ctx.respond(throttle_time=quota.throttle_ms(), results=results)
