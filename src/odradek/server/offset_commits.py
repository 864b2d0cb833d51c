"""What OffsetCommit and TxnOffsetCommit share: the request's partitions as the offsets to hand
the group coordinator, the answers of those refused before it, and the commit through the
coordinator runtime. Called from handlers only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.group.coordinator import GroupCoordinator
from odradek.coordinator.group.messages import (
    CommitRequest,
    OffsetCommit,
    TopicPartition,
    TxnCommitRequest,
)
from odradek.coordinator.group.offsets import commit_write_error
from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext


def offsets_to_commit(
    ctx: RequestContext,
    topics: Iterable[Any],
    refusal: Callable[[str, int], ErrorCode | None] = lambda topic, partition: None,
) -> tuple[list[OffsetCommit], dict[tuple[str, int], ErrorCode]]:
    """An OffsetCommit's or TxnOffsetCommit's partitions: the offsets to hand the coordinator,
    and the answers of those refused — by ``refusal`` (authorization), or
    UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have (as Kafka's metadata
    cache; in a cluster the coordinator need not host it)."""
    cluster = ctx.services.cluster
    commits: list[OffsetCommit] = []
    refused: dict[tuple[str, int], ErrorCode] = {}
    for topic in topics:
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            code = refusal(*tp)
            if code is None and cluster.partition_info(*tp) is None:
                code = ErrorCode.unknown_topic_or_partition
            if code is not None:
                refused[tp] = code
                continue
            commits.append(
                OffsetCommit(
                    topic.name,
                    tp[1],
                    int(p.committed_offset),
                    int(getattr(p, "committed_leader_epoch", -1)),
                    p.committed_metadata,
                )
            )
    return commits, refused


async def commit_offsets(
    ctx: RequestContext,
    request: CommitRequest | TxnCommitRequest,
    op: Callable[[GroupCoordinator], dict[TopicPartition, ErrorCode]],
) -> dict[TopicPartition, ErrorCode]:
    """Each partition's answer to ``request``, once ``op`` (its commit) is written and
    committed; when the write failed, every partition's: refused by the log (too large is
    INVALID_COMMIT_OFFSET_SIZE, as Kafka answers committers), or not committed in time."""
    try:
        return await ctx.services.groups.write(request.group_id, op, api_key=ctx.header.api_key)
    except CoordinatorError as e:
        code = commit_write_error(e.refused) if e.refused != ErrorCode.none else e.code
        return dict.fromkeys(((o.topic, o.partition) for o in request.offsets), code)
