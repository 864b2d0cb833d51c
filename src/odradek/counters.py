"""Plain counters the broker bumps as it works, for :mod:`odradek.server.metrics` to read when
scraped.

Kafka updates a Yammer meter per request and per topic; here the hot path only adds to Python
ints on objects it already holds, and the Prometheus collector turns them into metric families
when ``/metrics`` is scraped. Calling ``prometheus_client``'s ``labels(...).inc()`` per request
would take a lock and a label lookup each time; an ``int +=`` on a slotted object takes neither.

Who writes: the broker's event loop (connections, handlers, the purgatory, the replica manager),
except :attr:`odradek.storage.flusher.LogFlusher.flush_time`, written by the flusher's thread.
Each counter has one writing thread, so no lock is needed; a reader on another thread may see a
histogram's buckets one observation apart from its sum, which a scrape tolerates (the collector
derives the count from the buckets, so that those two always agree).

Latencies are durations on ``time.perf_counter_ns``, not the injected clock: they are measured,
and nothing in the broker decides anything by them.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Awaitable, Sequence
from contextvars import ContextVar
from typing import TypeVar

# Upper bounds, in seconds, of the request latency buckets: from a pipelined Produce on an idle
# broker (~100 µs) to a Fetch long-poll that waits out max.wait.ms (500 ms by default) and a
# produce that waits out its timeout (30 s).
REQUEST_BUCKETS_S = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
)  # fmt: skip
# An fsync: tens of µs for a file with nothing unwritten, up to seconds on a busy disk.
FLUSH_BUCKETS_S = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
)  # fmt: skip
# API keys below this have a slot in RequestCounters (Kafka's keys go to 90 or so).
_API_KEY_SLOTS = 128
# Two more slots: Kafka counts each Fetch under "Fetch" and again under the side it came from.
FETCH_CONSUMER_SLOT = _API_KEY_SLOTS
FETCH_FOLLOWER_SLOT = _API_KEY_SLOTS + 1
SERIES_NAMES = {FETCH_CONSUMER_SLOT: "FetchConsumer", FETCH_FOLLOWER_SLOT: "FetchFollower"}
_SLOTS = _API_KEY_SLOTS + len(SERIES_NAMES)


class Histogram:
    """Observations counted into fixed buckets (``counts[i]``: those ≤ ``bounds_s[i]`` and above
    the bound before; the last slot: above every bound), and their sum in nanoseconds."""

    __slots__ = ("_bounds_ns", "bounds_s", "counts", "sum_ns")

    def __init__(self, bounds_s: Sequence[float]) -> None:
        self.bounds_s = tuple(bounds_s)
        self._bounds_ns = [round(b * 1e9) for b in self.bounds_s]
        self.counts = [0] * (len(self.bounds_s) + 1)
        self.sum_ns = 0

    def observe_ns(self, elapsed_ns: int) -> None:
        self.counts[bisect_left(self._bounds_ns, elapsed_ns)] += 1
        self.sum_ns += elapsed_ns

    def copy(self) -> Histogram:
        other = Histogram.__new__(Histogram)
        other.bounds_s = self.bounds_s
        other._bounds_ns = self._bounds_ns
        other.counts = list(self.counts)
        other.sum_ns = self.sum_ns
        return other


class TopicCounters:
    """One topic's share of Kafka's ``BrokerTopicMetrics``, counted by the Produce and Fetch
    handlers: client traffic only (a follower's fetch counts in
    :attr:`BrokerCounters.replication_bytes_out`, as Kafka's ``ReplicationBytesOutPerSec``)."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "failed_fetch_requests",
        "failed_produce_requests",
        "fetch_requests",
        "messages_in",
        "produce_requests",
    )

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0
        # Per partition asked for, as Kafka's TotalProduceRequestsPerSec and its kin count.
        self.produce_requests = 0
        self.failed_produce_requests = 0
        self.fetch_requests = 0
        self.failed_fetch_requests = 0


class RequestTiming:
    """How long the request a connection is handling has waited in the purgatory so far
    (Kafka's RemoteTime): the union of its waits, so that waits overlapping in time (a handler
    that parks for several partitions at once) count once.

    One per connection, reached by the purgatory through :data:`current_request` (the
    connection's task sets it; tasks a handler spawns copy the context, so they find the same
    object). Only the event loop touches it."""

    __slots__ = ("_parked", "_since_ns", "also", "remote_ns")

    def __init__(self) -> None:
        self._parked = 0
        self._since_ns = 0
        self.remote_ns = 0
        # A second series the request counts in (a Fetch: FETCH_FOLLOWER_SLOT or
        # FETCH_CONSUMER_SLOT, set by its handler once it knows who asks); None: only its API's.
        self.also: int | None = None

    def reset(self) -> None:
        self._parked = 0
        self.remote_ns = 0

    def park_began(self, now_ns: int) -> None:
        if self._parked == 0:
            self._since_ns = now_ns
        self._parked += 1

    def park_ended(self, now_ns: int) -> None:
        self._parked -= 1
        if self._parked == 0:
            self.remote_ns += now_ns - self._since_ns


