"""What the share group handlers have in common: topic ids to names, acknowledgement batches to
value objects, each partition's acknowledgements applied, a closed session's records released
(ShareFetch, ShareAcknowledge); the group as its coordinator sees it (the share group offsets
APIs); each partition of a share state request answered by the share coordinator (83-87)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from odradek.cluster.share.manager import SharePartitionManager
from odradek.cluster.share.share_partition import AcknowledgementBatch, AcknowledgeType
from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.share_group import ShareGroupDescription
from odradek.coordinator.share.coordinator import StateAnswer
from odradek.coordinator.share.records import StateKey
from odradek.coordinator.share.runtime import ShareCoordinatorRuntime
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, Op, permits, permits_cluster
from odradek.server.context import RequestContext, Response
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


def share_answer(
    ctx: RequestContext,
    error: ErrorCode,
    message: str | None = None,
    lock_ms: int = 0,
    responses: list[dict[str, Any]] | None = None,
) -> Response:
    """A ShareFetch or ShareAcknowledge answer (their fields are the same)."""
    return ctx.respond(
        throttle_time=0,
        error_code=error,
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=responses or [],
        node_endpoints=[],
    )


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


async def empty_group_manager(
    ctx: RequestContext, group_id: str, operation: Op
) -> tuple[SharePartitionManager | None, ErrorCode, str | None]:
    """What Alter/DeleteShareGroupOffsets need before they touch a partition: ``operation`` on
    the group allowed, and the group empty (offsets of a share group change only while it has
    no members, Kafka's rule). The share-partitions, or None with the error to answer."""
    if not permits(ctx, operation, GROUP, group_id):
        return None, ErrorCode.group_authorization_failed, None
    described = await share_group(ctx, group_id)
    if described.error != ErrorCode.none:
        return None, described.error, described.message
    if described.members:
        return None, ErrorCode.non_empty_group, "The group has active members."
    manager = ctx.services.share_partitions
    if manager is None:
        return None, ErrorCode.unsupported_version, None
    return manager, ErrorCode.none, None


# -- the share state APIs (83-87): a partition leader's requests to the share coordinator ------

ShareStateAnswer = dict[str, Any]


async def share_state_results(
    ctx: RequestContext,
    request: Any,
    one: Callable[[ShareCoordinatorRuntime, StateKey, Any], Awaitable[ShareStateAnswer]],
) -> list[dict[str, Any]]:
    """Each partition of a share state request answered by ``one`` (all at once), as the
    response's ``results``; CLUSTER_AUTHORIZATION_FAILED for all when the caller may not
    (these are a broker's requests, Kafka's CLUSTER_ACTION), COORDINATOR_NOT_AVAILABLE when
    there is no share coordinator here."""
    runtime = ctx.services.share_states
    allowed = permits_cluster(ctx, Op.CLUSTER_ACTION)
    keys = [
        (topic.topic_id, StateKey(request.group_id, topic.topic_id, int(p.partition)), p)
        for topic in request.topics
        for p in topic.partitions
    ]

    async def answer(key: StateKey, data: Any) -> ShareStateAnswer:
        if not allowed:
            return {"error_code": ErrorCode.cluster_authorization_failed}
        if runtime is None:
            return {"error_code": ErrorCode.coordinator_not_available}
        if not request.group_id:
            return {"error_code": ErrorCode.invalid_request, "error_message": "no group id"}
        return await one(runtime, key, data)

    answers = await asyncio.gather(*(answer(key, data) for _, key, data in keys))
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, key, _), fields in zip(keys, answers, strict=True):
        by_topic.setdefault(topic_id, []).append({"partition": key.partition, **fields})
    return [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]


def state_fields(answer: StateAnswer, *, batches: bool, leader_epoch: bool) -> ShareStateAnswer:
    """A share coordinator's answer as a read's partition result (no state: start offset
    -1, state epoch 0, as Kafka answers for a share-partition never initialized)."""
    state = answer.state
    fields: ShareStateAnswer = {
        "error_code": answer.error,
        "error_message": answer.message,
        "state_epoch": state.state_epoch if state is not None else 0,
        "start_offset": state.start_offset if state is not None else -1,
    }
    if answer.error != ErrorCode.none:
        fields["state_epoch"], fields["start_offset"] = 0, -1
    if leader_epoch:
        fields["leader_epoch"] = state.leader_epoch if state is not None else -1
    if batches:
        fields["state_batches"] = [
            {
                "first_offset": b.first_offset,
                "last_offset": b.last_offset,
                "delivery_state": b.delivery_state,
                "delivery_count": b.delivery_count,
            }
            for b in (state.batches if state is not None and not answer.error else ())
        ]
    return fields
