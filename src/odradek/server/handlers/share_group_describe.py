"""ShareGroupDescribe (77): share groups (KIP-932) with their epochs, assignor and members. A
group of another kind is GROUP_ID_NOT_FOUND here, as in Kafka."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.share_group import ASSIGNOR_NAME, ShareGroupDescription
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


def _describe(d: ShareGroupDescription) -> dict[str, Any]:
    return {
        "error_code": d.error,
        "error_message": d.message,
        "group_id": d.group_id,
        "group_state": d.state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor_name": ASSIGNOR_NAME,
        "members": [
            {
                "member_id": m.member_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": {
                    "topic_partitions": [
                        {"topic_id": topic_id, "topic_name": name, "partitions": list(parts)}
                        for topic_id, name, parts in m.assignment
                    ]
                },
            }
            for m in d.members
        ],
        "authorized_operations": OPERATIONS_NOT_ASKED,
    }


@handles(api_key=77, min_version=1, max_version=1)
async def handle_share_group_describe(ctx: RequestContext, request: Any) -> Response:
    async def describe(group_id: str) -> ShareGroupDescription:
        if not permits(ctx, Op.DESCRIBE, GROUP, group_id):
            return ShareGroupDescription(ErrorCode.group_authorization_failed, group_id)
        try:
            return await ctx.services.groups.read(
                group_id, lambda c: c.share.describe(group_id), api_key=ctx.header.api_key
            )
        except CoordinatorError as e:
            return ShareGroupDescription(e.code, group_id)

    described = await asyncio.gather(*(describe(g) for g in request.group_ids))
    groups = [_describe(d) for d in described]
    if request.include_authorized_operations:
        for group in groups:
            if group["error_code"] == ErrorCode.none:
                group["authorized_operations"] = authorized_operations(
                    ctx, GROUP, group["group_id"]
                )
    return ctx.respond(throttle_time=0, groups=groups)
