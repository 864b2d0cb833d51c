"""CreateTopics (19): validate and create topics with partitions and configs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import TOPIC, Op, permits, permits_cluster
from odradek.server.context import RequestContext, Response
from odradek.server.deadline import request_timeout_ms, within_timeout
from odradek.server.mutation_quota import MutationQuota
from odradek.server.old_versions import respond
from odradek.server.registry import handles
from odradek.server.topic_configs import describe_topic_configs

log = logging.getLogger(__name__)


def _replication_factor(ctx: RequestContext, item: Any, assignments: dict[int, list[int]]) -> int:
    """The replication factor the topic was created with, as the topic manager resolved it."""
    if assignments:
        return len(next(iter(assignments.values())))
    requested = int(item.replication_factor)
    return (
        requested if requested != -1 else ctx.services.config.get_int("default.replication.factor")
    )


def _failed(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
        "topic_config_error_code": 0,
    }


async def _create(
    ctx: RequestContext, item: Any, validate_only: bool, timeout_ms: int, quota: MutationQuota
) -> dict[str, Any]:
    topics = ctx.services.topics
    assignments = {int(a.partition_index): [int(b) for b in a.broker_ids] for a in item.assignments}
    configs = {c.name: c.value for c in item.configs}
    if not (permits_cluster(ctx, Op.CREATE) or permits(ctx, Op.CREATE, TOPIC, item.name)):
        return _failed(item.name, ErrorCode.topic_authorization_failed, None)
    try:
        quota.check()
        topic = await within_timeout(
            topics.create_topic(
                item.name,
                int(item.num_partitions),
                int(item.replication_factor),
                configs,
                assignments=assignments or None,
                validate_only=validate_only,
            ),
            timeout_ms,
        )
    except KafkaError as e:
        return _failed(item.name, e.code, e.message)
    except MetadataStoreError as e:
        # The store is unreachable (ZooKeeper down) or refused the write: as Kafka's brokers
        # answer a ZooKeeper client timeout, the topic fails and the connection stays.
        return _failed(item.name, ErrorCode.unknown_server_error, str(e))
    except OSError as e:
        # The disk side failed (out of file descriptors, a full or failing disk) after the
        # topic was recorded: its logs open when the broker can (at the latest on restart).
        log.warning("cannot create the logs of topic %s: %s", item.name, e)
        return _failed(
            item.name, ErrorCode.kafka_storage_error, f"cannot create the topic's logs: {e}"
        )
    quota.record(topic.partitions)
    return {
        "name": topic.name,
        "topic_id": topic.topic_id,
        "error_code": ErrorCode.none,
        "error_message": None,
        "num_partitions": topic.partitions,
        "replication_factor": _replication_factor(ctx, item, assignments),
        "configs": [
            {
                "name": c["name"],
                "value": c["value"],
                "read_only": c["read_only"],
                "config_source": c["config_source"],
                "is_sensitive": False,
            }
            for c in describe_topic_configs(
                ctx.services, topic.name, configs_override=topic.configs
            )
        ],
    }


@handles(api_key=19, min_version=0, max_version=7, decode=old_messages.decoder(19))
async def handle_create_topics(ctx: RequestContext, request: Any) -> Response:
    seen: set[str] = set()
    results: list[Awaitable[dict[str, Any]]] = []
    timeout_ms = request_timeout_ms(request)
    validate_only = bool(request.validate_only)
    quota = MutationQuota(ctx, strict=ctx.version >= 6, validate_only=validate_only)
    for item in request.topics:
        if item.name in seen:
            results.append(
                _answered(
                    {
                        "name": item.name,
                        "error_code": ErrorCode.invalid_request,
                        "error_message": "topic named twice in one request",
                    }
                )
            )
            continue
        seen.add(item.name)
        results.append(_create(ctx, item, validate_only, timeout_ms, quota))
    # Every topic's write in flight at once, each bounded by the request's timeout.
    created = list(await asyncio.gather(*results))
    return respond(ctx, throttle_time=quota.throttle_ms(), topics=created)


async def _answered(result: dict[str, Any]) -> dict[str, Any]:
    return result
