"""ConsumerGroupHeartbeat (68): a member of a KIP-848 consumer group joins, heartbeats, acknowledges
revocations and leaves; the answer carries its member epoch and, when it changed, its assignment.
The answer waits until the records behind it are replicated."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.coordinator.group.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResult
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, client_host, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.group_answers import heartbeat_answer
from odradek.server.registry import handles

_MS = datetime.timedelta(milliseconds=1)


def _request(ctx: RequestContext, request: Any) -> ConsumerHeartbeatRequest:
    owned = request.topic_partitions
    names = request.subscribed_topic_names
    return ConsumerHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=int(request.member_epoch),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=int(request.rebalance_timeout / _MS),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=(
            None
            if owned is None
            else tuple((t.topic_id, int(p)) for t in owned for p in t.partitions)
        ),
        client_id=ctx.header.client_id or "",
        client_host="/" + client_host(ctx),  # as Kafka reports it
    )


@handles(api_key=68, min_version=0, max_version=1)
async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP, member_epoch=-1)
    heartbeat = _request(ctx, request)
    refused = None
    if ctx.version >= 1 and not heartbeat.member_id:
        # From v1 the consumer makes its member id itself (KIP-1082).
        refused = ConsumerHeartbeatResult(ErrorCode.invalid_request, "MemberId can't be empty.")
    return await heartbeat_answer(
        ctx,
        heartbeat.group_id,
        heartbeat.subscribed_topic_names,
        lambda coordinator: coordinator.consumer.heartbeat(heartbeat),
        ConsumerHeartbeatResult,
        refused,
    )
