"""OffsetDelete (47): remove a group's committed offsets of topics it no longer consumes."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, denied, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.partition_errors import partition_errors
from odradek.server.registry import handles


@handles(api_key=47, min_version=0, max_version=0)
async def handle_offset_delete(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.DELETE, GROUP, request.group_id):
        return refusal(ctx, GROUP, topics=[])
    refused = denied(ctx, Op.READ, TOPIC, (t.name for t in request.topics))
    cluster = ctx.services.cluster
    results: dict[tuple[str, int], ErrorCode] = {}
    known = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            if topic.name in refused:
                results[tp] = ErrorCode.topic_authorization_failed
            elif cluster.partition_info(*tp) is None:
                results[tp] = ErrorCode.unknown_topic_or_partition
            else:
                known.append(tp)
    try:
        error, deleted = await ctx.services.groups.write(
            request.group_id,
            lambda coordinator: coordinator.offsets.delete_offsets(request.group_id, known),
            api_key=ctx.header.api_key,
        )
    except CoordinatorError as e:
        error, deleted = e.code, {}
    if error != ErrorCode.none:
        return ctx.respond(throttle_time=0, error_code=error, topics=[])
    results.update(deleted)
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        topics=partition_errors(request.topics, results),
    )
