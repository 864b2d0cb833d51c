"""DescribeGroups (15): state, protocol and members (with metadata and assignment) of groups."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.messages import GroupDescription
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import OPERATIONS_NOT_ASKED
from odradek.server.context import RequestContext, Response
from odradek.server.group_answers import describe_each, groups_answer
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
    described = await describe_each(
        ctx,
        request.groups,
        lambda c, g: c.describe_group(g),
        lambda code, g: GroupDescription(code, g, ""),
    )
    return groups_answer(
        ctx,
        [_describe(ctx, d) for d in described],
        getattr(request, "include_authorized_operations", False),
    )
