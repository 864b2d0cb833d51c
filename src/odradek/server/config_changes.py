"""AlterConfigs and IncrementalAlterConfigs share this: apply topic config changes, changes of a
broker's dynamic configs (the replication throttle rates; the rest is static), of a group's
configs and of client metrics subscriptions, or refuse."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from odradek.config import BROKER_CONFIGS, DYNAMIC_BROKER_CONFIGS, ConfigError
from odradek.coordinator.group.group_configs import GROUP_RESOURCE, validate
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.authorize import Op, config_denial
from odradek.server.context import RequestContext
from odradek.server.topic_configs import BROKER_RESOURCE, TOPIC_RESOURCE
from odradek.telemetry.subscriptions import CLIENT_METRICS_RESOURCE
from odradek.telemetry.subscriptions import validate as validate_client_metrics


async def alter_resource(
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
            await ctx.services.topics.set_topic_configs(
                name, new_configs(dict(topic.configs)), validate_only=validate_only
            )
        elif kind == BROKER_RESOURCE:
            await _alter_broker(ctx, name, new_configs, validate_only)
        elif kind == CLIENT_METRICS_RESOURCE:
            await _alter_client_metrics(ctx, name, new_configs, validate_only)
        elif kind == GROUP_RESOURCE:
            await _alter_group(ctx, name, new_configs, validate_only)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"resource type {kind} is not supported")
    except KafkaError as e:
        result.update(error_code=e.code, error_message=e.message)
    return result


async def _alter_client_metrics(
    ctx: RequestContext,
    name: str,
    new_configs: Callable[[dict[str, str]], dict[str, str | None]],
    validate_only: bool,
) -> None:
    """A client metrics subscription (KIP-714), kept in the metadata store for every broker;
    all its configs removed, it is gone."""
    store = ctx.services.topics.store

    async def read(subscription: str) -> dict[str, str]:
        return (await store.client_metrics_configs()).get(subscription, {})

    await _alter_named(
        name,
        "the client metrics subscription",
        read,
        validate_client_metrics,
        store.set_client_metrics_configs,
        new_configs,
        validate_only,
    )


async def _alter_group(
    ctx: RequestContext,
    name: str,
    new_configs: Callable[[dict[str, str]], dict[str, str | None]],
    validate_only: bool,
) -> None:
    """A group's configs (``share.*``), kept in the metadata store for every broker."""
    group_configs = ctx.services.groups.group_configs
    await _alter_named(
        name, "a group", group_configs.read, validate, group_configs.set, new_configs, validate_only
    )


async def _alter_named(
    name: str,
    what: str,
    read: Callable[[str], Awaitable[dict[str, str]]],
    check: Callable[[dict[str, str]], None],
    write: Callable[[str, dict[str, str]], Awaitable[None]],
    new_configs: Callable[[dict[str, str]], dict[str, str | None]],
    validate_only: bool,
) -> None:
    """A named resource's configs: read, changed, checked (ConfigError), written unless only
    validating."""
    if not name:
        raise KafkaError(ErrorCode.invalid_request, f"name {what}")
    updated = new_configs(await read(name))
    valid = {k: v for k, v in updated.items() if v is not None}
    try:
        check(valid)
    except ConfigError as e:
        raise KafkaError(ErrorCode.invalid_config, str(e)) from e
    if not validate_only:
        await write(name, valid)


async def _alter_broker(
    ctx: RequestContext,
    name: str,
    new_configs: Callable[[dict[str, str]], dict[str, str | None]],
    validate_only: bool,
) -> None:
    """A broker's dynamic configs, kept in the metadata store (``/config/brokers/<id>``) where
    that broker watches them; any broker may change any broker's, as in Kafka's ZooKeeper mode."""
    try:
        broker = int(name)
    except ValueError:
        raise KafkaError(
            ErrorCode.invalid_request,
            "name a broker id: cluster-wide broker config defaults are not supported",
        ) from None
    store = ctx.services.topics.store
    updated = new_configs(await store.broker_configs(broker))
    static = sorted(set(updated) - DYNAMIC_BROKER_CONFIGS)
    if static:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"broker configs {static} are static here: set them in the properties file "
            f"(dynamic: {sorted(DYNAMIC_BROKER_CONFIGS)})",
        )
    valid = {k: v for k, v in updated.items() if v is not None}
    for key, value in valid.items():
        try:
            BROKER_CONFIGS[key].parse(value)
        except ConfigError as e:
            raise KafkaError(ErrorCode.invalid_config, str(e)) from e
    if not validate_only:
        await store.set_broker_configs(broker, valid)
