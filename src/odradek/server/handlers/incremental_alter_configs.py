"""IncrementalAlterConfigs (44): set, delete, append to or subtract from single configs of a
topic, of a broker (its dynamic configs: the replication throttle rates), or of a group (its
``share.*`` configs)."""

from __future__ import annotations

from typing import Any

from odradek.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigDef,
    ConfigType,
)
from odradek.coordinator.group.group_configs import GROUP_CONFIGS, GROUP_RESOURCE
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.config_changes import alter_resource
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.topic_configs import BROKER_RESOURCE
from odradek.telemetry.subscriptions import CLIENT_METRICS_CONFIGS, CLIENT_METRICS_RESOURCE

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _definition(resource_type: int, name: str) -> ConfigDef:
    if resource_type == CLIENT_METRICS_RESOURCE:
        if name in CLIENT_METRICS_CONFIGS:
            return CLIENT_METRICS_CONFIGS[name]
        raise KafkaError(ErrorCode.invalid_config, f"unknown client metrics config {name!r}")
    if resource_type == GROUP_RESOURCE:
        if name in GROUP_CONFIGS:
            return GROUP_CONFIGS[name]
        raise KafkaError(ErrorCode.invalid_config, f"unknown group config {name!r}")
    if resource_type == BROKER_RESOURCE:
        if name in DYNAMIC_BROKER_CONFIGS:
            return BROKER_CONFIGS[name]
    elif name in TOPIC_CONFIGS:
        return TOPIC_CONFIGS[name][0]
    kind = "broker" if resource_type == BROKER_RESOURCE else "topic"
    raise KafkaError(ErrorCode.invalid_config, f"unknown {kind} config {name!r}")


def _apply(
    ctx: RequestContext, current: dict[str, str], ops: Any, resource_type: int
) -> dict[str, str | None]:
    updated: dict[str, str | None] = dict(current)
    for op in ops:
        name, value, kind = op.name, op.value, int(op.config_operation)
        definition = _definition(resource_type, name)
        if kind == SET:
            updated[name] = value
        elif kind == DELETE:
            updated.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            if definition.kind is not ConfigType.LIST:
                raise KafkaError(ErrorCode.invalid_config, f"{name} is not a list config")
            base = updated.get(name)
            if base is None:
                base = (
                    definition.default or ""
                    if resource_type == CLIENT_METRICS_RESOURCE
                    else ctx.services.config.topic_default(name)
                )
            items = [i for i in base.split(",") if i]
            change = [i for i in (value or "").split(",") if i]
            if kind == APPEND:
                items += [i for i in change if i not in items]
            else:
                items = [i for i in items if i not in change]
            updated[name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {kind}")
    return updated


@handles(api_key=44, min_version=0, max_version=1)
async def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> Response:
    responses = []
    for resource in request.resources:
        ops = resource.configs

        def change(
            current: dict[str, str], ops: Any = ops, kind: int = int(resource.resource_type)
        ) -> dict[str, str | None]:
            return _apply(ctx, current, ops, kind)

        responses.append(await alter_resource(ctx, resource, change, bool(request.validate_only)))
    return ctx.respond(throttle_time=0, responses=responses)
