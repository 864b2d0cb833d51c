"""OffsetFetch (9): a group's committed offsets, -1 where there is none.

v8+ asks for several groups at once; v10 names topics by id and is not served.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from odradek.coordinator.messages import NO_LEADER_EPOCH, NO_OFFSET
from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _group_offsets(ctx: RequestContext, group_id: str, topics: Iterable[Any] | None) -> list[Any]:
    wanted = (
        None
        if topics is None
        else [(t.name, int(index)) for t in topics for index in t.partition_indexes]
    )
    fetched = ctx.services.groups.coordinator.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), committed in fetched.offsets:
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": committed.offset if committed else NO_OFFSET,
                "committed_leader_epoch": committed.leader_epoch if committed else NO_LEADER_EPOCH,
                "metadata": committed.metadata if committed else "",
                "error_code": ErrorCode.none,
            }
        )
    return [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()]


@handles(api_key=9, min_version=1, max_version=9)
async def handle_offset_fetch(ctx: RequestContext, request: Any) -> Response:
    if ctx.version >= 8:
        return ctx.respond(
            throttle_time=0,
            groups=[
                {
                    "group_id": group.group_id,
                    "topics": _group_offsets(ctx, group.group_id, group.topics),
                    "error_code": ErrorCode.none,
                }
                for group in request.groups
            ],
        )
    return ctx.respond(
        throttle_time=0,
        topics=_group_offsets(ctx, request.group_id, request.topics),
        error_code=ErrorCode.none,
    )
