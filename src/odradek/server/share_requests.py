"""What the share group handlers have in common: topic ids to names, acknowledgement batches to
value objects, each partition's acknowledgements applied, a closed session's records released
(ShareFetch, ShareAcknowledge); the group as its coordinator sees it (the share group offsets
APIs)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from odradek.cluster.share.manager import SharePartitionManager
from odradek.cluster.share.share_partition import AcknowledgementBatch, AcknowledgeType
from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.share_group import ShareGroupDescription
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, permits
from odradek.server.context import RequestContext
from odradek.server.share_sessions import SharePartitionKey, ShareSession


def topic_names(ctx: RequestContext) -> dict[uuid.UUID, str]:
    return {t.topic_id: t.name for t in ctx.services.topics.topics()}


def ack_batches(partition: Any, renew_allowed: bool) -> list[AcknowledgementBatch] | None:
    """A partition's acknowledgement batches; None when one is not acceptable (RENEW where
    the request may not carry it)."""
    batches = [
        AcknowledgementBatch(
            int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types)
        )
        for b in partition.acknowledgement_batches
    ]
    if not renew_allowed and any(AcknowledgeType.RENEW in b.types for b in batches):
        return None
    return batches


async def acknowledge(
    ctx: RequestContext,
    manager: SharePartitionManager,
    group_id: str,
    member_id: str,
    names: dict[uuid.UUID, str],
    key: SharePartitionKey,
    batches: list[AcknowledgementBatch] | None,
) -> ErrorCode:
    topic_id, index = key
    name = names.get(topic_id)
    if name is None:
        return ErrorCode.unknown_topic_id
    if batches is None:
        return ErrorCode.invalid_request
    if not batches:
        return ErrorCode.none
    return await manager.acknowledge(group_id, member_id, name, index, batches)


def release(
    manager: SharePartitionManager,
    names: dict[uuid.UUID, str],
    session: ShareSession | None,
    extra: Iterable[SharePartitionKey] = (),
) -> None:
    """The member of a session that closed, or was replaced, holds nothing any more."""
    if session is None:
        return
    keys = {*session.partitions, *extra}
    manager.release(
        session.group_id,
        session.member_id,
        [(names[t], p) for t, p in keys if t in names],
    )


def leader(ctx: RequestContext, name: str | None, index: int) -> dict[str, int]:
    partition = None if name is None else ctx.services.topics.partition(name, index)
    if partition is None:
        return {"leader_id": -1, "leader_epoch": -1}
    return {"leader_id": partition.leader_id, "leader_epoch": partition.leader_epoch}


def refusal(ctx: RequestContext, request: Any) -> tuple[ErrorCode, str | None] | None:
    """The request's top-level error before anything is looked at (None: go on)."""
    if not request.group_id or not request.member_id:
        return ErrorCode.invalid_request, "GroupId and MemberId must be set."
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return ErrorCode.group_authorization_failed, None
    return None


def by_topic_list(by_topic: dict[uuid.UUID, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]


async def share_group(ctx: RequestContext, group_id: str) -> ShareGroupDescription:
    """The share group as its coordinator (this broker) describes it; the error when it is not
    served here or not a share group."""
    try:
        return await ctx.services.groups.read(
            group_id, lambda c: c.share.describe(group_id), api_key=ctx.header.api_key
        )
    except CoordinatorError as e:
        return ShareGroupDescription(e.code, group_id)


def empty_group_error(described: ShareGroupDescription) -> tuple[ErrorCode, str | None]:
    """Offsets of a share group change only while it has no members (Kafka's rule)."""
    if described.error != ErrorCode.none:
        return described.error, described.message
    if described.members:
        return ErrorCode.non_empty_group, "The group has active members."
    return ErrorCode.none, None
