"""ShareGroupHeartbeat (76): a member of a share group (KIP-932) joins, heartbeats and leaves;
the answer carries its member epoch and, when it changed, its assignment. The answer waits until
the records behind it are replicated."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.share_group import ShareHeartbeatRequest, ShareHeartbeatResult
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, client_host, denied, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=76, min_version=1, max_version=1)
async def handle_share_group_heartbeat(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP, member_epoch=-1)
    names = request.subscribed_topic_names
    heartbeat = ShareHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=ctx.header.client_id or "",
        client_host="/" + client_host(ctx),
    )
    hidden = denied(ctx, Op.DESCRIBE, TOPIC, heartbeat.subscribed_topic_names or ())
    if hidden:
        result = ShareHeartbeatResult(
            ErrorCode.topic_authorization_failed,
            f"not authorized to describe {', '.join(sorted(hidden))}",
        )
    else:
        try:
            result = await ctx.services.groups.write(
                heartbeat.group_id,
                lambda coordinator: coordinator.share.heartbeat(heartbeat),
                api_key=ctx.header.api_key,
            )
        except CoordinatorError as e:
            result = ShareHeartbeatResult(
                e.code, None if e.refused == ErrorCode.none else e.refused.name
            )
    assignment = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(partitions)}
                for topic_id, partitions in sorted(result.assignment.items())
                if partitions
            ]
        }
    return ctx.respond(
        throttle_time=0,
        error_code=result.error,
        error_message=result.message if result.error != ErrorCode.none else None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )
