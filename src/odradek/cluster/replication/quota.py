"""Replication throttling (KIP-73), as Kafka's ``ReplicationQuotaManager`` does it.

A broker has two quotas: as leader, on the bytes it answers to followers' fetches
(``leader.replication.throttled.rate``), and as follower, on the bytes it copies
(``follower.replication.throttled.rate``), both bytes per second, dynamic broker configs. They
apply only to the replicas a topic names in ``leader.replication.throttled.replicas`` /
``follower.replication.throttled.replicas`` (``partition:broker`` pairs, ``*`` for every
replica; a pair counts on the broker it names), and only to followers outside the ISR, so that a
throttled move never slows the replication acks=all waits for.

When a quota is exceeded, the leader answers a throttled out-of-sync follower's partition with
no records (its offsets still), and the follower leaves such partitions out of its fetch; the
bytes sent or copied for throttled partitions are recorded either way. The rate is measured as
Kafka's ``Rate`` measures it: bytes over the last ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds``, divided by the time they span (at least all but one
sample, so that the first bytes after a quiet spell do not look like a burst).

Nothing is durable here: the configs live in the metadata store and are handed in again on
start. The clock is injected; called on the broker's event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.config import LONG_MAX
from odradek.rate import WindowedRate

log = logging.getLogger(__name__)

ALL_REPLICAS = "*"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
# Kafka's throttle of replica moves between a broker's log dirs: its tools set and clear it with
# the others, and it is accepted, with no effect (odradek moves no replica between log dirs).
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


class ReplicationQuota:
    """A bytes-per-second limit over a window of samples (see the module doc). In memory only
    (a restart starts with an empty window); the broker's event loop only."""

    def __init__(
        self,
        clock: Clock,
        bytes_per_second: int = LONG_MAX,
        *,
        samples: int = 11,
        sample_ms: int = 1000,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self._rate = WindowedRate(clock, samples=samples, sample_ms=sample_ms)

    @property
    def limited(self) -> bool:
        return self.bytes_per_second < LONG_MAX

    def record(self, size: int) -> None:
        self._rate.record(size)

    def rate(self) -> float:
        """Bytes per second over the window."""
        return self._rate.rate()

    def is_exceeded(self) -> bool:
        return self.limited and self.rate() > self.bytes_per_second


@dataclass(frozen=True, slots=True)
class ThrottledPartitions:
    """The partitions of one topic a throttled-replicas config names for one broker."""

    every: bool = False
    partitions: frozenset[int] = frozenset()

    @classmethod
    def parse(cls, value: str | Iterable[str], broker: int) -> ThrottledPartitions:
        """``0:1,1:2`` (or ``*``) as broker ``broker`` reads it; malformed pairs are ignored,
        as Kafka's broker ignores them (the config's validation is the client's)."""
        items = value.split(",") if isinstance(value, str) else list(value)
        items = [i.strip() for i in items if i.strip()]
        if ALL_REPLICAS in items:
            return cls(every=True)
        partitions = set()
        for item in items:
            partition, _, replica = item.partition(":")
            try:
                if int(replica) == broker:
                    partitions.add(int(partition))
            except ValueError:
                continue
        return cls(partitions=frozenset(partitions))

    def __contains__(self, partition: object) -> bool:
        return self.every or partition in self.partitions


class ReplicationQuotas:
    """This broker's leader and follower quotas and the partitions they apply to, rebuilt
    from the metadata store's configs on start and on each change (nothing on disk); the
    broker's event loop only: the Fetch handler as leader, the fetchers as follower."""

    def __init__(self, broker_id: int, clock: Clock, *, samples: int = 11, sample_ms: int = 1000):
        self.broker_id = broker_id
        self.leader = ReplicationQuota(clock, samples=samples, sample_ms=sample_ms)
        self.follower = ReplicationQuota(clock, samples=samples, sample_ms=sample_ms)
        self._leader_throttled: dict[str, ThrottledPartitions] = {}
        self._follower_throttled: dict[str, ThrottledPartitions] = {}

    def set_rates(self, configs: Mapping[str, str]) -> None:
        """The broker's dynamic configs (a rate not set: unlimited)."""
        self.leader.bytes_per_second = _rate(configs, LEADER_RATE)
        self.follower.bytes_per_second = _rate(configs, FOLLOWER_RATE)

    def set_topics(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Every topic's config overrides (topic → configs)."""
        self._leader_throttled = self._parse(configs, LEADER_REPLICAS)
        self._follower_throttled = self._parse(configs, FOLLOWER_REPLICAS)

    def _parse(
        self, configs: Mapping[str, Mapping[str, str]], name: str
    ) -> dict[str, ThrottledPartitions]:
        parsed = {}
        for topic, values in configs.items():
            raw = values.get(name)
            if raw:
                throttled = ThrottledPartitions.parse(raw, self.broker_id)
                if throttled.every or throttled.partitions:
                    parsed[topic] = throttled
        return parsed

    def leader_throttled(self, topic: str, partition: int) -> bool:
        found = self._leader_throttled.get(topic)
        return found is not None and partition in found

    def follower_throttled(self, topic: str, partition: int) -> bool:
        found = self._follower_throttled.get(topic)
        return found is not None and partition in found

    def leader_holds_back(self, topic: str, partition: int, follower_in_sync: bool) -> bool:
        """Whether the leader answers this follower's fetch of the partition without records
        (Kafka's ``shouldLeaderThrottle``)."""
        return (
            not follower_in_sync
            and self.leader_throttled(topic, partition)
            and self.leader.is_exceeded()
        )

    def follower_holds_back(self, topic: str, partition: int, in_sync: bool) -> bool:
        """Whether the follower leaves the partition out of its next fetch (Kafka's
        ``shouldFollowerThrottle``)."""
        return (
            not in_sync
            and self.follower_throttled(topic, partition)
            and self.follower.is_exceeded()
        )


def _rate(configs: Mapping[str, str], name: str) -> int:
    """A throttle rate from the broker's dynamic configs: one that is not a whole number of
    bytes/s (written by some other tool; AlterConfigs refuses it) leaves that side unlimited,
    with a warning, rather than stopping the broker."""
    text = configs.get(name)
    if text is None:
        return LONG_MAX
    try:
        return int(text)
    except ValueError:
        log.warning("ignoring %s=%r: not a number of bytes per second", name, text)
        return LONG_MAX