# The timing of the request being handled in this task; None on a connection that neither
# counts metrics nor has client quotas.
current_request: ContextVar[RequestTiming | None] = ContextVar(
    "odradek_current_request", default=None
)

_T = TypeVar("_T")


async def remote_wait(waited: Awaitable[_T]) -> _T:
    """Await a wait Kafka counts as RemoteTime, adding it to the current request's timing: a
    purgatory wait, or a JoinGroup or SyncGroup held until its rebalance completes (Kafka parks
    those in its purgatory too)."""
    timing = current_request.get()
    if timing is None:
        return await waited
    timing.park_began(time.perf_counter_ns())
    try:
        return await waited
    finally:
        timing.park_ended(time.perf_counter_ns())


class RequestTimes:
    """The times of one API's requests, as Kafka's RequestMetrics splits them: queue (received,
    waiting behind the earlier requests of its connection), local (handling, less the
    purgatory), remote (in the purgatory: acks=all, long polls, group commits), send (handing
    the response to the socket, waiting while its buffer is full) and their sum, the total."""

    __slots__ = ("local", "queue", "remote", "send", "total")

    def __init__(self) -> None:
        self.total = Histogram(REQUEST_BUCKETS_S)
        self.queue = Histogram(REQUEST_BUCKETS_S)
        self.local = Histogram(REQUEST_BUCKETS_S)
        self.remote = Histogram(REQUEST_BUCKETS_S)
        self.send = Histogram(REQUEST_BUCKETS_S)

    def copy(self) -> RequestTimes:
        other = RequestTimes.__new__(RequestTimes)
        other.total = self.total.copy()
        other.queue = self.queue.copy()
        other.local = self.local.copy()
        other.remote = self.remote.copy()
        other.send = self.send.copy()
        return other


class RequestCounters:
    """Per API key: requests handled, their :class:`RequestTimes`, and the error codes of the
    partitions of Produce and Fetch."""

    __slots__ = ("errors", "requests", "times")

    def __init__(self) -> None:
        self.requests = [0] * _SLOTS
        self.times: list[RequestTimes | None] = [None] * _SLOTS
        self.errors: dict[tuple[int, int], int] = {}  # (api key, error code) → partitions

    def handled(
        self,
        api_key: int,
        queue_ns: int,
        local_ns: int,
        remote_ns: int = 0,
        send_ns: int = 0,
        also: int | None = None,
    ) -> None:
        """One request done, with the parts of its time; counted in the slot ``also`` too
        (a Fetch's side, :data:`SERIES_NAMES`)."""
        if also is not None:
            self.handled(also, queue_ns, local_ns, remote_ns, send_ns)
        times = self.times[api_key]
        if times is None:
            times = self.times[api_key] = RequestTimes()
        times.total.observe_ns(queue_ns + local_ns + remote_ns + send_ns)
        times.queue.observe_ns(queue_ns)
        times.local.observe_ns(local_ns)
        times.remote.observe_ns(remote_ns)
        times.send.observe_ns(send_ns)
        self.requests[api_key] += 1

    def error(self, api_key: int, code: int) -> None:
        key = (api_key, code)
        self.errors[key] = self.errors.get(key, 0) + 1


class BrokerCounters:
    """Everything the event loop counts for the metrics endpoint; exists only while
    ``metrics.listener`` is set (the hot path checks for None and counts nothing otherwise)."""

    __slots__ = (
        "connections_closed",
        "connections_created",
        "replication_bytes_out",
        "requests",
        "topics",
    )

    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.requests = RequestCounters()
        self.replication_bytes_out = 0
        # Per listener name, as Kafka's socket-server-metrics are.
        self.connections_created: dict[str, int] = {}
        self.connections_closed: dict[str, int] = {}

    def connection_opened(self, listener: str) -> None:
        self.connections_created[listener] = self.connections_created.get(listener, 0) + 1

    def connection_ended(self, listener: str) -> None:
        self.connections_closed[listener] = self.connections_closed.get(listener, 0) + 1

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def topic_deleted(self, name: str) -> None:
        """A deleted topic's series end, as Kafka removes its topic metrics."""
        self.topics.pop(name, None)
