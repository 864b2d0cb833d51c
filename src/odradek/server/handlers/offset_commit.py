"""OffsetCommit (8): store a group's consumed positions in ``__consumer_offsets``.

v10 names topics by id and is not served. Partitions the cluster does not have (as Kafka's
metadata cache; in a cluster the coordinator need not host them) are refused here with
UNKNOWN_TOPIC_OR_PARTITION; the rest go to the coordinator together, and their
answer waits until the commit is replicated.
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.messages import CommitRequest
from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import GROUP, TOPIC, Op, denied, permits
from odradek.server.context import RequestContext, Response
from odradek.server.offset_commits import commit_offsets, offsets_to_commit
from odradek.server.old_versions import respond
from odradek.server.partition_errors import partition_errors
from odradek.server.registry import handles

# OffsetCommit v9 introduced GROUP_ID_NOT_FOUND; older clients expect ILLEGAL_GENERATION.
_FIRST_VERSION_WITH_GROUP_ID_NOT_FOUND = 9


@handles(api_key=8, min_version=0, max_version=9, decode=old_messages.decoder(8))
async def handle_offset_commit(ctx: RequestContext, request: Any) -> Response:
    group_allowed = permits(ctx, Op.READ, GROUP, request.group_id)
    topics_refused = denied(ctx, Op.READ, TOPIC, (t.name for t in request.topics))

    def refusal(topic: str, _: int) -> ErrorCode | None:
        if not group_allowed:
            return ErrorCode.group_authorization_failed
        if topic in topics_refused:
            return ErrorCode.topic_authorization_failed
        return None

    commits, results = offsets_to_commit(ctx, request.topics, refusal)
    if commits:
        commit = CommitRequest(
            group_id=request.group_id,
            generation_id=int(request.generation_id_or_member_epoch),
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            offsets=tuple(commits),
        )
        committed = await commit_offsets(ctx, commit, lambda c: c.offsets.commit_offsets(commit))
        if ctx.version < _FIRST_VERSION_WITH_GROUP_ID_NOT_FOUND:
            committed = {
                tp: ErrorCode.illegal_generation if code == ErrorCode.group_id_not_found else code
                for tp, code in committed.items()
            }
        results.update(committed)
    return respond(
        ctx,
        throttle_time=0,
        topics=partition_errors(request.topics, results),
    )
