"""DeleteShareGroupOffsets (92): an empty share group forgets where it stands on topics; it
starts them again from ``share.auto.offset.reset``."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import empty_group_manager


@handles(api_key=92, min_version=0, max_version=0)
async def handle_delete_share_group_offsets(ctx: RequestContext, request: Any) -> Response:
    group_id = request.group_id
    manager, error, message = await empty_group_manager(ctx, group_id, Op.DELETE)
    if manager is None:
        return ctx.respond(throttle_time=0, error_code=error, error_message=message, responses=[])
    responses = []
    for topic in request.topics:
        name = topic.topic_name
        metadata = ctx.services.topics.topic(name)
        outcome = ErrorCode.none
        if metadata is None:
            outcome = ErrorCode.unknown_topic_or_partition
        elif not permits(ctx, Op.READ, TOPIC, name):
            outcome = ErrorCode.topic_authorization_failed
        else:
            outcome = await manager.delete_offsets(group_id, name, metadata.partitions)
        responses.append(
            {
                "topic_name": name,
                "topic_id": metadata.topic_id if metadata is not None else None,
                "error_code": outcome,
            }
        )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, responses=responses)
