"""Client metrics subscriptions (KIP-714), as Kafka keeps them: a CLIENT_METRICS config resource
per subscription, named by the operator, with three configs:

- ``metrics``: the prefixes of the metric names wanted (a list; ``*`` or an empty prefix: all),
- ``interval.ms``: how often a matching client pushes (100 ms to 1 h; 5 min by default),
- ``match``: which clients (a list of ``selector=regex``, every one of which must match the whole
  value; no selector: every client). Selectors: ``client_instance_id``, ``client_id``,
  ``client_software_name``, ``client_software_version``, ``client_source_address``,
  ``client_source_port``.

A client gets the union of the prefixes of every subscription it matches, at the shortest of
their intervals, under a subscription id computed from them, so that a change of what it gets
changes the id (and its next push is refused with UNKNOWN_SUBSCRIPTION_ID, which makes it ask
again). No I/O; the subscriptions are handed in as the metadata store holds them.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from odradek.config import ConfigDef, ConfigError, ConfigType

CLIENT_METRICS_RESOURCE = 16  # Kafka's ConfigResource.Type.CLIENT_METRICS
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)


def _interval_check(value: object) -> str | None:
    if not MIN_INTERVAL_MS <= int(str(value)) <= MAX_INTERVAL_MS:
        return f"must be between {MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}"
    return None


def _match_check(value: object) -> str | None:
    items = value if isinstance(value, list) else str(value).split(",")
    for item in [str(i).strip() for i in items if str(i).strip()]:
        selector, equals, pattern = item.partition("=")
        if not equals or selector.strip() not in SELECTORS:
            return f"{item!r} is not selector=regex with a selector of {', '.join(SELECTORS)}"
        try:
            re.compile(pattern.strip())
        except re.error as e:
            return f"{pattern!r} is not a regular expression: {e}"
    return None


CLIENT_METRICS_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("metrics", ConfigType.LIST, "", "prefixes of the metric names to push"),
        ConfigDef(
            "interval.ms",
            ConfigType.INT,
            str(DEFAULT_INTERVAL_MS),
            "how often matching clients push their metrics",
            _interval_check,
        ),
        ConfigDef(
            "match", ConfigType.LIST, "", "selector=regex pairs the clients match", _match_check
        ),
    )
}


def validate(configs: Mapping[str, str]) -> None:
    """Raise :class:`ConfigError` for an unknown or invalid client metrics config."""
    for name, value in configs.items():
        definition = CLIENT_METRICS_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"unknown client metrics config {name!r}")
        definition.parse(value)


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    prefixes: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def from_configs(cls, name: str, configs: Mapping[str, str]) -> Subscription:
        prefixes = tuple(p.strip() for p in configs.get("metrics", "").split(",") if p.strip())
        match = []
        for item in [i.strip() for i in configs.get("match", "").split(",") if i.strip()]:
            selector, _, pattern = item.partition("=")
            match.append((selector.strip(), re.compile(pattern.strip())))
        interval = int(configs.get("interval.ms", DEFAULT_INTERVAL_MS))
        return cls(name, prefixes, interval, tuple(match))

    def matches(self, client: Mapping[str, str]) -> bool:
        return all(
            pattern.fullmatch(client.get(selector, "")) is not None
            for selector, pattern in self.match
        )


@dataclass(frozen=True, slots=True)
class Assigned:
    """What one client is asked to push: prefixes (``("",)``: every metric; empty: none)."""

    subscription_id: int
    prefixes: tuple[str, ...]
    interval_ms: int


def assign(subscriptions: Sequence[Subscription], client: Mapping[str, str]) -> Assigned:
    prefixes: set[str] = set()
    interval = 0
    for subscription in subscriptions:
        if not subscription.prefixes or not subscription.matches(client):
            continue
        for prefix in subscription.prefixes:
            prefixes.add("" if prefix == "*" else prefix)
        interval = min(interval or subscription.interval_ms, subscription.interval_ms)
    wanted = ("",) if "" in prefixes else tuple(sorted(prefixes))
    interval = interval or DEFAULT_INTERVAL_MS
    text = f"{client.get('client_instance_id', '')}|{interval}|{','.join(wanted)}"
    return Assigned(zlib.crc32(text.encode()) & 0x7FFFFFFF, wanted, interval)


def wanted(prefixes: Sequence[str], name: str) -> bool:
    return any(name.startswith(p) for p in prefixes)
