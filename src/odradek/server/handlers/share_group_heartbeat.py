"""ShareGroupHeartbeat (76): a member of a share group (KIP-932) joins, heartbeats and leaves;
the answer carries its member epoch and, when it changed, its assignment. The answer waits until
the records behind it are replicated."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.share_group import ShareHeartbeatRequest, ShareHeartbeatResult
from odradek.server.authorize import GROUP, Op, client_host, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.group_answers import heartbeat_answer
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
    return await heartbeat_answer(
        ctx,
        heartbeat.group_id,
        heartbeat.subscribed_topic_names,
        lambda coordinator: coordinator.share.heartbeat(heartbeat),
        ShareHeartbeatResult,
    )
