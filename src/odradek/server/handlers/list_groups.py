"""ListGroups (16): every group of this coordinator, filtered by state (v4+) and type (v5+);
COORDINATOR_LOAD_IN_PROGRESS while partitions of ``__consumer_offsets`` are being loaded here."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.messages import ListedGroup
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, permits, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=16, min_version=0, max_version=5)
async def handle_list_groups(ctx: RequestContext, request: Any) -> Response:
    def listing(coordinator: GroupCoordinator) -> tuple[ErrorCode, list[ListedGroup]]:
        error = (
            ErrorCode.coordinator_load_in_progress
            if coordinator.loading_in_progress
            else ErrorCode.none
        )
        listed = coordinator.list_groups(
            getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
        )
        return error, listed

    try:
        error, groups = await ctx.services.groups.read_all(listing, api_key=ctx.header.api_key)
    except CoordinatorError as e:
        error, groups = e.code, []
    if not permits_cluster(ctx, Op.DESCRIBE):  # else only the groups it may describe
        groups = [g for g in groups if permits(ctx, Op.DESCRIBE, GROUP, g.group_id)]
    return ctx.respond(
        throttle_time=0,
        error_code=error,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in groups
        ],
    )
