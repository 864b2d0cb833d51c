"""Group configs (KIP-848/KIP-932's per-group settings; config resource type GROUP, 32): what a
share group overrides of the broker's ``group.share.*`` settings, and a streams group (KIP-1071)
of the broker's ``group.streams.*``.

Kept in the metadata store (``/config/groups/<group>`` in ZooKeeper, ``groups`` in the local
store), as a broker's dynamic configs are; this broker keeps the groups it has looked at in
memory, reads a group's once before serving its first ShareFetch, and reads those again when the
store says an entity's configs changed (every broker hears that). The share-partitions read them
from memory (:meth:`GroupConfigs.share_config`), so a ShareFetch waits for nothing.

Runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from odradek.cluster.metadata.store import MetadataChange, MetadataStore
from odradek.cluster.share.manager import EARLIEST, LATEST, GroupShareConfig
from odradek.config import ConfigDef, ConfigError, ConfigType

log = logging.getLogger(__name__)

GROUP_RESOURCE = 32
GROUP_CONFIG_SOURCE = 8  # DescribeConfigs' ConfigSource GROUP_CONFIG
DEFAULT_CONFIG_SOURCE = 5


def _choice(*allowed: str) -> Callable[[object], str | None]:
    def check(value: object) -> str | None:
        return None if value in allowed else f"must be one of {', '.join(allowed)}"

    return check


def _lock_duration(value: object) -> str | None:
    return None if isinstance(value, int) and value >= 1000 else "must be >= 1000"


def _positive(value: object) -> str | None:
    return None if isinstance(value, int) and value >= 1 else "must be >= 1"


def _standby_replicas(value: object) -> str | None:
    # Kafka bounds it by group.streams.max.standby.replicas (2 by default).
    return None if isinstance(value, int) and 0 <= value <= 2 else "must be between 0 and 2"


def _warmup_replicas(value: object) -> str | None:
    # Kafka bounds it by group.streams.max.warmup.replicas (20 by default).
    return None if isinstance(value, int) and 0 <= value <= 20 else "must be between 0 and 20"


def _task_offset_interval(value: object) -> str | None:
    # Kafka bounds it by group.streams.min.task.offset.interval.ms (15000 by default).
    return None if isinstance(value, int) and value >= 15_000 else "must be >= 15000"


def _not_negative(value: object) -> str | None:
    return None if isinstance(value, int) and value >= 0 else "must be >= 0"


# The streams group configs and the broker settings that are their defaults.
STREAMS_DEFAULTS = {
    "streams.heartbeat.interval.ms": "group.streams.heartbeat.interval.ms",
    "streams.session.timeout.ms": "group.streams.session.timeout.ms",
    "streams.num.standby.replicas": "group.streams.num.standby.replicas",
    "streams.num.warmup.replicas": "group.streams.num.warmup.replicas",
    "streams.acceptable.recovery.lag": "group.streams.acceptable.recovery.lag",
    "streams.task.offset.interval.ms": "group.streams.task.offset.interval.ms",
}


GROUP_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef(
            "share.auto.offset.reset",
            ConfigType.STRING,
            LATEST,
            "where a share group starts reading a partition it has no state for",
            _choice(EARLIEST, LATEST),
        ),
        ConfigDef(
            "share.record.lock.duration.ms",
            ConfigType.INT,
            None,  # the broker's group.share.record.lock.duration.ms
            "how long a member of the share group holds the records it acquired",
            _lock_duration,
        ),
        ConfigDef(
            "share.isolation.level",
            ConfigType.STRING,
            "read_uncommitted",
            "whether the share group reads records of open and aborted transactions",
            _choice("read_committed", "read_uncommitted"),
        ),
        ConfigDef(
            "streams.heartbeat.interval.ms",
            ConfigType.INT,
            None,  # the broker's group.streams.heartbeat.interval.ms
            "how often the members of the streams group heartbeat",
            _positive,
        ),
        ConfigDef(
            "streams.session.timeout.ms",
            ConfigType.INT,
            None,  # the broker's group.streams.session.timeout.ms
            "how long a member of the streams group may go without a heartbeat",
            _positive,
        ),
        ConfigDef(
            "streams.num.standby.replicas",
            ConfigType.INT,
            None,  # the broker's group.streams.num.standby.replicas
            "standby replicas of each stateful task of the streams group",
            _standby_replicas,
        ),
        ConfigDef(
            "streams.num.warmup.replicas",
            ConfigType.INT,
            None,  # the broker's group.streams.num.warmup.replicas
            "most warm-up tasks the streams group runs at a time",
            _warmup_replicas,
        ),
        ConfigDef(
            "streams.acceptable.recovery.lag",
            ConfigType.LONG,
            None,  # the broker's group.streams.acceptable.recovery.lag
            "the changelog lag within which a member's state counts as caught up",
            _not_negative,
        ),
        ConfigDef(
            "streams.task.offset.interval.ms",
            ConfigType.INT,
            None,  # the broker's group.streams.task.offset.interval.ms
            "how often the members report their tasks' changelog offsets",
            _task_offset_interval,
        ),
    )
}


def validate(configs: Mapping[str, str]) -> None:
    """Raises :class:`ConfigError` for an unknown name or a bad value."""
    for name, value in configs.items():
        definition = GROUP_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(f"unknown group config {name!r} (known: {', '.join(GROUP_CONFIGS)})")
        definition.parse(value)


class GroupConfigs:
    """This broker's view of the group configs (see the module doc)."""

    def __init__(
        self,
        store: MetadataStore,
        broker_lock_duration_ms: int,
        broker_streams: Mapping[str, int] | None = None,
    ) -> None:
        self.store = store
        self.broker_lock_duration_ms = broker_lock_duration_ms
        # The broker's group.streams.* values of the streams group configs, by config name.
        self.broker_streams = dict(broker_streams or {})
        self._known: dict[str, dict[str, str]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def follow(self) -> None:
        """Read the known groups' configs again whenever the store reports a change."""
        self.store.add_listener(asyncio.get_running_loop(), self._changed)

    def configs(self, group: str) -> dict[str, str]:
        """The group's overrides as last read."""
        return dict(self._known.get(group, {}))

    def effective(self, group: str) -> dict[str, tuple[str | None, int]]:
        """Every group config: value and source (GROUP_CONFIG or DEFAULT_CONFIG)."""
        own = self._known.get(group, {})
        found: dict[str, tuple[str | None, int]] = {}
        for name, definition in GROUP_CONFIGS.items():
            if name in own:
                found[name] = (own[name], GROUP_CONFIG_SOURCE)
            elif name == "share.record.lock.duration.ms":
                found[name] = (str(self.broker_lock_duration_ms), DEFAULT_CONFIG_SOURCE)
            elif name in self.broker_streams:
                found[name] = (str(self.broker_streams[name]), DEFAULT_CONFIG_SOURCE)
            else:
                found[name] = (definition.default, DEFAULT_CONFIG_SOURCE)
        return found

    def share_config(self, group: str) -> GroupShareConfig:
        own = self._known.get(group, {})
        lock = own.get("share.record.lock.duration.ms")
        return GroupShareConfig(
            auto_offset_reset=own.get("share.auto.offset.reset", LATEST),
            record_lock_duration_ms=int(lock) if lock is not None else None,
            isolation_level=own.get("share.isolation.level", "read_uncommitted"),
        )

    async def ensure(self, group: str) -> None:
        """Read ``group``'s configs unless known already."""
        if group not in self._known:
            self._known[group] = await self.store.group_configs(group)

    async def read(self, group: str) -> dict[str, str]:
        """The group's overrides as the store has them now."""
        self._known[group] = configs = await self.store.group_configs(group)
        return dict(configs)

    async def set(self, group: str, configs: Mapping[str, str]) -> None:
        validate(configs)
        await self.store.set_group_configs(group, configs)
        self._known[group] = dict(configs)

    def _changed(self, change: MetadataChange) -> None:
        if change.kind != "client_quotas" or not self._known:
            return  # an entity config change is told as the quotas' (see the store)
        task = asyncio.ensure_future(self._reread())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reread(self) -> None:
        for group in list(self._known):
            try:
                self._known[group] = await self.store.group_configs(group)
            except Exception as e:
                log.warning("could not read the configs of group %s: %r", group, e)
