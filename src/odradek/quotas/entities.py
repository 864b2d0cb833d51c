"""Quota entities and their configs, as Kafka names and stores them (no I/O).

An entity is a user, a client id, a user and a client id together, or an IP address; a name of
None is the entity type's default (``<default>`` where Kafka writes it). Kafka's ZooKeeper
layout keeps each entity's quotas under ``/config/<entity path>``, which this module spells::

    users/<user>                    users/<default>
    clients/<client-id>             clients/<default>
    users/<user>/clients/<client-id>    (and <default> on either side)
    ips/<address>                   ips/<default>

with names URL-encoded as Kafka's ``Sanitizer`` does (a user's quotas share the znode of their
SCRAM credentials, which Kafka's tools also write).
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterable, Mapping

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
DEFAULT_NAME = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Key → whether the value must be a whole number (Kafka's LONG and INT quota configs).
CLIENT_QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
IP_QUOTA_KEYS: dict[str, bool] = {CONNECTION_CREATION_RATE: True}
QUOTA_KEYS = {**CLIENT_QUOTA_KEYS, **IP_QUOTA_KEYS}

_PATH_PARTS = {USER: "users", CLIENT_ID: "clients", IP: "ips"}
_TYPES_BY_PART = {part: kind for kind, part in _PATH_PARTS.items()}

# An entity: (type, name or None for the default) pairs, user before client id.
QuotaEntity = tuple[tuple[str, str | None], ...]


class InvalidQuota(ValueError):
    """An entity or a quota config Kafka refuses (INVALID_REQUEST)."""


def entity(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity the components name, checked as Kafka checks AlterClientQuotas' entities."""
    found: dict[str, str | None] = {}
    for kind, name in components:
        if kind not in _PATH_PARTS:
            raise InvalidQuota(f"Unhandled client quota entity type: {kind}")
        if kind in found:
            raise InvalidQuota(f"Duplicate {kind} entity in the quota entity")
        if name == "":
            raise InvalidQuota(f"Empty {kind} name in the quota entity")
        found[kind] = name
    if not found:
        raise InvalidQuota("Invalid empty client quota entity")
    if IP in found:
        if len(found) > 1:
            raise InvalidQuota("Invalid quota entity combination: ip with user or client-id")
        address = found[IP]
        if address is not None:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise InvalidQuota(f"{address} is not a valid IP address") from None
        return ((IP, address),)
    return tuple((kind, found[kind]) for kind in (USER, CLIENT_ID) if kind in found)


def entity_path(quota_entity: QuotaEntity) -> str:
    parts = []
    for kind, name in quota_entity:
        parts.append(_PATH_PARTS[kind])
        parts.append(DEFAULT_NAME if name is None else urllib.parse.quote(name, safe=""))
    return "/".join(parts)


def entity_from_path(path: str) -> QuotaEntity:
    parts = path.split("/")
    if len(parts) % 2 or not parts:
        raise InvalidQuota(f"not a quota entity path: {path}")
    components = []
    for part, name in zip(parts[::2], parts[1::2], strict=True):
        kind = _TYPES_BY_PART.get(part)
        if kind is None:
            raise InvalidQuota(f"not a quota entity path: {path}")
        components.append((kind, None if name == DEFAULT_NAME else urllib.parse.unquote(name)))
    return entity(components)


def check_value(quota_entity: QuotaEntity, key: str, value: float) -> str:
    """The config text Kafka stores for ``key`` set to ``value`` on the entity."""
    keys = IP_QUOTA_KEYS if quota_entity[0][0] == IP else CLIENT_QUOTA_KEYS
    whole = keys.get(key)
    if whole is None:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if value <= 0:
        raise InvalidQuota(f"Quota {key} must be greater than 0")
    if whole:
        if value != int(value):
            raise InvalidQuota(f"Quota {key} must be a whole number, not {value}")
        return str(int(value))
    return str(float(value))


def quota_values(configs: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's configs (a user's also hold SCRAM credentials)."""
    values = {}
    for key, text in configs.items():
        if key in QUOTA_KEYS:
            try:
                values[key] = float(text)
            except ValueError:
                continue
    return values
