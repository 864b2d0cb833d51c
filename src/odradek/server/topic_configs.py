"""Config descriptions shared by DescribeConfigs, CreateTopics and the CLI."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigType

if TYPE_CHECKING:
    from odradek.server.services import BrokerServices

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4

DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


def describe_topic_configs(
    services: BrokerServices,
    topic: str,
    names: list[str] | None = None,
    *,
    include_synonyms: bool = False,
    configs_override: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    metadata = services.topics.topic(topic)
    overrides = (
        configs_override if configs_override is not None else (metadata.configs if metadata else {})
    )
    described = []
    for name in sorted(TOPIC_CONFIGS) if names is None else names:
        if name not in TOPIC_CONFIGS:
            continue
        definition, synonym = TOPIC_CONFIGS[name]
        broker_value = services.config.topic_default(name)
        broker_source = (
            STATIC_BROKER_CONFIG
            if services.config.topic_source(name) == "static"
            else DEFAULT_CONFIG
        )
        synonyms = []
        if name in overrides:
            synonyms.append(
                {"name": name, "value": overrides[name], "source": DYNAMIC_TOPIC_CONFIG}
            )
        if synonym is not None:
            synonyms.append({"name": synonym, "value": broker_value, "source": broker_source})
        if broker_source != DEFAULT_CONFIG or synonym is None:
            # Last, as Kafka lists them: the value that applies when nothing sets it.
            synonyms.append(
                {"name": synonym or name, "value": definition.default, "source": DEFAULT_CONFIG}
            )
        described.append(
            {
                "name": name,
                "value": overrides.get(name, broker_value),
                "read_only": False,
                "config_source": DYNAMIC_TOPIC_CONFIG if name in overrides else broker_source,
                "is_sensitive": False,
                "synonyms": synonyms if include_synonyms else [],
                "config_type": int(definition.kind),
                "documentation": definition.doc,
            }
        )
    return described


async def describe_broker_configs(
    services: BrokerServices, names: list[str] | None = None, *, include_synonyms: bool = False
) -> list[dict[str, Any]]:
    described = []
    # This broker's dynamic configs (the replication throttles) win over its properties.
    dynamic = await services.topics.store.broker_configs(services.config.node_id)
    for name in sorted(BROKER_CONFIGS) if names is None else names:
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            continue
        # As Kafka: a password (a key's, a JAAS entry with PLAIN users) is never shown.
        sensitive = definition.kind is ConfigType.PASSWORD
        value = None if sensitive else dynamic.get(name, services.config.raw(name))
        source = (
            DYNAMIC_BROKER_CONFIG
            if name in dynamic
            else STATIC_BROKER_CONFIG
            if name in services.config.props
            else DEFAULT_CONFIG
        )
        described.append(
            {
                "name": name,
                "value": value,
                "read_only": definition.read_only,
                "config_source": source,
                "is_sensitive": sensitive,
                "synonyms": _broker_synonyms(name, value, source, definition.default, sensitive)
                if include_synonyms
                else [],
                "config_type": int(definition.kind),
                "documentation": definition.doc,
            }
        )
    return described


def _broker_synonyms(
    name: str, value: str | None, source: int, default: str | None, sensitive: bool
) -> list[dict[str, Any]]:
    synonyms = [{"name": name, "value": value, "source": source}]
    if source != DEFAULT_CONFIG:
        synonyms.append(
            {"name": name, "value": None if sensitive else default, "source": DEFAULT_CONFIG}
        )
    return synonyms
