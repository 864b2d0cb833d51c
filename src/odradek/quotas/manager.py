"""Holding clients to their quotas, as Kafka's ``ClientQuotaManager`` does (no I/O).

For a request from (user, client id), each quota type (produced bytes, fetched bytes, request
time) takes the most specific entity that sets it, in Kafka's order:

1. ``users/<user>/clients/<client-id>``   2. ``users/<user>/clients/<default>``
3. ``users/<user>``                       4. ``users/<default>/clients/<client-id>``
5. ``users/<default>/clients/<default>``  6. ``users/<default>``
7. ``clients/<client-id>``                8. ``clients/<default>``

and is measured for the group of clients that entity covers: every client of the user for a
user-level quota, each (user, client) pair for a user-and-client quota, each client id for a
client-level quota; a default applies to each user or client on its own, never to all together.
What a request uses is recorded in that group's windowed rate (``quota.window.num`` samples of
``quota.window.size.seconds``); past the quota, the answer carries Kafka's throttle time and the
broker holds the connection back that long (KIP-219).

Nothing durable (the quotas live in the metadata store and are handed in on each change); the
clock is injected; the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from odradek.clock import Clock
from odradek.following import ChangeSource, StoreFollower
from odradek.quotas.entities import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    quota_values,
)
from odradek.rate import WindowedRate

_RESOLVED_MAX = 100_000

# (user, client id) of the group a quota is measured for; "" where the quota does not tell.
Group = tuple[str, str]


class QuotaStore(ChangeSource, Protocol):
    """What the quotas need of the metadata store (it sits above this package)."""

    async def quota_configs(self) -> dict[QuotaEntity, dict[str, str]]: ...


class ClientQuotaManager:
    """One quota type (``producer_byte_rate``, ``consumer_byte_rate``, ...) for every client."""

    def __init__(self, clock: Clock, key: str, *, samples: int = 11, sample_ms: int = 1000):
        self._clock = clock
        self.key = key
        self._samples = samples
        self._sample_ms = sample_ms
        self._quotas: dict[QuotaEntity, float] = {}
        self._rates: dict[Group, WindowedRate] = {}
        # (user, client id) → what quota_for answers, until the quotas change: a Produce at
        # the ceiling must not build eight entity keys to find its quota.
        self._resolved: dict[tuple[str, str], tuple[float, Group] | None] = {}
        self._next_prune_ms = clock.monotonic_ms() + samples * sample_ms

    @property
    def enabled(self) -> bool:
        """Whether any entity has this quota (none: nothing is measured, as Kafka skips it)."""
        return bool(self._quotas)

    def update(self, configs: Mapping[QuotaEntity, Mapping[str, str]]) -> None:
        """Every entity's configs as the metadata store now holds them."""
        quotas = {}
        for quota_entity, values in configs.items():
            value = quota_values(values).get(self.key)
            if value is not None:
                quotas[quota_entity] = value
        self._quotas = quotas
        self._resolved = {}

    def quota_for(self, user: str, client_id: str) -> tuple[float, Group] | None:
        """The quota that applies to (user, client id) and the group it is measured for."""
        found = self._quotas.get
        candidates: tuple[tuple[QuotaEntity, Group], ...] = (
            (((USER, user), (CLIENT_ID, client_id)), (user, client_id)),
            (((USER, user), (CLIENT_ID, None)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((USER, None), (CLIENT_ID, client_id)), (user, client_id)),
            (((USER, None), (CLIENT_ID, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        )
        for quota_entity, group in candidates:
            value = found(quota_entity)
            if value is not None:
                return value, group
        return None

    def record(self, user: str, client_id: str, amount: float) -> int:
        """Count ``amount`` against the client's quota: the throttle time in ms (0: within it),
        at most the window's length."""
        if not self._quotas:
            return 0
        key = (user, client_id)
        try:
            found = self._resolved[key]
        except KeyError:
            if len(self._resolved) > _RESOLVED_MAX:
                self._resolved = {}
            found = self._resolved[key] = self.quota_for(user, client_id)
        if found is None:
            return 0
        bound, group = found
        now = self._clock.monotonic_ms()
        if now >= self._next_prune_ms:
            # A client id per process (or per request, for some tools) must not grow this for
            # ever: a group whose window has emptied has nothing left to measure.
            self._next_prune_ms = now + self._samples * self._sample_ms
            self._rates = {g: r for g, r in self._rates.items() if r.rate() > 0}
        rate = self._rates.get(group)
        if rate is None:
            rate = self._rates[group] = WindowedRate(
                self._clock, samples=self._samples, sample_ms=self._sample_ms
            )
        rate.record(amount)
        return min(rate.throttle_ms(bound), self._samples * self._sample_ms)

    def throttle_now(self, user: str, client_id: str) -> int:
        """The throttle time the client's group is owed now, recording nothing (0: within)."""
        if not self._quotas:
            return 0
        found = self.quota_for(user, client_id)
        if found is None:
            return 0
        rate = self._rates.get(found[1])
        if rate is None:
            return 0
        return min(rate.throttle_ms(found[0]), self._samples * self._sample_ms)

    def rate(self, user: str, client_id: str) -> float:
        """The measured rate of the client's group (0 without a quota)."""
        found = self.quota_for(user, client_id)
        if found is None:
            return 0.0
        rate = self._rates.get(found[1])
        return 0.0 if rate is None else rate.rate()


class ClientQuotas:
    """A broker's client quotas: bytes produced, bytes fetched by consumers, request time (the
    percentage of one thread's time spent handling the client's requests), and partitions
    created or deleted per second (KIP-599's controller mutations). Follows the metadata store
    (:meth:`follow`): every broker applies the same quotas."""

    def __init__(self, clock: Clock, *, samples: int = 11, sample_ms: int = 1000) -> None:
        self.produce = ClientQuotaManager(
            clock, PRODUCER_BYTE_RATE, samples=samples, sample_ms=sample_ms
        )
        self.fetch = ClientQuotaManager(
            clock, CONSUMER_BYTE_RATE, samples=samples, sample_ms=sample_ms
        )
        self.request = ClientQuotaManager(
            clock, REQUEST_PERCENTAGE, samples=samples, sample_ms=sample_ms
        )
        self.mutation = ClientQuotaManager(
            clock, CONTROLLER_MUTATION_RATE, samples=samples, sample_ms=sample_ms
        )
        # Told every quota config too (the connection limits take the IP entities' rates).
        self.listeners: list[Callable[[Mapping[QuotaEntity, Mapping[str, str]]], None]] = []

    def update(self, configs: Mapping[QuotaEntity, Mapping[str, str]]) -> None:
        for manager in (self.produce, self.fetch, self.request, self.mutation):
            manager.update(configs)
        for listener in self.listeners:
            listener(configs)

    async def follow(self, store: QuotaStore) -> None:
        """Load the store's quotas now, and again on each change (the event loop's task)."""
        self._follower = StoreFollower(
            store.quota_configs, self.update, {"client_quotas"}, "the client quotas"
        )
        await self._follower.follow(store)
