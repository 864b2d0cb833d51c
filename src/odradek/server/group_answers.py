"""What the group APIs' handlers share past their own fields: the describe APIs (DescribeGroups,
ConsumerGroupDescribe, ShareGroupDescribe) read each group after its DESCRIBE check and add the
authorized operations when asked; the heartbeat APIs of KIP-848 and KIP-932 check the subscribed
topics, write through the group coordinator and answer with the member's assignment."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, authorized_operations, denied, permits
from odradek.server.context import RequestContext, Response

D = TypeVar("D")
R = TypeVar("R", bound="HeartbeatResult")


async def describe_each(
    ctx: RequestContext,
    group_ids: Iterable[str],
    read: Callable[[GroupCoordinator, str], D],
    failed: Callable[[ErrorCode, str], D],
) -> list[D]:
    """Each group as ``read`` describes it (all at once), or ``failed(code, group_id)``: not
    authorized, or its coordinator not here."""

    async def describe(group_id: str) -> D:
        if not permits(ctx, Op.DESCRIBE, GROUP, group_id):
            return failed(ErrorCode.group_authorization_failed, group_id)
        try:
            return await ctx.services.groups.read(
                group_id, lambda c: read(c, group_id), api_key=ctx.header.api_key
            )
        except CoordinatorError as e:
            return failed(e.code, group_id)

    return list(await asyncio.gather(*(describe(g) for g in group_ids)))


def described_assignment(listed: Iterable[tuple[uuid.UUID, str, Iterable[int]]]) -> dict[str, Any]:
    """A described member's assignment: (topic id, name, partitions) per topic."""
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": name, "partitions": list(partitions)}
            for topic_id, name, partitions in listed
        ]
    }


def groups_answer(ctx: RequestContext, groups: list[dict[str, Any]], asked: bool) -> Response:
    """The describe answer; the authorized operations of the groups described when ``asked``."""
    if asked:
        for group in groups:
            if group["error_code"] == ErrorCode.none:
                group["authorized_operations"] = authorized_operations(
                    ctx, GROUP, group["group_id"]
                )
    return ctx.respond(throttle_time=0, groups=groups)


class HeartbeatResult(Protocol):
    @property
    def error(self) -> ErrorCode: ...
    @property
    def message(self) -> str | None: ...
    @property
    def member_id(self) -> str | None: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def heartbeat_interval_ms(self) -> int: ...
    @property
    def assignment(self) -> Mapping[uuid.UUID, frozenset[int]] | None: ...


async def heartbeat_answer(
    ctx: RequestContext,
    group_id: str,
    subscribed: Iterable[str] | None,
    op: Callable[[GroupCoordinator], R],
    failed: Callable[[ErrorCode, str | None], R],
    refused: R | None = None,
) -> Response:
    """Write the heartbeat ``op`` unless a subscribed topic may not be described (as Kafka
    refuses it) or the handler ``refused`` it already; answer with the result."""
    hidden = denied(ctx, Op.DESCRIBE, TOPIC, subscribed or ())
    if hidden:
        result = failed(
            ErrorCode.topic_authorization_failed,
            f"not authorized to describe {', '.join(sorted(hidden))}",
        )
    elif refused is not None:
        result = refused
    else:
        write: Awaitable[R] = ctx.services.groups.write(group_id, op, api_key=ctx.header.api_key)
        try:
            result = await write
        except CoordinatorError as e:
            result = failed(e.code, None if e.refused == ErrorCode.none else e.refused.name)
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
