"""The client instances a broker gives metrics subscriptions to, and the metrics they push
(KIP-714), as Kafka's ``ClientMetricsManager`` keeps them.

GetTelemetrySubscriptions gives a client an instance id (when it has none) and what it is to
push, from the subscriptions it matches; PushTelemetry hands in OTLP metrics, kept (the latest
value of each metric and label set) for the Prometheus endpoint. A push is refused as Kafka
refuses it: without an instance id (INVALID_REQUEST), for an instance this broker does not know
or under a subscription id that is no longer the client's (UNKNOWN_SUBSCRIPTION_ID: it asks
again), sooner than half its interval after the last one (THROTTLING_QUOTA_EXCEEDED; a client's
last, terminating push is always taken), in a compression the broker did not offer, over
``telemetry.max.bytes`` (TELEMETRY_TOO_LARGE), or not decodable (INVALID_RECORD).

Bounded: a push replaces the client's last one; at most ``max_points_per_client`` metric
values are kept for one client and ``max_points`` for all (the rest of a push is dropped); at
most ``max_clients`` instances (the least recently heard of goes first), each
forgotten with its metrics three intervals after it was last heard of, or at its terminating
push; a push's metrics are at most ``telemetry.max.bytes`` decompressed. The clock is injected;
the broker's event loop only.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from odradek.clock import Clock
from odradek.following import ChangeSource, StoreFollower
from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode
from odradek.telemetry.otlp import InvalidMetrics, Point, decode, metrics_data_class
from odradek.telemetry.subscriptions import Assigned, Subscription, assign, wanted

# The store's change kinds after which the subscriptions are read again: its own, and any
# entity config change notification of ZooKeeper (which does not say which entity).
_RELOAD_ON = frozenset({"client_metrics", "client_quotas"})


class SubscriptionStore(ChangeSource, Protocol):
    """What :meth:`ClientTelemetry.follow` needs of the metadata store."""

    async def client_metrics_configs(self) -> dict[str, dict[str, str]]: ...


ACCEPTED_COMPRESSION = (compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY)
_ACCEPTED = frozenset((compression.NONE, *ACCEPTED_COMPRESSION))
_EXPIRY_INTERVALS = 3


@dataclass(slots=True)
class ClientInstance:
    """One client (a producer, a consumer, an admin client) as its subscription and pushes."""

    instance_id: uuid.UUID
    client: dict[str, str]  # the selectors' values: client_id, client_software_name, ...
    principal: str
    assigned: Assigned
    heard_ms: int
    pushed_ms: int | None = None
    metrics: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


class ClientTelemetry:
    """The broker's client instances and their latest metrics (see the module doc)."""

    def __init__(
        self,
        clock: Clock,
        *,
        max_bytes: int,
        max_clients: int = 16_384,
        max_points_per_client: int = 2_000,
        max_points: int = 200_000,
    ) -> None:
        self._clock = clock
        self.max_bytes = max_bytes
        self._max_clients = max_clients
        self._max_points_per_client = max_points_per_client
        self._max_points = max_points
        self._points_kept = 0  # over every instance
        self._subscriptions: list[Subscription] = []
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._decoder_loading = False

    def update(self, subscriptions: Mapping[str, Mapping[str, str]]) -> None:
        """Every CLIENT_METRICS resource's configs, as the metadata store now holds them."""
        self._subscriptions = [
            Subscription.from_configs(name, configs)
            for name, configs in sorted(subscriptions.items())
        ]
        if self._subscriptions and not self._decoder_loading:
            # Pushes come once something is subscribed; the first decodes with protobuf, whose
            # import and descriptor (a tenth of a second) are made here on a thread of their
            # own rather than in that push, on the event loop.
            self._decoder_loading = True
            threading.Thread(target=metrics_data_class, name="otlp-decoder", daemon=True).start()

    async def follow(self, store: SubscriptionStore) -> None:
        """Read the subscriptions now, and again after each change (the event loop's task)."""
        self._follower = StoreFollower(
            store.client_metrics_configs,
            self.update,
            _RELOAD_ON,
            "the client metrics subscriptions",
        )
        await self._follower.follow(store)

    def subscribe(
        self, instance_id: uuid.UUID | None, client: Mapping[str, str], principal: str
    ) -> ClientInstance:
        """GetTelemetrySubscriptions: the client's instance (a new one for a client without
        an id, or one this broker has forgotten) with what it is to push now."""
        now = self._clock.monotonic_ms()
        self._expire(now)
        if instance_id is None or instance_id.int == 0:
            instance_id = uuid.uuid4()
        selectors = {**client, "client_instance_id": str(instance_id)}
        assigned = assign(self._subscriptions, selectors)
        instance = self._instances.get(instance_id)
        if instance is None:
            instance = ClientInstance(instance_id, selectors, principal, assigned, now)
            self._instances[instance_id] = instance
            while len(self._instances) > self._max_clients:
                self._forget(next(iter(self._instances)))
        else:
            if instance.assigned.subscription_id != assigned.subscription_id:
                self._points_kept -= len(instance.metrics)
                instance.metrics = {}  # what it pushed was asked for under another one
            instance.assigned = assigned
            instance.heard_ms = now
            self._instances.move_to_end(instance_id)
        return instance

    def push(
        self,
        instance_id: uuid.UUID | None,
        subscription_id: int,
        terminating: bool,
        codec: int,
        payload: bytes,
    ) -> ErrorCode:
        """PushTelemetry: keep the pushed metrics the client's subscription asks for."""
        now = self._clock.monotonic_ms()
        self._expire(now)
        if instance_id is None or instance_id.int == 0:
            return ErrorCode.invalid_request
        instance = self._instances.get(instance_id)
        if instance is None or instance.assigned.subscription_id != subscription_id:
            return ErrorCode.unknown_subscription_id
        interval = instance.assigned.interval_ms
        last = instance.pushed_ms
        if not terminating and last is not None and now - last < interval // 2:
            return ErrorCode.throttling_quota_exceeded
        if codec not in _ACCEPTED:
            return ErrorCode.unsupported_compression_type
        if len(payload) > self.max_bytes:
            return ErrorCode.telemetry_too_large
        instance.pushed_ms = instance.heard_ms = now
        self._instances.move_to_end(instance_id)
        try:
            if codec == compression.NONE:
                points = decode(payload)
            else:
                buffer, size = compression.decompress_bounded(codec, payload, self.max_bytes)
                points = decode(bytes(buffer[:size]))
        except compression.DecompressedTooLarge:
            return ErrorCode.telemetry_too_large
        except (compression.CompressionError, InvalidMetrics):
            return ErrorCode.invalid_record
        self._keep(instance, points)
        if terminating:
            self._forget(instance_id)
        return ErrorCode.none

    def _keep(self, instance: ClientInstance, points: list[Point]) -> None:
        # A push holds every metric the client has (cumulative), so it replaces the last one:
        # series a client stopped sending, or made up, do not pile up.
        room = min(
            self._max_points_per_client,
            self._max_points - (self._points_kept - len(instance.metrics)),
        )
        prefixes = instance.assigned.prefixes
        kept: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = {}
        for point in points:
            if len(kept) >= room:
                break
            if wanted(prefixes, point.name):
                kept[(point.name, point.kind, point.labels)] = point.value
        self._points_kept += len(kept) - len(instance.metrics)
        instance.metrics = kept

    def _forget(self, instance_id: uuid.UUID) -> None:
        instance = self._instances.pop(instance_id)
        self._points_kept -= len(instance.metrics)

    def instances(self) -> list[ClientInstance]:
        """The instances known now, with the metrics they pushed."""
        self._expire(self._clock.monotonic_ms())
        return list(self._instances.values())

    def _expire(self, now: int) -> None:
        while self._instances:
            oldest = next(iter(self._instances.values()))
            if now - oldest.heard_ms <= _EXPIRY_INTERVALS * oldest.assigned.interval_ms:
                return
            self._forget(oldest.instance_id)
