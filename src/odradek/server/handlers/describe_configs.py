"""DescribeConfigs (32): topic, broker and group configs with their sources, and client
metrics subscriptions (KIP-714)."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.group_configs import (
    GROUP_CONFIG_SOURCE,
    GROUP_CONFIGS,
    GROUP_RESOURCE,
)
from odradek.protocol import old_messages
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import Op, config_denial
from odradek.server.context import RequestContext, Response
from odradek.server.old_versions import respond
from odradek.server.registry import handles
from odradek.server.topic_configs import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    describe_broker_configs,
    describe_topic_configs,
)
from odradek.telemetry.subscriptions import CLIENT_METRICS_CONFIGS, CLIENT_METRICS_RESOURCE

# Kafka's ConfigSource ids.
DEFAULT_CONFIG, CLIENT_METRICS_CONFIG = 5, 7


async def _describe(ctx: RequestContext, resource: Any, synonyms: bool) -> dict[str, Any]:
    kind, name = int(resource.resource_type), resource.resource_name
    keys = list(resource.configuration_keys) if resource.configuration_keys is not None else None
    result: dict[str, Any] = {
        "resource_type": kind,
        "resource_name": name,
        "error_code": ErrorCode.none,
        "error_message": None,
        "configs": [],
    }
    refused = config_denial(ctx, Op.DESCRIBE_CONFIGS, kind, name)
    if refused is not None:
        result.update(error_code=refused, error_message=None)
    elif kind == TOPIC_RESOURCE:
        if ctx.services.topics.topic(name) is None:
            result.update(
                error_code=ErrorCode.unknown_topic_or_partition,
                error_message=f"topic {name!r} does not exist",
            )
        else:
            result["configs"] = describe_topic_configs(
                ctx.services, name, keys, include_synonyms=synonyms
            )
    elif kind == BROKER_RESOURCE:
        node_id = ctx.services.cluster.node_id
        if name not in ("", str(node_id)):
            result.update(
                error_code=ErrorCode.invalid_request,
                error_message=f"this is broker {node_id}, not {name!r}",
            )
        else:
            result["configs"] = await describe_broker_configs(
                ctx.services, keys, include_synonyms=synonyms
            )
    elif kind == CLIENT_METRICS_RESOURCE:
        result["configs"] = await _client_metrics_configs(ctx, name, keys)
    elif kind == GROUP_RESOURCE:
        result["configs"] = await _group_configs(ctx, name, keys)
    else:
        result.update(
            error_code=ErrorCode.invalid_request,
            error_message=f"resource type {kind} is not supported",
        )
    return result


async def _client_metrics_configs(
    ctx: RequestContext, name: str, keys: list[str] | None
) -> list[dict[str, Any]]:
    """A client metrics subscription's configs (KIP-714), its defaults for those not set."""
    configured = (await ctx.services.topics.store.client_metrics_configs()).get(name, {})
    return [
        {
            "name": config,
            "value": configured.get(config, definition.default),
            "read_only": False,
            "is_default": config not in configured,
            "config_source": CLIENT_METRICS_CONFIG if config in configured else DEFAULT_CONFIG,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": int(definition.kind),
            "documentation": definition.doc,
        }
        for config, definition in CLIENT_METRICS_CONFIGS.items()
        if keys is None or config in keys
    ]


async def _group_configs(
    ctx: RequestContext, group: str, keys: list[str] | None
) -> list[dict[str, Any]]:
    group_configs = ctx.services.groups.group_configs
    await group_configs.read(group)
    return [
        {
            "name": name,
            "value": value,
            "read_only": False,
            "is_default": source != GROUP_CONFIG_SOURCE,
            "config_source": source,
            "is_sensitive": False,
            "synonyms": [],
            "config_type": int(GROUP_CONFIGS[name].kind),
            "documentation": GROUP_CONFIGS[name].doc,
        }
        for name, (value, source) in group_configs.effective(group).items()
        if keys is None or name in keys
    ]


@handles(api_key=32, min_version=0, max_version=4, decode=old_messages.decoder(32))
async def handle_describe_configs(ctx: RequestContext, request: Any) -> Response:
    synonyms = bool(getattr(request, "include_synonyms", False))
    return respond(
        ctx,
        throttle_time=0,
        results=[await _describe(ctx, resource, synonyms) for resource in request.resources],
    )
