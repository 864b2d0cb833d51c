"""Connection limits, as Kafka's ``ConnectionQuotas`` keeps them (KIP-308, KIP-402, KIP-612).

Counted from the moment a listener accepts a socket until the connection ends:

- **Per IP address** (``max.connections.per.ip``, with ``max.connections.per.ip.overrides``
  naming hosts or addresses with limits of their own): a connection from an address already at
  its limit is closed as soon as it is accepted.
- **Per listener** (``listener.name.<name>.max.connections``) and **per broker**
  (``max.connections``): at the limit, the listener stops accepting until a connection ends;
  clients wait in the kernel's backlog. The inter-broker listener is outside the broker's limit
  when the broker has other listeners, so replication and the controller are never locked out
  by clients (Kafka's protected listener).
- **Creation rate per IP address** (the ``connection_creation_rate`` client quota of an
  ``ips`` entity, or of the ``<default>`` IP, KIP-612): a connection that takes its address's
  rate past the quota is not counted and is closed after the throttle time Kafka computes, so
  a client reconnecting in a loop is slowed down, not served.
- **Creation rate** (``max.connection.creation.rate`` for the broker, again not counting the
  inter-broker listener, and ``listener.name.<name>.max.connection.creation.rate``): new
  connections per second over ``quota.window.num`` samples of ``quota.window.size.seconds``;
  once a connection takes the rate past its bound, the listener accepts nothing for the
  throttle time Kafka computes (:meth:`~odradek.rate.WindowedRate.throttle_ms`).

The broker-wide limits (``max.connections``, ``max.connections.per.ip`` and its overrides,
``max.connection.creation.rate``) may change at run time, as Kafka's dynamic broker configs
(``kafka-configs --entity-type brokers --entity-name <id> --alter``): the counts are kept, a
listener waiting under a raised limit accepts again, and connections already over a lowered
one stay open (Kafka closes none either).

Nothing is durable; the clock is injected; the broker's event loop only (its acceptors ask
before and after each accept, and the broker reports each connection's end).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from odradek.clock import Clock
from odradek.config import BrokerConfig, parse_per_ip_overrides
from odradek.quotas.entities import CONNECTION_CREATION_RATE, IP, QuotaEntity, quota_values
from odradek.rate import WindowedRate

log = logging.getLogger(__name__)

UNLIMITED = 2147483647
# At most this many addresses' connection rates are kept (those idle a whole window go first).
_IP_RATES_MAX = 100_000
# What :meth:`ConnectionQuotas.wait_ms` answers while the listener must wait for a connection
# to end rather than for time to pass.
UNTIL_A_CONNECTION_ENDS = -1


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits of one listener, or of the broker."""

    max_connections: int = UNLIMITED
    creation_rate: int = UNLIMITED


