"""FindCoordinator (10): a group's coordinator is the leader of its partition of
``__consumer_offsets``, a transactional id's the leader of its partition of
``__transaction_state``, a share-partition's (key type 2, ``groupId:topicId:partition``, asked
by brokers: CLUSTER_ACTION) the leader of its partition of ``__share_group_state``, as the
cluster view has them. Each internal topic is created when the first key looks for its
coordinator, as Kafka creates it."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.view import CONSUMER_OFFSETS, NO_NODE, leader_endpoint
from odradek.coordinator.share.runtime import SHARE_STATE_TOPIC
from odradek.coordinator.transaction.runtime import TXN_TOPIC
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import (
    AUTHORIZATION_ERRORS,
    GROUP,
    TRANSACTIONAL_ID,
    Op,
    permits,
    permits_cluster,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2


def _is_share_key(key: str) -> bool:
    """``groupId:topicId:partition`` (the group id may itself hold colons)."""
    parts = key.rsplit(":", 2)
    return len(parts) == 3 and bool(parts[0]) and len(parts[1]) == 22 and parts[2].isdigit()


async def _find_share(ctx: RequestContext, key: str, missing: dict[str, Any]) -> dict[str, Any]:
    if not permits_cluster(ctx, Op.CLUSTER_ACTION):
        return missing | {
            "error_code": ErrorCode.cluster_authorization_failed,
            "error_message": None,
        }
    runtime = ctx.services.share_states
    if runtime is None or not _is_share_key(key):
        return missing | {
            "error_code": ErrorCode.invalid_request,
            "error_message": f"{key!r} is not a share-partition key",
        }
    try:
        await runtime.state_topic.ensure()
    except KafkaError as e:
        return missing | {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": e.message,
        }
    coordinator = leader_endpoint(
        ctx.services.cluster, SHARE_STATE_TOPIC, runtime.shard.partition_for(key)
    )
    if coordinator is None:
        return missing | {
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": f"the partition of {SHARE_STATE_TOPIC} for {key!r} has no leader",
        }
    return {
        "key": key,
        "node_id": coordinator.node_id,
        "host": coordinator.host,
        "port": coordinator.port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }


async def _find(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    missing: dict[str, Any] = {"key": key, "node_id": NO_NODE, "host": "", "port": -1}
    if key_type == SHARE_KEY:
        return await _find_share(ctx, key, missing)
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
