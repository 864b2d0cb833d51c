"""Incremental fetch sessions (KIP-227): a consumer or follower that fetches the same many
partitions again and again names them once, then sends only what changed.

A Fetch v7+ request carries a session id and epoch. Id 0 with epoch 0 asks for a new session
(a full request: every partition listed); id 0 with epoch -1 fetches without one. A request
naming a session (epoch > 0) is incremental: its partitions are added to or updated in the
session, ``forgotten_topics_data`` leaves it, and the response holds only the partitions with
something new — records, an error, or a moved high watermark, last stable offset or log start
offset — while the session remembers what it last told the fetcher of each. The epoch must be
the one the broker expects next (INVALID_FETCH_SESSION_EPOCH otherwise), an unknown id gets
FETCH_SESSION_ID_NOT_FOUND; either way the fetcher falls back to a full request. Epoch -1 with
an id closes the session.

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions. When it is full
a new session takes the place of the least recently used one if that one has been idle for
``min.incremental.fetch.session.eviction.ms`` (Kafka also weighs sessions by size; this cache
does not), else the fetch goes on without a session (id 0), as Kafka answers then.

Pure bookkeeping with an injected clock, no I/O; the Fetch handler calls it on the event loop.
"""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict
from dataclasses import dataclass, field

from odradek.clock import Clock
from odradek.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_SESSION = 0

TopicPartitionKey = tuple[str, int]


@dataclass(slots=True)
class SessionPartition:
    """A partition of a session: what the fetcher asks for, and what it was last told."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    # As last sent (None: never), for deciding whether an incremental response includes it.
    sent_high_watermark: int | None = None
    sent_last_stable_offset: int | None = None
    sent_log_start_offset: int | None = None


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next incremental request must carry
    partitions: OrderedDict[TopicPartitionKey, SessionPartition] = field(
        default_factory=OrderedDict
    )
    last_used_ms: int = 0


@dataclass(frozen=True, slots=True)
class SessionContext:
    """What one Fetch request resolved to: the partitions to read (in order), whether the
    response may leave out unchanged ones, and the session id to answer with (or an error)."""

    partitions: list[tuple[TopicPartitionKey, SessionPartition]]
    incremental: bool
    session_id: int
    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None


class FetchSessionCache:
    """The broker's fetch sessions (see the module doc)."""

    def __init__(self, clock: Clock, slots: int = 1000, eviction_ms: int = 120_000) -> None:
        self.clock = clock
        self.slots = slots
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recent first
        self._random = random.Random()
        # What the metrics and tests look at: sessions evicted, requests by kind.
        self.evictions = 0
        self.full_requests = 0
        self.incremental_requests = 0
        self.partitions_named_incrementally = 0  # over all incremental requests

    def __len__(self) -> int:
        return len(self._sessions)

    def partitions_cached(self) -> int:
        """The partitions of all sessions (Kafka's NumIncrementalFetchPartitionsCached)."""
        return sum(len(s.partitions) for s in self._sessions.values())

    def _new_id(self) -> int:
        for _ in itertools.count():
            candidate = self._random.randint(1, 2**31 - 1)
            if candidate not in self._sessions:
                return candidate
        raise AssertionError("unreachable")

    def resolve(
        self,
        session_id: int,
        epoch: int,
        requested: list[tuple[TopicPartitionKey, SessionPartition]],
        forgotten: list[TopicPartitionKey],
    ) -> SessionContext:
        now = self.clock.monotonic_ms()
        if epoch == FINAL_EPOCH:
            if session_id != NO_SESSION:
                self._sessions.pop(session_id, None)
            return SessionContext(requested, False, NO_SESSION)
        if epoch == INITIAL_EPOCH:
            self.full_requests += 1
            if session_id != NO_SESSION:
                self._sessions.pop(session_id, None)  # a full request replaces the session
            session = self._create(requested, now)
            return SessionContext(
                requested,
                False,
                session.session_id if session is not None else NO_SESSION,
                session=session,
            )
        self.incremental_requests += 1
        self.partitions_named_incrementally += len(requested)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionContext([], False, NO_SESSION, ErrorCode.fetch_session_id_not_found)
        if epoch != session.epoch:
            return SessionContext([], False, NO_SESSION, ErrorCode.invalid_fetch_session_epoch)
        for key in forgotten:
            session.partitions.pop(key, None)
        for key, wanted in requested:
            known = session.partitions.get(key)
            if known is None:
                session.partitions[key] = wanted
            else:
                known.fetch_offset = wanted.fetch_offset
                known.max_bytes = wanted.max_bytes
                known.current_leader_epoch = wanted.current_leader_epoch
                known.log_start_offset = wanted.log_start_offset
        session.epoch = _next_epoch(session.epoch)
        session.last_used_ms = now
        self._sessions.move_to_end(session_id)
        return SessionContext(list(session.partitions.items()), True, session_id, session=session)

    def _create(
        self, requested: list[tuple[TopicPartitionKey, SessionPartition]], now: int
    ) -> FetchSession | None:
        if self.slots <= 0:
            return None
        if len(self._sessions) >= self.slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.last_used_ms < self.eviction_ms:
                return None  # every session is in use: fetch without one
            del self._sessions[oldest_id]
            self.evictions += 1
        session = FetchSession(
            self._new_id(), _next_epoch(INITIAL_EPOCH), OrderedDict(requested), now
        )
        self._sessions[session.session_id] = session
        return session


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


def changed(
    partition: SessionPartition,
    high_watermark: int,
    last_stable_offset: int,
    log_start_offset: int,
    has_records: bool,
    error: int,
) -> bool:
    """Whether an incremental response must include the partition (and note what it says)."""
    include = (
        has_records
        or error != ErrorCode.none
        or partition.sent_high_watermark != high_watermark
        or partition.sent_last_stable_offset != last_stable_offset
        or partition.sent_log_start_offset != log_start_offset
    )
    if include:
        partition.sent_high_watermark = high_watermark
        partition.sent_last_stable_offset = last_stable_offset
        partition.sent_log_start_offset = log_start_offset
    return include