def client_address(peername: object) -> str:
    """The IP address of a socket's peer as the limits count it: an IPv4 client of a dual-stack
    listener by its IPv4 address."""
    host = peername[0] if isinstance(peername, tuple) else str(peername)
    try:
        address = ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return str(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def resolve_overrides(text: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address: host names are looked up once, at
    start, as Kafka does; a name that does not resolve is left out, with a warning."""
    by_address: dict[str, int] = {}
    for host, count in parse_per_ip_overrides(text).items():
        try:
            by_address[str(ipaddress.ip_address(host))] = count
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            log.warning("max.connections.per.ip.overrides: cannot resolve %s (%s)", host, e)
            continue
        for info in infos:
            by_address[str(ipaddress.ip_address(info[4][0]))] = count
    return by_address


@dataclass(frozen=True, slots=True)
class BrokerLimits:
    """The limits of the broker as a whole and of each address: those that may change at run
    time."""

    broker: Limits
    per_ip: int
    per_ip_overrides: dict[str, int]

    @classmethod
    def from_config(cls, config: BrokerConfig) -> BrokerLimits:
        """Blocks (host names of the overrides are looked up): not on the event loop, but at
        start."""
        return cls(
            Limits(
                config.get_int("max.connections"), config.get_int("max.connection.creation.rate")
            ),
            config.get_int("max.connections.per.ip"),
            resolve_overrides(str(config.get("max.connections.per.ip.overrides"))),
        )


class ConnectionQuotas:
    """The connection counts and creation rates of one broker (see the module doc)."""

    def __init__(
        self,
        clock: Clock,
        *,
        broker: Limits,
        listeners: dict[str, Limits],
        inter_broker_listener: str,
        per_ip: int = UNLIMITED,
        per_ip_overrides: dict[str, int] | None = None,
        samples: int = 11,
        sample_ms: int = 1000,
    ) -> None:
        self.clock = clock
        self._broker = broker
        self._listeners = listeners
        self._inter_broker = inter_broker_listener
        self._per_ip = per_ip
        self._per_ip_overrides = dict(per_ip_overrides or {})
        self._by_ip: Counter[str] = Counter()
        self._by_listener: Counter[str] = Counter()
        self._total = 0
        self._broker_rate = WindowedRate(clock, samples=samples, sample_ms=sample_ms)
        self._listener_rates = {
            name: WindowedRate(clock, samples=samples, sample_ms=sample_ms) for name in listeners
        }
        self._throttled_until: dict[str, int] = {}
        self._samples, self._sample_ms = samples, sample_ms
        # connection_creation_rate by IP address (None: the <default> IP's), and each address's
        # measured rate while one applies.
        self._ip_quotas: dict[str | None, float] = {}
        self._ip_rates: dict[str, WindowedRate] = {}
        self._waiting: dict[str, Callable[[], None]] = {}
        self._refusals_unlogged = 0
        self._next_refusal_log_ms = 0

    @classmethod
    def from_config(
        cls, clock: Clock, config: BrokerConfig, listeners: Iterable[str]
    ) -> ConnectionQuotas:
        def listener_limit(listener: str, name: str) -> int:
            raw = config.props.get(f"listener.name.{listener.lower()}.{name}")
            return UNLIMITED if raw is None else int(raw)

        limits = BrokerLimits.from_config(config)
        return cls(
            clock,
            broker=limits.broker,
            listeners={
                name: Limits(
                    listener_limit(name, "max.connections"),
                    listener_limit(name, "max.connection.creation.rate"),
                )
                for name in listeners
            },
            inter_broker_listener=config.inter_broker_listener(),
            per_ip=limits.per_ip,
            per_ip_overrides=limits.per_ip_overrides,
            samples=config.get_int("quota.window.num"),
            sample_ms=config.get_int("quota.window.size.seconds") * 1000,
        )

    def reconfigure(self, limits: BrokerLimits) -> None:
        """The broker-wide limits changed at run time (see the module doc)."""
        if limits.broker.creation_rate != self._broker.creation_rate:
            # A rate measured under the old bound must not hold the listeners under the new one.
            self._throttled_until.clear()
        self._broker = limits.broker
        self._per_ip = limits.per_ip
        self._per_ip_overrides = dict(limits.per_ip_overrides)
        log.info(
            "connection limits now: max.connections=%d, max.connections.per.ip=%d "
            "(%d overrides), max.connection.creation.rate=%d",
            limits.broker.max_connections,
            limits.per_ip,
            len(limits.per_ip_overrides),
            limits.broker.creation_rate,
        )
        self._wake_waiting()

    # -- what the acceptors ask ------------------------------------------------------------------

    def _protected(self, listener: str) -> bool:
        return listener == self._inter_broker and len(self._listeners) > 1

    def connections(self, listener: str | None = None) -> int:
        return self._total if listener is None else self._by_listener[listener]

    def wait_ms(self, listener: str) -> int:
        """0 when ``listener`` may accept now; else how long it must wait (ms), or
        :data:`UNTIL_A_CONNECTION_ENDS`."""
        limits = self._listeners.get(listener, Limits())
        if self._by_listener[listener] >= limits.max_connections:
            return UNTIL_A_CONNECTION_ENDS
        if not self._protected(listener) and self._total >= self._broker.max_connections:
            return UNTIL_A_CONNECTION_ENDS
        return max(0, self._throttled_until.get(listener, 0) - self.clock.monotonic_ms())

    def when_a_connection_ends(self, listener: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, at the next end of a connection (the acceptor listens again)."""
        self._waiting[listener] = callback

    def update_ip_quotas(self, configs: Mapping[QuotaEntity, Mapping[str, str]]) -> None:
        """The client quotas as the metadata store now holds them: the ``ips`` entities'
        ``connection_creation_rate``."""
        quotas: dict[str | None, float] = {}
        for entity, values in configs.items():
            rate = quota_values(values).get(CONNECTION_CREATION_RATE)
            if rate is not None and len(entity) == 1 and entity[0][0] == IP:
                quotas[entity[0][1]] = rate
        self._ip_quotas = quotas
        self._ip_rates = {ip: r for ip, r in self._ip_rates.items() if self._ip_quota(ip)}

    def _ip_quota(self, ip: str) -> float | None:
        return self._ip_quotas.get(ip, self._ip_quotas.get(None))

    def ip_throttle_ms(self, ip: str) -> int:
        """A new connection from ``ip``, against its address's connection_creation_rate: 0 when
        it may be served; else how long to hold it before closing it (it is not counted)."""
        quota = self._ip_quota(ip)
        if quota is None:
            return 0
        rate = self._ip_rates.get(ip)
        if rate is None:
            if len(self._ip_rates) >= _IP_RATES_MAX:
                # A rate per address ever seen must not grow for ever: keep the busy ones.
                self._ip_rates = {a: r for a, r in self._ip_rates.items() if r.rate() > 0}
            rate = self._ip_rates[ip] = WindowedRate(
                self.clock, samples=self._samples, sample_ms=self._sample_ms
            )
        rate.record()
        throttle = min(rate.throttle_ms(quota), self._samples * self._sample_ms)
        if throttle > 0:
            rate.record(-1)  # a refused connection does not count against the address
            self._refused(ip, f"its address is over connection_creation_rate={quota:g}")
        return throttle

    def limit_for(self, ip: str) -> int:
        return self._per_ip_overrides.get(ip, self._per_ip)

    def opened(self, listener: str, ip: str) -> bool:
        """A connection from ``ip`` was accepted on ``listener``: counted, unless its address is
        at its limit (False: the caller closes it, uncounted)."""
        limit = self.limit_for(ip)
        if self._by_ip[ip] >= limit:
            self._refused(ip, f"the address already has the maximum of {limit} connections")
            return False
        self._by_ip[ip] += 1
        self._by_listener[listener] += 1
        self._total += 1
        throttle = 0
        rate = self._listener_rates.get(listener)
        limits = self._listeners.get(listener, Limits())
        if rate is not None:
            rate.record()
            if limits.creation_rate < UNLIMITED:
                throttle = rate.throttle_ms(limits.creation_rate)
        if not self._protected(listener):
            self._broker_rate.record()
            if self._broker.creation_rate < UNLIMITED:
                throttle = max(throttle, self._broker_rate.throttle_ms(self._broker.creation_rate))
        if throttle > 0:
            self._throttled_until[listener] = self.clock.monotonic_ms() + throttle
        return True

    def closed(self, listener: str, ip: str) -> None:
        """A counted connection ended: its slot is free, and waiting listeners listen again."""
        if self._by_ip[ip] <= 1:
            del self._by_ip[ip]
        else:
            self._by_ip[ip] -= 1
        self._by_listener[listener] -= 1
        self._total -= 1
        self._wake_waiting()

    def _wake_waiting(self) -> None:
        waiting, self._waiting = self._waiting, {}
        for callback in waiting.values():
            callback()

    def _refused(self, ip: str, why: str) -> None:
        # A client retrying in a loop must not fill the log: one line a second at most.
        self._refusals_unlogged += 1
        now = self.clock.monotonic_ms()
        if now < self._next_refusal_log_ms:
            return
        self._next_refusal_log_ms = now + 1000
        log.info(
            "refused a connection from %s: %s (%d refused since the last report)",
            ip,
            why,
            self._refusals_unlogged,
        )
        self._refusals_unlogged = 0
