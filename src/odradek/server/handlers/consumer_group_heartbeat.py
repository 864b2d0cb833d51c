"""ConsumerGroupHeartbeat (68): a member of a KIP-848 consumer group joins, heartbeats, acknowledges
revocations and leaves; the answer carries its member epoch and, when it changed, its assignment.
The answer waits until the records behind it are replicated."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResult
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, client_host, denied, permits, refusal
from odradek.server.context import RequestContext, Response
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
    # As Kafka: the subscribed topics must be ones the member may describe.
    hidden = denied(ctx, Op.DESCRIBE, TOPIC, heartbeat.subscribed_topic_names or ())
    if hidden:
        result = ConsumerHeartbeatResult(
            ErrorCode.topic_authorization_failed,
            f"not authorized to describe {', '.join(sorted(hidden))}",
        )
    elif ctx.version >= 1 and not heartbeat.member_id:
        # From v1 the consumer makes its member id itself (KIP-1082).
        result = ConsumerHeartbeatResult(ErrorCode.invalid_request, "MemberId can't be empty.")
    else:
        try:
            result = await ctx.services.groups.write(
                heartbeat.group_id,
                lambda coordinator: coordinator.consumer.heartbeat(heartbeat),
                api_key=ctx.header.api_key,
            )
        except CoordinatorError as e:
            result = (
                ConsumerHeartbeatResult(e.code)
                if e.refused == ErrorCode.none
                else ConsumerHeartbeatResult(e.code, e.refused.name)
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
