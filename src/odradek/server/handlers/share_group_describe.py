"""ShareGroupDescribe (77): share groups (KIP-932) with their epochs, assignor and members. A
group of another kind is GROUP_ID_NOT_FOUND here, as in Kafka."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.share_group import ASSIGNOR_NAME, ShareGroupDescription
from odradek.server.authorize import OPERATIONS_NOT_ASKED
from odradek.server.context import RequestContext, Response
from odradek.server.group_answers import describe_each, described_assignment, groups_answer
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
                "assignment": described_assignment(m.assignment),
            }
            for m in d.members
        ],
        "authorized_operations": OPERATIONS_NOT_ASKED,
    }


@handles(api_key=77, min_version=1, max_version=1)
async def handle_share_group_describe(ctx: RequestContext, request: Any) -> Response:
    described = await describe_each(
        ctx, request.group_ids, lambda c, g: c.share.describe(g), ShareGroupDescription
    )
    return groups_answer(
        ctx, [_describe(d) for d in described], request.include_authorized_operations
    )
