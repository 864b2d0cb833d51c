"""ShareFetch (78): a share group member acknowledges what it was given and acquires more records
of the partitions in its share session, each locked for it for the group's record lock duration.
The reads and acquisitions are the share-partition manager's
(:mod:`odradek.cluster.share.manager`), the session the share session cache's
(:mod:`odradek.server.share_sessions`)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

from odradek.cluster.share.manager import ShareFetched, ShareFetchLimits
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import TOPIC, Op, denied
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.share_requests import (
    ack_batches,
    acknowledge,
    by_topic_list,
    leader,
    refusal,
    release,
    share_answer,
    topic_names,
)
from odradek.server.share_sessions import SharePartitionKey

# What a member asks for when it names no limit (max.poll.records' default).
DEFAULT_MAX_RECORDS = 500


async def _fetch(
    ctx: RequestContext,
    request: Any,
    names: dict[uuid.UUID, str],
    keys: list[SharePartitionKey],
) -> dict[SharePartitionKey, ShareFetched]:
    manager = ctx.services.share_partitions
    assert manager is not None
    max_records = int(request.max_records)
    limits = ShareFetchLimits(
        max_wait_ms=max(int(request.max_wait / datetime.timedelta(milliseconds=1)), 0),
        min_bytes=max(int(request.min_bytes), 0),
        max_bytes=max(int(request.max_bytes), 0),
        max_records=max_records if max_records > 0 else DEFAULT_MAX_RECORDS,
    )
    by_name = await manager.fetch(
        request.group_id,
        request.member_id,
        [(names[t], p) for t, p in keys],
        limits,
        api_key=ctx.header.api_key,
    )
    return {(t, p): by_name[(names[t], p)] for t, p in keys}


def _partition(
    ctx: RequestContext,
    names: dict[uuid.UUID, str],
    hidden: frozenset[str],
    key: SharePartitionKey,
    answer: ShareFetched | None,
    acks: dict[SharePartitionKey, ErrorCode],
    full: bool,
) -> dict[str, Any] | None:
    """A partition's entry of the response; None when an incremental response leaves it out
    (nothing acquired, acknowledged or wrong)."""
    topic_id, index = key
    name = names.get(topic_id)
    if name is None:
        error = ErrorCode.unknown_topic_id
    elif name in hidden:
        error = ErrorCode.topic_authorization_failed
    else:
        error = answer.error if answer is not None else ErrorCode.none
    acquired = answer.acquired if answer is not None else []
    if not (full or key in acks or error != ErrorCode.none or acquired):
        return None
    return {
        "partition_index": index,
        "error_code": error,
        "acknowledge_error_code": acks.get(key, ErrorCode.none),
        "current_leader": leader(ctx, name, index),
        "records": (answer.records if answer is not None and answer.records else b""),
        "acquired_records": [
            {
                "first_offset": r.first_offset,
                "last_offset": r.last_offset,
                "delivery_count": r.delivery_count,
            }
            for r in acquired
        ],
    }


def _partitions(
    request: Any,
) -> tuple[list[tuple[SharePartitionKey, Any]], list[SharePartitionKey]]:
    """The partitions a request names (with their acknowledgements), and those it forgets."""
    requested = [
        ((t.topic_id, int(p.partition_index)), p) for t in request.topics for p in t.partitions
    ]
    forgotten = [(t.topic_id, int(p)) for t in request.forgotten_topics_data for p in t.partitions]
    return requested, forgotten


def _responses(
    ctx: RequestContext,
    names: dict[uuid.UUID, str],
    hidden: frozenset[str],
    listed: list[SharePartitionKey],
    fetched: dict[SharePartitionKey, ShareFetched],
    acks: dict[SharePartitionKey, ErrorCode],
    full: bool,
) -> list[dict[str, Any]]:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for key in dict.fromkeys(listed):
        entry = _partition(ctx, names, hidden, key, fetched.get(key), acks, full)
        if entry is not None:
            by_topic.setdefault(key[0], []).append(entry)
    return by_topic_list(by_topic)


async def _acknowledge_all(
    ctx: RequestContext,
    request: Any,
    names: dict[uuid.UUID, str],
    requested: list[tuple[SharePartitionKey, Any]],
    renew: bool,
) -> dict[SharePartitionKey, ErrorCode]:
    manager = ctx.services.share_partitions
    assert manager is not None
    acked = [(key, partition) for key, partition in requested if partition.acknowledgement_batches]
    errors = await asyncio.gather(
        *(
            acknowledge(
                ctx,
                manager,
                request.group_id,
                request.member_id,
                names,
                key,
                ack_batches(partition, renew),
            )
            for key, partition in acked
        )
    )
    return {key: error for (key, _), error in zip(acked, errors, strict=True)}


@handles(api_key=78, min_version=1, max_version=2)
async def handle_share_fetch(ctx: RequestContext, request: Any) -> Response:
    services = ctx.services
    manager, sessions = services.share_partitions, services.share_sessions
    group_id, member_id = request.group_id, request.member_id
    refused = refusal(ctx, request)
    if refused is not None or manager is None or sessions is None:
        return share_answer(ctx, *(refused or (ErrorCode.unsupported_version, None)))
    # The group's configs (where it starts, its lock duration, its isolation) before it reads.
    await services.groups.group_configs.ensure(group_id)
    names = topic_names(ctx)
    requested, forgotten = _partitions(request)
    epoch = int(request.share_session_epoch)
    if epoch == 0 and any(p.acknowledgement_batches for _, p in requested):
        return share_answer(
            ctx, ErrorCode.invalid_request, "Acknowledge data present on initial fetch."
        )
    outcome = sessions.fetch(group_id, member_id, epoch, [k for k, _ in requested], forgotten)
    release(manager, names, outcome.replaced)
    lock_ms = manager.lock_ms(group_id)
    session = outcome.session
    if outcome.error != ErrorCode.none or session is None:
        return share_answer(ctx, outcome.error, lock_ms=lock_ms)
    renew = ctx.version >= 2 and bool(getattr(request, "is_renew_ack", False))
    acks = await _acknowledge_all(ctx, request, names, requested, renew)
    # What the member still holds of a partition it forgets (after its acknowledgements, which
    # the same request may carry) is available again.
    manager.release(group_id, member_id, [(names[t], p) for t, p in forgotten if t in names])
    hidden = denied(ctx, Op.READ, TOPIC, {n for t, n in names.items() if t in session.partitions})
    fetched: dict[SharePartitionKey, ShareFetched] = {}
    if not outcome.closed and not renew:
        keys = [k for k in session.partitions if names.get(k[0]) not in (None, *hidden)]
        fetched = await _fetch(ctx, request, names, keys)
    if outcome.closed:
        release(manager, names, session)
    listed = [*(session.partitions if outcome.full else ()), *acks, *fetched]
    responses = _responses(ctx, names, hidden, listed, fetched, acks, outcome.full)
    return share_answer(ctx, ErrorCode.none, lock_ms=lock_ms, responses=responses)
