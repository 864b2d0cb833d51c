"""DescribeGroups (15): state, protocol and members (with metadata and assignment) of groups."""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.messages import GroupDescription
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

# From v6 an unknown group is GROUP_ID_NOT_FOUND; before, a Dead group with no error.
_FIRST_VERSION_WITH_GROUP_ID_NOT_FOUND = 6


def _describe(ctx: RequestContext, described: GroupDescription) -> dict[str, Any]:
    group_id = described.group_id
    error = described.error
    message = None
    if error == ErrorCode.group_id_not_found:
        if ctx.version < _FIRST_VERSION_WITH_GROUP_ID_NOT_FOUND:
            error = ErrorCode.none
        else:
            message = f"group {group_id} does not exist"
    return {
        "error_code": error,
        "error_message": message,
        "group_id": group_id,
        "group_state": described.state,
        "protocol_type": described.protocol_type,
        "protocol_data": described.protocol_name,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in described.members
        ],
        "authorized_operations": OPERATIONS_NOT_ASKED,
    }


@handles(api_key=15, min_version=0, max_version=6)
async def handle_describe_groups(ctx: RequestContext, request: Any) -> Response:

    async def describe(group_id: str) -> GroupDescription:
        if not permits(ctx, Op.DESCRIBE, GROUP, group_id):
            return GroupDescription(ErrorCode.group_authorization_failed, group_id, "")
        try:
            return await ctx.services.groups.read(
                group_id, lambda c: c.describe_group(group_id), api_key=ctx.header.api_key
            )
        except CoordinatorError as e:
            return GroupDescription(e.code, group_id, "")

    described = await asyncio.gather(*(describe(g) for g in request.groups))
    groups = [_describe(ctx, d) for d in described]
    if getattr(request, "include_authorized_operations", False):
        for group in groups:
            if group["error_code"] == ErrorCode.none:
                group["authorized_operations"] = authorized_operations(
                    ctx, GROUP, group["group_id"]
                )
    return ctx.respond(throttle_time=0, groups=groups)
