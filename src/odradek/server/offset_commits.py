"""The group handlers' side of answering once committed: an answer of the group coordinator is
sent once the records it may depend on are committed in ``__consumer_offsets`` (see
:mod:`odradek.coordinator.runtime` for why every answer waits on its
:class:`~odradek.coordinator.internal_topic.CommitPoint`; the runtime does the waiting, in the
broker's purgatory, for at most ``offsets.commit.timeout.ms``, then Kafka's mapping applies:
REQUEST_TIMED_OUT → COORDINATOR_NOT_AVAILABLE). Runs on the broker's event loop, called from
handlers only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from odradek.coordinator.internal_topic import CommitPoint
from odradek.coordinator.messages import OffsetCommit
from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext


async def committed(ctx: RequestContext, points: Sequence[CommitPoint]) -> list[ErrorCode]:
    """Wait until every point is committed (or the timeout); each point's outcome: NONE, or the
    error to answer with instead."""
    return await ctx.services.groups.committed(points, ctx.header.api_key)


async def group_committed(ctx: RequestContext, group_id: str) -> ErrorCode:
    """Wait for an answer about ``group_id`` made just now."""
    (outcome,) = await committed(ctx, [ctx.services.groups.commit_point(group_id)])
    return outcome


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
