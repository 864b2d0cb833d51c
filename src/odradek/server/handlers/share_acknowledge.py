"""ShareAcknowledge (79): a share group member acknowledges records it acquired (ACCEPT, RELEASE,
REJECT, and from v2 RENEW) without fetching more; epoch -1 also closes its share session, which
releases what it still holds."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from odradek.protocol.errors import ErrorCode
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


@handles(api_key=79, min_version=1, max_version=2)
async def handle_share_acknowledge(ctx: RequestContext, request: Any) -> Response:
    services = ctx.services
    manager, sessions = services.share_partitions, services.share_sessions
    group_id, member_id = request.group_id, request.member_id
    refused = refusal(ctx, request)
    if refused is not None or manager is None or sessions is None:
        return share_answer(ctx, *(refused or (ErrorCode.unsupported_version, None)))
    outcome = sessions.acknowledge(group_id, member_id, int(request.share_session_epoch))
    lock_ms = manager.lock_ms(group_id)
    if outcome.error != ErrorCode.none:
        return share_answer(ctx, outcome.error, lock_ms=lock_ms)
    names = topic_names(ctx)
    renew = ctx.version >= 2 and bool(getattr(request, "is_renew_ack", False))
    keys = [
        (topic.topic_id, int(partition.partition_index), partition)
        for topic in request.topics
        for partition in topic.partitions
    ]
    # Each partition's acknowledgements written before the answer, all partitions at once.
    errors = await asyncio.gather(
        *(
            acknowledge(
                ctx, manager, group_id, member_id, names, (t, i), ack_batches(partition, renew)
            )
            for t, i, partition in keys
        )
    )
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, index, _), error in zip(keys, errors, strict=True):
        by_topic.setdefault(topic_id, []).append(
            {
                "partition_index": index,
                "error_code": error,
                "current_leader": leader(ctx, names.get(topic_id), index),
            }
        )
    if outcome.closed:
        release(manager, names, outcome.session)
    return share_answer(
        ctx,
        ErrorCode.none,
        lock_ms=lock_ms,
        responses=by_topic_list(by_topic),
    )
