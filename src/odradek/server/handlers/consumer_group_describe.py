"""ConsumerGroupDescribe (69): KIP-848 consumer groups with their epochs, assignor and members
(current and target assignments). A classic group is GROUP_ID_NOT_FOUND here, as in Kafka."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.messages import ConsumerGroupDescription
from odradek.server.authorize import OPERATIONS_NOT_ASKED
from odradek.server.context import RequestContext, Response
from odradek.server.group_answers import describe_each, described_assignment, groups_answer
from odradek.server.registry import handles

_CONSUMER_MEMBER = 1


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
                "assignment": described_assignment(m.assignment),
                "target_assignment": described_assignment(m.target_assignment),
                "member_type": _CONSUMER_MEMBER,
            }
            for m in d.members
        ],
        "authorized_operations": OPERATIONS_NOT_ASKED,
    }


@handles(api_key=69, min_version=0, max_version=1)
async def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Response:
    described = await describe_each(
        ctx, request.group_ids, lambda c, g: c.consumer.describe(g), ConsumerGroupDescription
    )
    return groups_answer(
        ctx,
        [_describe(d) for d in described],
        getattr(request, "include_authorized_operations", False),
    )
