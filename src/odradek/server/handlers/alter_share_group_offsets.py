"""AlterShareGroupOffsets (91): move an empty share group's start offset on partitions
(``kafka-share-groups --reset-offsets``); what was in flight there is forgotten."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import empty_group_manager


@handles(api_key=91, min_version=0, max_version=0)
async def handle_alter_share_group_offsets(ctx: RequestContext, request: Any) -> Response:
    group_id = request.group_id
    manager, error, message = await empty_group_manager(ctx, group_id, Op.READ)
    if manager is None:
        return ctx.respond(throttle_time=0, error_code=error, error_message=message, responses=[])
    responses = []
    for topic in request.topics:
        name = topic.topic_name
        metadata = ctx.services.topics.topic(name)
        partitions = []
        for p in topic.partitions:
            if metadata is None or not 0 <= int(p.partition_index) < metadata.partitions:
                outcome = ErrorCode.unknown_topic_or_partition
            elif not permits(ctx, Op.READ, TOPIC, name):
                outcome = ErrorCode.topic_authorization_failed
            else:
                outcome = await manager.alter_offset(
                    group_id, name, int(p.partition_index), int(p.start_offset)
                )
            partitions.append({"partition_index": p.partition_index, "error_code": outcome})
        responses.append(
            {
                "topic_name": name,
                "topic_id": metadata.topic_id if metadata is not None else None,
                "partitions": partitions,
            }
        )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, responses=responses)
