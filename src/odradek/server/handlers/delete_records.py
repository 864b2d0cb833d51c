"""DeleteRecords (21): move partitions' log start offsets forward."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import TOPIC, Op, permits
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _delete_before(ctx: RequestContext, topic: str, index: int, offset: int) -> dict[str, Any]:
    partition = ctx.services.topics.partition(topic, index)
    if partition is None or not permits(ctx, Op.DELETE, TOPIC, topic):
        return {
            "partition_index": index,
            "low_watermark": -1,
            "error_code": ErrorCode.unknown_topic_or_partition
            if partition is None
            else ErrorCode.topic_authorization_failed,
        }
    try:
        low = partition.delete_records_before(offset)
    except KafkaError as e:
        return {"partition_index": index, "low_watermark": -1, "error_code": e.code}
    return {"partition_index": index, "low_watermark": low, "error_code": ErrorCode.none}


@handles(api_key=21, min_version=0, max_version=2)
async def handle_delete_records(ctx: RequestContext, request: Any) -> Response:
    response = ctx.respond(
        throttle_time=0,
        topics=[
            {
                "name": topic.name,
                "partitions": [
                    _delete_before(ctx, topic.name, int(p.partition_index), int(p.offset))
                    for p in topic.partitions
                ],
            }
            for topic in request.topics
        ],
    )
    # The raised log start offset must outlive a crash before the periodic checkpoint.
    ctx.services.logs.checkpoint()
    return response
