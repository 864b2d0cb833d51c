"""AlterShareGroupOffsets (91): move an empty share group's start offset on partitions
(``kafka-share-groups --reset-offsets``); what was in flight there is forgotten."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import empty_group_error, share_group


@handles(api_key=91, min_version=0, max_version=0)
async def handle_alter_share_group_offsets(ctx: RequestContext, request: Any) -> Response:
    group_id = request.group_id
    if not permits(ctx, Op.READ, GROUP, group_id):
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
