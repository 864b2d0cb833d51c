"""AlterConfigs and IncrementalAlterConfigs share this: apply topic config changes or refuse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import Op, config_denial
from odradek.server.context import RequestContext
from odradek.server.topic_configs import BROKER_RESOURCE, TOPIC_RESOURCE


def alter_resource(
    ctx: RequestContext,
    resource: Any,
    new_configs: Callable[[dict[str, str]], dict[str, str | None]],
    validate_only: bool,
) -> dict[str, Any]:
    """``new_configs`` maps the topic's current overrides to the complete new set."""
    kind, name = int(resource.resource_type), resource.resource_name
    result: dict[str, Any] = {
        "resource_type": kind,
        "resource_name": name,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    refused = config_denial(ctx, Op.ALTER_CONFIGS, kind, name)
    if refused is not None:
        result["error_code"] = refused
        return result
    try:
        if kind == TOPIC_RESOURCE:
            topic = ctx.services.topics.topic(name)
            if topic is None:
                raise KafkaError(
                    ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist"
                )
            ctx.services.topics.set_topic_configs(
                name, new_configs(dict(topic.configs)), validate_only=validate_only
            )
        elif kind == BROKER_RESOURCE:
            raise KafkaError(
                ErrorCode.invalid_request,
                "broker configs are static here: set them in the properties file",
            )
        else:
            raise KafkaError(ErrorCode.invalid_request, f"resource type {kind} is not supported")
    except KafkaError as e:
        result.update(error_code=e.code, error_message=e.message)
    return result
