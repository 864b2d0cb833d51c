"""ConsumerGroupDescribe (69): KIP-848 consumer groups with their epochs, assignor and members
(current and target assignments). A classic group is GROUP_ID_NOT_FOUND here, as in Kafka."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.messages import ConsumerGroupDescription
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import (
    GROUP,
    OPERATIONS_NOT_ASKED,
    Op,
    authorized_operations,
    permits,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

_CONSUMER_MEMBER = 1


def _assignment(listed: tuple[tuple[Any, str, tuple[int, ...]], ...]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": name, "partitions": list(partitions)}
            for topic_id, name, partitions in listed
        ]
    }


def _describe(d: ConsumerGroupDescription) -> dict[str, Any]:
    return {
        "error_code": d.error,
        "error_message": d.message,
        "group_id": d.group_id,
        "group_state": d.state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor_name": d.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": _assignment(m.assignment),
                "target_assignment": _assignment(m.target_assignment),
                "member_type": _CONSUMER_MEMBER,
            }
            for m in d.members
        ],
        "authorized_operations": OPERATIONS_NOT_ASKED,
    }


@handles(api_key=69, min_version=0, max_version=1)
async def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Response:

    async def describe(group_id: str) -> ConsumerGroupDescription:
        if not permits(ctx, Op.DESCRIBE, GROUP, group_id):
            return ConsumerGroupDescription(ErrorCode.group_authorization_failed, group_id)
        try:
            return await ctx.services.groups.read(
                group_id, lambda c: c.consumer.describe(group_id), api_key=ctx.header.api_key
            )
        except CoordinatorError as e:
            return ConsumerGroupDescription(e.code, group_id)

    described = await asyncio.gather(*(describe(g) for g in request.group_ids))
    groups = [_describe(d) for d in described]
    if getattr(request, "include_authorized_operations", False):
        for group in groups:
            if group["error_code"] == ErrorCode.none:
                group["authorized_operations"] = authorized_operations(
                    ctx, GROUP, group["group_id"]
                )
    return ctx.respond(throttle_time=0, groups=groups)
