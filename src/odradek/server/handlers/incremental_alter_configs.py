"""IncrementalAlterConfigs (44): set, delete, append to or subtract from single topic configs."""

from __future__ import annotations

from typing import Any

from odradek.config import TOPIC_CONFIGS, ConfigType
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.config_changes import alter_resource
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _apply(ctx: RequestContext, current: dict[str, str], ops: Any) -> dict[str, str | None]:
    updated: dict[str, str | None] = dict(current)
    for op in ops:
        name, value, kind = op.name, op.value, int(op.config_operation)
        if name not in TOPIC_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"unknown topic config {name!r}")
        if kind == SET:
            updated[name] = value
        elif kind == DELETE:
            updated.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            if TOPIC_CONFIGS[name][0].kind is not ConfigType.LIST:
                raise KafkaError(ErrorCode.invalid_config, f"{name} is not a list config")
            base = updated.get(name)
            if base is None:
                base = ctx.services.config.topic_default(name)
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

        def change(current: dict[str, str], ops: Any = ops) -> dict[str, str | None]:
            return _apply(ctx, current, ops)

        responses.append(alter_resource(ctx, resource, change, bool(request.validate_only)))
    return ctx.respond(throttle_time=0, responses=responses)
