"""OffsetFetch (9): a group's committed offsets, -1 where there is none.

v7+ may ``require_stable``: a partition with a transactional commit pending then answers
UNSTABLE_OFFSET_COMMIT (the client retries until the transaction ends); without it the last
committed offset is returned. v8+ asks for several groups at once; v10 names topics by id and
is not served. The answer waits until the commits behind it are replicated. A group-level error
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, …) goes in the group's (v8+) or the response's
(v2+) error code; v1 has neither, so each asked partition carries it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.messages import NO_LEADER_EPOCH, NO_OFFSET
from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, denied, permits
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles


def _partition(index: int, offset: int, epoch: int, metadata: str, error: ErrorCode) -> Any:
    return {
        "partition_index": index,
        "committed_offset": offset,
        "committed_leader_epoch": epoch,
        "metadata": metadata,
        "error_code": error,
    }


def _group_offsets(
    ctx: RequestContext,
    coordinator: GroupCoordinator,
    group_id: str,
    topics: Iterable[Any] | None,
    require_stable: bool,
) -> tuple[ErrorCode, list[Any]]:
    wanted = (
        None
        if topics is None
        else [(t.name, int(index)) for t in topics for index in t.partition_indexes]
    )
    fetched = coordinator.offsets.fetch_offsets(group_id, wanted, require_stable=require_stable)
    # Topics the principal may not describe: refused when named, left out of "all topics".
    refused = denied(ctx, Op.DESCRIBE, TOPIC, (tp[0] for tp, _ in fetched.offsets))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), c in fetched.offsets:
        if topic in refused:
            if wanted is None:
                continue
            answer = _partition(
                partition, NO_OFFSET, NO_LEADER_EPOCH, "", ErrorCode.topic_authorization_failed
            )
        elif (topic, partition) in fetched.unstable:
            answer = _partition(
                partition, NO_OFFSET, NO_LEADER_EPOCH, "", ErrorCode.unstable_offset_commit
            )
        elif c is None:
            answer = _partition(partition, NO_OFFSET, NO_LEADER_EPOCH, "", ErrorCode.none)
        else:
            answer = _partition(partition, c.offset, c.leader_epoch, c.metadata, ErrorCode.none)
        by_topic.setdefault(topic, []).append(answer)
    return fetched.error, [
        {"name": name, "partitions": partitions} for name, partitions in by_topic.items()
    ]


def _failed_partitions(topics: Iterable[Any] | None, error: ErrorCode) -> list[Any]:
    return [
        {
            "name": t.name,
            "partitions": [
                _partition(int(i), NO_OFFSET, NO_LEADER_EPOCH, "", error)
                for i in t.partition_indexes
            ],
        }
        for t in topics or ()
    ]


async def _fetch(
    ctx: RequestContext,
    group_id: str,
    topics: Iterable[Any] | None,
    require_stable: bool,
    member: tuple[str | None, int] | None = None,
) -> tuple[ErrorCode, list[Any]]:
    """One group's offsets as the answer lists them, or its error; ``member``: a consumer
    group's member id and epoch (v9, KIP-848)."""
    if not permits(ctx, Op.DESCRIBE, GROUP, group_id):
        return ErrorCode.group_authorization_failed, []

    def fetch(coordinator: GroupCoordinator) -> tuple[ErrorCode, list[Any]]:
        if member is not None:
            error = coordinator.consumer.check_fetch(group_id, *member)
            if error != ErrorCode.none:
                return error, []
        return _group_offsets(ctx, coordinator, group_id, topics, require_stable)

    try:
        return await ctx.services.groups.read(group_id, fetch, api_key=ctx.header.api_key)
    except CoordinatorError as e:
        return e.code, []


@handles(api_key=9, min_version=0, max_version=9, decode=old_messages.decoder(9))
async def handle_offset_fetch(ctx: RequestContext, request: Any) -> Response:
    if ctx.version >= 8:
        fetched = await asyncio.gather(
            *(
                _fetch(
                    ctx,
                    group.group_id,
                    group.topics,
                    bool(request.require_stable),
                    (getattr(group, "member_id", None), int(getattr(group, "member_epoch", -1))),
                )
                for group in request.groups
            )
        )
        answers = [
            {"group_id": group.group_id, "topics": topics, "error_code": error}
            for group, (error, topics) in zip(request.groups, fetched, strict=True)
        ]
        return ctx.respond(throttle_time=0, groups=answers)
    require_stable = bool(getattr(request, "require_stable", False))
    error, topics = await _fetch(ctx, request.group_id, request.topics, require_stable)
    if error != ErrorCode.none:
        topics = _failed_partitions(request.topics, error) if ctx.version < 2 else []
    return respond(ctx, throttle_time=0, topics=topics, error_code=error)
