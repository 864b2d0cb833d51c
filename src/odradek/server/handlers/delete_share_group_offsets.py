"""DeleteShareGroupOffsets (92): an empty share group forgets where it stands on topics; it
starts them again from ``share.auto.offset.reset``."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import empty_group_error, share_group


@handles(api_key=92, min_version=0, max_version=0)
async def handle_delete_share_group_offsets(ctx: RequestContext, request: Any) -> Response:
    group_id = request.group_id
    if not permits(ctx, Op.DELETE, GROUP, group_id):
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.group_authorization_failed, responses=[]
        )
    error, message = empty_group_error(await share_group(ctx, group_id))
    manager = ctx.services.share_partitions
    if error == ErrorCode.none and manager is None:
        error = ErrorCode.unsupported_version
    if error != ErrorCode.none or manager is None:
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
