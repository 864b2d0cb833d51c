"""DeleteTopics (20): remove topics and their logs, by name or (v6) by topic id."""

from __future__ import annotations

from typing import Any

from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.deadline import request_timeout_ms, within_timeout
from odradek.server.mutation_quota import MutationQuota
from odradek.server.old_versions import respond
from odradek.server.registry import handles


async def _delete(
    ctx: RequestContext, name: str | None, topic_id: Any, timeout_ms: int, quota: MutationQuota
) -> dict[str, Any]:
    topics = ctx.services.topics
    if name is None:
        match = [t for t in topics.topics() if t.topic_id == topic_id]
        if not match:
            return {
                "name": None,
                "topic_id": topic_id,
                "error_code": ErrorCode.unknown_topic_id,
                "error_message": f"no topic has id {topic_id}",
            }
        name = match[0].name
    if not permits(ctx, Op.DELETE, TOPIC, name):
        return {"name": name, "error_code": ErrorCode.topic_authorization_failed}
    try:
        quota.check()
        deleted = await within_timeout(topics.delete_topic(name), timeout_ms)
    except KafkaError as e:
        return {"name": name, "error_code": e.code, "error_message": e.message}
    quota.record(deleted.partitions)
    return {"name": name, "topic_id": deleted.topic_id, "error_code": ErrorCode.none}


@handles(api_key=20, min_version=0, max_version=6, decode=old_messages.decoder(20))
async def handle_delete_topics(ctx: RequestContext, request: Any) -> Response:
    if ctx.version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics]
    else:
        targets = [(name, None) for name in request.topic_names]
    timeout_ms = request_timeout_ms(request)
    quota = MutationQuota(ctx, strict=ctx.version >= 5, validate_only=False)
    responses = [
        await _delete(ctx, name, topic_id, timeout_ms, quota) for name, topic_id in targets
    ]
    return respond(ctx, throttle_time=quota.throttle_ms(), responses=responses)
