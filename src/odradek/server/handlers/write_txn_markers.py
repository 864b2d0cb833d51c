"""WriteTxnMarkers (27): the transaction coordinator's COMMIT/ABORT markers, written to each
partition of a transaction this broker leads, answered once they are replicated."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.view import CONSUMER_OFFSETS
from odradek.cluster.replication.delayed import DelayedProduce
from odradek.cluster.replication.partition import Partition
from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles

# Kafka waits for a marker's replication as long as request.timeout.ms (its default here).
REPLICATION_TIMEOUT_MS = 30_000


def _write(
    ctx: RequestContext, marker: Any, topic: str, index: int
) -> tuple[ErrorCode, Partition | None, int]:
    """One partition's marker: its error, or the partition and the offset after the marker
    that the high watermark must reach."""
    partition = ctx.services.topics.partition(topic, index)
    if partition is None:
        return ErrorCode.unknown_topic_or_partition, None, 0
    try:
        info = partition.write_txn_marker(
            int(marker.producer_id),
            int(marker.producer_epoch),
            int(marker.coordinator_epoch),
            bool(marker.transaction_result),
            ctx.services.clock.time_ms(),
            int(getattr(marker, "transaction_version", 0)),  # v2+
        )
    except KafkaError as e:
        return e.code, None, 0
    return ErrorCode.none, partition, info.last_offset + 1


@handles(api_key=27, min_version=0, max_version=2, decode=old_messages.decoder(27))
async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> Response:
    # (marker index, topic, partition index) → error code; the pending ones wait below.
    codes: dict[tuple[int, str, int], ErrorCode] = {}
    pending: list[tuple[tuple[int, str, int], Partition, int]] = []
    allowed = permits_cluster(ctx, Op.CLUSTER_ACTION)  # a broker's request, not a client's
    for m, marker in enumerate(request.markers):
        for topic in marker.topics:
            for index in topic.partition_indexes:
                key = (m, topic.name, int(index))
                code, partition, offset = (
                    _write(ctx, marker, topic.name, int(index))
                    if allowed
                    else (ErrorCode.cluster_authorization_failed, None, 0)
                )
                codes[key] = code
                if partition is not None:
                    pending.append((key, partition, offset))

    # Answered once the markers are committed: the wait of an acks=all produce.
    delayed = DelayedProduce([(p, offset) for _, p, offset in pending])
    if pending and not delayed.try_complete():
        await ctx.services.purgatory.park(
            delayed.watched(),
            delayed.try_complete,
            REPLICATION_TIMEOUT_MS / 1000,
            ctx.header.api_key,
        )
    for (key, _, _), outcome in zip(pending, delayed.outcomes(), strict=True):
        codes[key] = outcome
        m, topic, index = key
        if topic == CONSUMER_OFFSETS and codes[key] == ErrorCode.none:
            # As Kafka: the group coordinator learns the outcome once the marker is committed.
            marker = request.markers[m]
            ctx.services.groups.transaction_completed(
                index, int(marker.producer_id), bool(marker.transaction_result)
            )
    return respond(
        ctx,
        markers=[
            {
                "producer_id": int(marker.producer_id),
                "topics": [
                    {
                        "name": topic.name,
                        "partitions": [
                            {
                                "partition_index": int(index),
                                "error_code": codes[(m, topic.name, int(index))],
                            }
                            for index in topic.partition_indexes
                        ],
                    }
                    for topic in marker.topics
                ],
            }
            for m, marker in enumerate(request.markers)
        ],
    )
