"""ControlledShutdown (7): a stopping broker asks the controller to move its leaderships away.

kio has no schema for it (KRaft replaced it), so requests and responses are encoded by
:mod:`odradek.protocol.controlled_shutdown`. A broker that is the whole cluster answers at once
with nothing left to move, as a ZooKeeper-era controller does for partitions with one replica.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol import controlled_shutdown as codec
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import Op, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(
    api_key=codec.API_KEY,
    min_version=0,
    max_version=3,
    decode=codec.decode_request,
)
async def handle_controlled_shutdown(ctx: RequestContext, request: Any) -> Response:
    assert isinstance(request, codec.ControlledShutdownRequest)
    controller = ctx.services.controller
    error = ErrorCode.none
    remaining: list[codec.RemainingPartition] = []
    if not permits_cluster(ctx, Op.CLUSTER_ACTION):
        error = ErrorCode.cluster_authorization_failed
    elif controller is not None:
        try:
            led = await controller.controlled_shutdown(request.broker_id, request.broker_epoch)
        except KafkaError as e:
            error = e.code
        else:
            remaining = [codec.RemainingPartition(tp.topic, tp.partition) for tp in sorted(led)]
    return codec.encode_response(
        ctx.version,
        ctx.header.correlation_id,
        codec.ControlledShutdownResponse(error, tuple(remaining)),
    )
