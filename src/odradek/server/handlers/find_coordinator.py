"""FindCoordinator (10): a group's coordinator is the leader of its partition of
``__consumer_offsets``, a transactional id's the leader of its partition of
``__transaction_state``, as the cluster view has them. Each internal topic is created when the
first key looks for its coordinator, as Kafka creates it."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.view import CONSUMER_OFFSETS, NO_NODE, leader_endpoint
from odradek.coordinator.transaction.runtime import TXN_TOPIC
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import (
    AUTHORIZATION_ERRORS,
    GROUP,
    TRANSACTIONAL_ID,
    Op,
    permits,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

GROUP_KEY = 0
TRANSACTION_KEY = 1


async def _find(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    missing: dict[str, Any] = {"key": key, "node_id": NO_NODE, "host": "", "port": -1}
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        return missing | {
            "error_code": ErrorCode.invalid_request,
            "error_message": f"unknown coordinator key type {key_type}",
        }
    rtype = GROUP if key_type == GROUP_KEY else TRANSACTIONAL_ID
    if not permits(ctx, Op.DESCRIBE, rtype, key):
        return missing | {"error_code": AUTHORIZATION_ERRORS[rtype], "error_message": None}
    services = ctx.services
    transactions = services.transactions
    try:
        if key_type == GROUP_KEY:
            await services.groups.offsets_topic.ensure()
        else:
            await transactions.state_topic.ensure()
    except KafkaError as e:
        return missing | {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": e.message,
        }
    if key_type == GROUP_KEY:
        topic = CONSUMER_OFFSETS
        coordinator = services.cluster.group_coordinator(key)
    else:
        topic = TXN_TOPIC
        index = transactions.coordinator.partition_for(key)
        coordinator = leader_endpoint(services.cluster, TXN_TOPIC, index)
    if coordinator is None:
        return missing | {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": f"the partition of {topic} for {key!r} has no leader",
        }
    return {
        "key": key,
        "node_id": coordinator.node_id,
        "host": coordinator.host,
        "port": coordinator.port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }


@handles(api_key=10, min_version=0, max_version=6)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Response:
    key_type = int(getattr(request, "key_type", GROUP_KEY))
    if ctx.version >= 4:
        return ctx.respond(
            throttle_time=0,
            coordinators=[await _find(ctx, key, key_type) for key in request.coordinator_keys],
        )
    found = await _find(ctx, request.key, key_type)
    del found["key"]
    return ctx.respond(throttle_time=0, **found)
