"""Followers copying their leaders' logs: ``num.replica.fetchers`` fetcher tasks per leader
(Kafka's ``ReplicaFetcherThread``), each with a connection of its own, over the Kafka protocol
with the project's asyncio client (the Fetch written by hand: :func:`~odradek.protocol.
fetch_request.encode_replica_fetch`, its answer read by hand, records as views of the frame:
:func:`~odradek.protocol.fetch_response.decode_fetch_v12`).

A partition this broker follows is handed to the fetcher of its leader with its fetcher id
(:func:`fetcher_id`). A fetch is always out to the leader while there is something to copy: it
waits there up to ``replica.fetch.wait.max.ms`` and is answered as soon as the leader appends.
Before its first fetch (and after every leader change) the fetcher finds where the local log
diverges from the leader's: OffsetForLeaderEpoch for the log's latest epoch, truncation to the
end of that epoch as the leader has it, again while the answer names an epoch this log lacks
(KIP-101, KIP-279); the log manager checkpoints before the partition is appended to again
(recovery trusts what lies below a checkpointed recovery point). Then it fetches with
``replica_id`` set to this broker's id from each partition's log end offset, appends the leader's
batches as they are, and takes the leader's high watermark. The leader learns the follower's log
end offset from the next fetch.

The fetches go in an incremental fetch session (KIP-227, :mod:`~odradek.cluster.replication.
fetch_session`): the first lists every partition, later ones only those whose fetch offset (or
log start, leader epoch) moved, and forget those not fetched now (backing off, truncating,
throttled, removed); the leader answers only the partitions with something new. The leader
refusing the session (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) makes the next
fetch a full one, sent at once; any other error or a lost connection does too, after the backoff.

Far behind (two partitions or more whose logs end below the leader's high watermark), a second
fetch is out beside the first, for the other partitions and without a wait at the leader: the
leader serves one while the follower appends the other's answer, and the connection, answering
in order, is never held by a long poll. A partition is in one request at a time, so each fetch
still reports log ends the follower has written. These two go without the session (its fetches
follow each other by epoch, and the leader reads all of its partitions for each); caught up, the
one long poll in the session lists the partitions they moved.

Errors: a partition whose leader answers NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
UNKNOWN_LEADER_EPOCH or UNKNOWN_TOPIC_OR_PARTITION waits ``replica.fetch.backoff.ms`` (the
partition's state in the metadata store, not the fetcher, decides who leads); OFFSET_OUT_OF_RANGE
sends it back to truncation, and a log that ends before the leader's starts is emptied and
restarted at the leader's log start offset. A lost connection is opened again after the backoff.

Throttling (``cluster/replication/quota.py``): while the follower quota is exceeded, throttled
partitions this broker is not in the ISR of are left out of the fetch, and what is copied for
throttled partitions is recorded.

The decisions are :class:`FetcherCore`'s, without I/O (h11's shape): it says which request to send
next (ListOffsets for partitions whose fetch offset the leader did not have, OffsetForLeaderEpoch
for partitions finding their divergence point, else Fetch), or how long to wait, and it applies
each response to the partitions' logs. :class:`LeaderFetcher` is its asyncio shell: the
connection, the waiting and the retries after a lost connection. The core is tested against a
scripted leader with a manual clock.

Runs on the broker's event loop; partitions are added and removed by the replica manager there.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.client.aio import AsyncConnection
from odradek.client.core import ClientError
from odradek.clock import Clock, SystemClock
from odradek.cluster.replication.fetch_session import (
    NO_SESSION,
    SESSIONLESS_EPOCH,
    Asked,
    FollowerSession,
    SessionFetch,
)
from odradek.cluster.replication.partition import Partition
from odradek.cluster.replication.quota import ReplicationQuotas
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch_request import (
    REPLICA_FETCH_VERSION,
    ReplicaFetchPartition,
    encode_replica_fetch,
)
from odradek.protocol.fetch_response import decode_fetch_v12
from odradek.security.client_settings import ClientSecurity
from odradek.storage import UnexpectedAppendOffset

log = logging.getLogger(__name__)

FETCH = 1
LIST_OFFSETS = 2
OFFSET_FOR_LEADER_EPOCH = 23
_FETCH_VERSION = REPLICA_FETCH_VERSION  # encoded by hand: encode_replica_fetch
_EARLIEST = -2
_OFFSET_FOR_LEADER_EPOCH_VERSION = 4
_LIST_OFFSETS_VERSION = 7
# How long a fetcher whose every partition is held back by its quota waits before looking again.
_THROTTLED_PAUSE_MS = 100
# Fetches out to one leader at once: while one answer is appended, the next is on its way.
_MOST_OUT = 2

TopicPartition = tuple[str, int]

# The leader does not have the session, or at that epoch: a full fetch starts a new one.
_SESSION_ERRORS = frozenset(
    {ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch}
)

_WAIT_FOR_METADATA = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.kafka_storage_error,
    }
)


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The follower's ``replica.fetch.*`` settings."""

    local_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30_000
    # num.replica.fetchers: the fetchers (connections) to each leader the partitions spread over.
    fetchers_per_leader: int = 1
    # TLS and SASL of the inter-broker listener (None: PLAINTEXT).
    security: ClientSecurity | None = None


@dataclass(frozen=True, slots=True)
class LeaderRequest:
    """A request the core wants sent to the leader, and the partitions it asked about (with the
    log end offset each had when asked, for a Fetch), so that its answer is read against them.
    ``adds`` is the count of :meth:`FetcherCore.add` calls when it was made: a partition added
    (again) after that is not what the request asked about."""

    api_key: int
    fields: Mapping[str, Any]
    highest: int
    asked: Mapping[TopicPartition, tuple[Partition, int]]
    timeout_s: float | None = None
    adds: int = 0
    session: SessionFetch | None = None  # a Fetch in the fetch session (None: without one)


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing to send before ``until_ms`` (monotonic), or until a partition is added (None)."""

    until_ms: int | None


class FetcherCore:
    """What a follower asks its leader next, and what it does with the answers (see the
    module doc); no I/O of its own beyond the partitions' logs it appends to and truncates.

    Called on the broker's event loop, with the monotonic time of each call.
    """

    def __init__(
        self,
        leader_id: int,
        config: FetcherConfig,
        checkpoint: Callable[[], None],
        quotas: ReplicationQuotas | None = None,
    ) -> None:
        self.leader_id = leader_id
        self.config = config
        self._checkpoint = checkpoint
        self._quotas = quotas
        self._partitions: dict[TopicPartition, Partition] = {}
        self._truncating: set[TopicPartition] = set()
        self._out_of_range: set[TopicPartition] = set()
        self._delayed: dict[TopicPartition, int] = {}  # until this monotonic ms
        # Each partition's add (a count of adds): an answer to a request made before it is
        # stale for that partition, whatever it says (see _current).
        self._adds = 0
        self._added: dict[TopicPartition, int] = {}
        # Partitions a request sent (see sent) is out for: none is asked about twice at once.
        self._in_flight: set[TopicPartition] = set()
        # Partitions whose last answer brought records and left their log below the leader's
        # high watermark: far enough behind that a second fetch may be out beside the first.
        self._behind: set[TopicPartition] = set()
        self._session = FollowerSession()

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return frozenset(self._partitions)

    def delayed_until(self, tp: TopicPartition) -> int | None:
        """When a partition backing off may be fetched again (None: it is not backing off)."""
        return self._delayed.get(tp)

    def truncating(self, tp: TopicPartition) -> bool:
        """Whether the partition is still finding where its log diverges from the leader's."""
        return tp in self._truncating

    def add(self, partition: Partition) -> None:
        """Follow ``partition`` from this leader, finding the divergence point first."""
        tp = (partition.topic, partition.index)
        self._adds += 1
        self._added[tp] = self._adds
        self._partitions[tp] = partition
        self._truncating.add(tp)
        self._out_of_range.discard(tp)
        self._delayed.pop(tp, None)
        self._behind.discard(tp)

    def remove(self, topic: str, index: int) -> None:
        tp = (topic, index)
        self._partitions.pop(tp, None)
        self._added.pop(tp, None)
        self._truncating.discard(tp)
        self._out_of_range.discard(tp)
        self._delayed.pop(tp, None)
        self._behind.discard(tp)

    def sent(self, request: LeaderRequest) -> None:
        """``request`` is out: its partitions are left out of the next ones until it is
        answered (:meth:`received`) or given up (:meth:`abandoned`)."""
        self._in_flight.update(request.asked)
        if request.session is not None:
            self._session.sent(request.session)

    def abandoned(self, request: LeaderRequest) -> None:
        """``request`` will not be answered (its connection is gone)."""
        self._in_flight.difference_update(request.asked)
        self._session.lost()

    def poll(self, now_ms: int) -> LeaderRequest | Wait:
        """The next request, or how long there is nothing to ask (with nothing out).

        Far behind (two partitions or more below the leader's high watermark), the fetch
        asks for half of them (see :meth:`poll_beside`)."""
        ready = [
            tp
            for tp in self._partitions
            if self._delayed.get(tp, 0) <= now_ms and tp not in self._in_flight
        ]
        if not ready:
            return Wait(min(self._delayed.values(), default=None))
        out_of_range = [tp for tp in ready if tp in self._out_of_range]
        if out_of_range:
            return self._list_offsets(out_of_range)
        truncating = [tp for tp in ready if tp in self._truncating]
        if truncating:
            request = self._offset_for_leader_epoch(truncating)
            if request is not None:
                return request
        fetchable = [tp for tp in ready if tp not in self._truncating and not self._held_back(tp)]
        if not fetchable:
            return Wait(now_ms + _THROTTLED_PAUSE_MS)
        behind = [tp for tp in fetchable if tp in self._behind]
        if len(behind) >= 2:
            # The other half goes in a second fetch (poll_beside) while this answer is read
            # and written: the leader serves one while the follower appends the other.
            # Both go without the session: its fetches follow each other, each reading all
            # of its partitions at the leader.
            later = set(behind[len(behind) // 2 :])
            return self._fetch([tp for tp in fetchable if tp not in later], max_wait_ms=0)
        return self._fetch(fetchable, in_session=not self._session.out)

    def poll_beside(self, now_ms: int) -> LeaderRequest | None:
        """A Fetch to send while others are out, or None: only for partitions not asked
        about, one of them at least behind, and with no wait at the leader (the connection
        answers in order: a long poll would hold back the answers behind it). Each partition
        is in one request at a time, and each fetch still reports its partitions' log ends
        as written: the leader learns nothing before the follower has it. Never beside a
        fetch in the session: that one asked for every partition then fetchable, and an
        answer beside its long poll would wait behind it."""
        if self._session.out:
            return None
        fetchable = [
            tp
            for tp in self._partitions
            if tp not in self._in_flight
            and self._delayed.get(tp, 0) <= now_ms
            and tp not in self._truncating
            and tp not in self._out_of_range
            and not self._held_back(tp)
        ]
        if not any(tp in self._behind for tp in fetchable):
            return None
        return self._fetch(fetchable, max_wait_ms=0)

    def received(self, request: LeaderRequest, response: Any, now_ms: int) -> None:
        """Apply the leader's answer to ``request``."""
        self._in_flight.difference_update(request.asked)
        if request.api_key == FETCH:
            self._fetched(request, response, now_ms)
        elif request.api_key == OFFSET_FOR_LEADER_EPOCH:
            self._epoch_ends(request, response, now_ms)
        else:
            self._log_starts(request, response, now_ms)

    def _back_off(self, tp: TopicPartition, why: str, now_ms: int) -> None:
        log.debug("%s-%d: waiting %d ms (%s)", *tp, self.config.backoff_ms, why)
        self._delayed[tp] = now_ms + self.config.backoff_ms

    def _current(self, request: LeaderRequest, tp: TopicPartition) -> tuple[Partition, int] | None:
        """What was asked of ``tp``, unless it was removed, handed to another leader or added
        again (a new leader epoch: truncation first) since. The answer to a fetch made in the
        old epoch says FENCED_LEADER_EPOCH; taken, it would hold the partition back for the
        backoff although it is already on its way again."""
        entry = request.asked.get(tp)
        if (
            entry is None
            or self._partitions.get(tp) is not entry[0]
            or self._added.get(tp, 0) > request.adds
        ):
            return None
        return entry

    # -- truncation ----------------------------------------------------------------------------

    def _offset_for_leader_epoch(self, tps: list[TopicPartition]) -> LeaderRequest | None:
        asked: dict[TopicPartition, tuple[Partition, int]] = {}
        topics: dict[str, list[dict[str, int]]] = {}
        for tp in tps:
            hosted = self._partitions[tp]
            latest = hosted.log.latest_epoch
            if latest is None:
                # No epoch known (an empty log): nothing to compare, nothing to cut.
                self._truncating.discard(tp)
                continue
            asked[tp] = (hosted, hosted.log.log_end_offset)
            topics.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": hosted.leader_epoch,
                    "leader_epoch": latest,
                }
            )
        if not asked:
            return None
        return LeaderRequest(
            OFFSET_FOR_LEADER_EPOCH,
            {
                "replica_id": self.config.local_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            },
            _OFFSET_FOR_LEADER_EPOCH_VERSION,
            asked,
            adds=self._adds,
        )

    def _epoch_ends(self, request: LeaderRequest, response: Any, now_ms: int) -> None:
        truncated = False
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.topic, int(answer.partition))
                entry = self._current(request, tp)
                if entry is None:
                    continue
                partition = entry[0]
                if answer.error_code != ErrorCode.none:
                    why = f"OffsetForLeaderEpoch: {ErrorCode(answer.error_code).name}"
                    self._back_off(tp, why, now_ms)
                    continue
                before = partition.log.log_end_offset
                outcome = partition.log.truncate_to_epoch_end(
                    int(answer.leader_epoch),
                    int(answer.end_offset),
                    high_watermark=partition.high_watermark,
                )
                if partition.log.log_end_offset != before:
                    truncated = True
                    log.info(
                        "%s-%d: truncated from %d to %d to follow leader %d (epoch %d)",
                        *tp,
                        before,
                        partition.log.log_end_offset,
                        self.leader_id,
                        partition.leader_epoch,
                    )
                if outcome.complete:
                    self._truncating.discard(tp)
        if truncated:
            self._checkpoint()

    # -- fetching ------------------------------------------------------------------------------

    def _held_back(self, tp: TopicPartition) -> bool:
        quotas = self._quotas
        if quotas is None:
            return False
        in_sync = self.config.local_id in self._partitions[tp].isr
        return quotas.follower_holds_back(*tp, in_sync)

    def _fetch(
        self, tps: list[TopicPartition], max_wait_ms: int | None = None, in_session: bool = False
    ) -> LeaderRequest:
        """A Fetch of ``tps``: in the session (listing only what it does not know, forgetting
        what it holds beyond ``tps``), or without one (listing them all)."""
        config = self.config
        if max_wait_ms is None:
            max_wait_ms = config.max_wait_ms
        max_bytes = config.partition_max_bytes
        asked: dict[TopicPartition, tuple[Partition, int]] = {}
        wanted: dict[TopicPartition, Asked] = {}
        for tp in tps:
            partition = self._partitions[tp]
            log_ = partition.log
            offset = log_.log_end_offset
            asked[tp] = (partition, offset)
            wanted[tp] = (offset, log_.log_start_offset, partition.leader_epoch, max_bytes)
        session: SessionFetch | None = None
        listed: list[TopicPartition] | dict[TopicPartition, Asked] = wanted
        forgotten: dict[str, list[int]] = {}
        session_id, epoch = NO_SESSION, SESSIONLESS_EPOCH
        if in_session:
            session = self._session.next_fetch(wanted)
            listed, session_id, epoch = session.listed, session.session_id, session.epoch
            for topic, index in session.forgotten:
                forgotten.setdefault(topic, []).append(index)
        topics: dict[str, list[dict[str, int]]] = {}
        for tp in listed:
            offset, log_start, leader_epoch, _ = wanted[tp]
            topics.setdefault(tp[0], []).append(
                {
                    "partition": tp[1],
                    "current_leader_epoch": leader_epoch,
                    "fetch_offset": offset,
                    "log_start_offset": log_start,
                    "partition_max_bytes": max_bytes,
                }
            )
        return LeaderRequest(
            FETCH,
            {
                "replica_id": config.local_id,
                "max_wait": datetime.timedelta(milliseconds=max_wait_ms),
                "min_bytes": config.min_bytes,
                "max_bytes": config.max_bytes,
                "isolation_level": 0,
                "session_id": session_id,
                "session_epoch": epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [
                    {"topic": t, "partitions": ps} for t, ps in forgotten.items()
                ],
                "rack_id": "",
            },
            _FETCH_VERSION,
            asked,
            timeout_s=(config.socket_timeout_ms + max_wait_ms) / 1000,
            adds=self._adds,
            session=session,
        )

    def _fetched(self, request: LeaderRequest, response: Any, now_ms: int) -> None:
        session = request.session
        if session is not None:
            self._session.answered(session, response.error_code, response.session_id)
            if response.error_code in _SESSION_ERRORS and session.session_id != NO_SESSION:
                return  # the next fetch is a full one, at once
        if response.error_code != ErrorCode.none:
            for tp in request.asked:
                if self._current(request, tp) is not None:
                    self._back_off(tp, f"Fetch: {ErrorCode(response.error_code).name}", now_ms)
            return
        # An incremental answer leaves out the partitions with nothing new.
        answered: set[TopicPartition] | None = None
        if session is not None and not session.full:
            answered = set()
        for topic in response.responses:
            for data in topic.partitions:
                tp = (topic.topic, int(data.partition_index))
                if answered is not None:
                    answered.add(tp)
                entry = self._current(request, tp)
                if entry is None:
                    continue
                partition, offset = entry
                if partition.log.log_end_offset != offset:
                    continue  # truncated meanwhile: this data is stale
                code = ErrorCode(data.error_code)
                if code == ErrorCode.none:
                    self._take(tp, partition, data.records, int(data.high_watermark), now_ms)
                    self._catch_up_log_start(partition, int(data.log_start_offset))
                elif code == ErrorCode.offset_out_of_range:
                    self._out_of_range.add(tp)
                else:
                    if code not in _WAIT_FOR_METADATA:
                        log.warning("%s-%d: leader %d answered %s", *tp, self.leader_id, code.name)
                    self._back_off(tp, f"Fetch: {code.name}", now_ms)
        if answered is not None and len(answered) < len(request.asked):
            # As for an answer without records: no second fetch for them.
            self._behind.difference_update(request.asked.keys() - answered)

    def _take(
        self,
        tp: TopicPartition,
        partition: Partition,
        records: bytes | memoryview | None,
        high_watermark: int,
        now_ms: int,
    ) -> None:
        if records and self._quotas is not None and self._quotas.follower_throttled(*tp):
            self._quotas.follower.record(len(records))
        try:
            appended = partition.append_as_follower(records or b"")
        except UnexpectedAppendOffset as e:
            # The leader's log has a gap here (compaction) or the follower's is stale: find
            # the divergence point again.
            log.warning("%s-%d: %s; truncating again", *tp, e)
            self._truncating.add(tp)
            return
        except KafkaError as e:
            log.warning("%s-%d: leader %d sent %s", *tp, self.leader_id, e.message)
            self._back_off(tp, e.message, now_ms)
            return
        partition.follow_high_watermark(high_watermark)
        # Behind only while answers bring records: a leader holding a throttled partition back
        # answers it with none at once, and fetches without a wait would ask again at once.
        if appended is not None and partition.log.log_end_offset < high_watermark:
            self._behind.add(tp)
        else:
            self._behind.discard(tp)

    def _catch_up_log_start(self, partition: Partition, leader_log_start: int) -> None:
        """Retention and DeleteRecords at the leader move the follower's log start too."""
        log_ = partition.log
        if log_.log_start_offset < leader_log_start <= log_.log_end_offset:
            log_.delete_records_before(leader_log_start)

    # -- a fetch offset the leader does not have -------------------------------------------------

    def _list_offsets(self, tps: list[TopicPartition]) -> LeaderRequest:
        """Past the leader's end (truncate, by epoch) or before its start (this log is too old:
        start afresh at the leader's log start): its log start offset tells which."""
        asked = {tp: (self._partitions[tp], self._partitions[tp].log.log_end_offset) for tp in tps}
        topics: dict[str, list[dict[str, int]]] = {}
        for (topic, index), (partition, _) in asked.items():
            topics.setdefault(topic, []).append(
                {
                    "partition_index": index,
                    "current_leader_epoch": partition.leader_epoch,
                    "timestamp": _EARLIEST,
                }
            )
        return LeaderRequest(
            LIST_OFFSETS,
            {
                "replica_id": self.config.local_id,
                "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
            _LIST_OFFSETS_VERSION,
            asked,
            adds=self._adds,
        )

    def _log_starts(self, request: LeaderRequest, response: Any, now_ms: int) -> None:
        self._out_of_range.difference_update(request.asked)
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.name, int(answer.partition_index))
                entry = self._current(request, tp)
                if entry is None:
                    continue
                partition = entry[0]
                if answer.error_code != ErrorCode.none:
                    why = f"ListOffsets: {ErrorCode(answer.error_code).name}"
                    self._back_off(tp, why, now_ms)
                    continue
                leader_start = int(answer.offset)
                if partition.log.log_end_offset < leader_start:
                    log.warning(
                        "%s-%d: log ends at %d, before leader %d's log start %d: starting "
                        "afresh there",
                        *tp,
                        partition.log.log_end_offset,
                        self.leader_id,
                        leader_start,
                    )
                    partition.log.truncate_fully_and_start_at(leader_start)
                    self._checkpoint()
                else:
                    self._truncating.add(tp)


def fetcher_id(topic: str, index: int, fetchers_per_leader: int) -> int:
    """Which of a leader's fetchers copies a partition: Kafka's choice (``31 * the topic's Java
    hashCode + the partition``, absolute, modulo the fetcher count), so that a partition has
    the same fetcher id as on a Kafka broker and after every restart."""
    if fetchers_per_leader <= 1:
        return 0
    h = 0
    for unit in struct.unpack(
        f">{len(topic.encode('utf-16-be')) // 2}H", topic.encode("utf-16-be")
    ):
        h = (31 * h + unit) & 0xFFFFFFFF
    value = (31 * h + index) & 0xFFFFFFFF
    if value >= 0x80000000:
        value -= 0x100000000
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, any other value to its absolute value.
    value = 0 if value == -0x80000000 else abs(value)
    return value % fetchers_per_leader


def _fetch_frame(fields: Mapping[str, Any], client_id: str) -> bytes:
    """The frame of the core's Fetch (its correlation id set when sent)."""
    topics = [
        (
            topic["topic"],
            [
                ReplicaFetchPartition(
                    p["partition"],
                    p["current_leader_epoch"],
                    p["fetch_offset"],
                    p["log_start_offset"],
                    p["partition_max_bytes"],
                )
                for p in topic["partitions"]
            ],
        )
        for topic in fields["topics"]
    ]
    return encode_replica_fetch(
        0,
        client_id,
        fields["replica_id"],
        fields["max_wait"] // datetime.timedelta(milliseconds=1),
        fields["min_bytes"],
        fields["max_bytes"],
        topics,
        session_id=fields["session_id"],
        session_epoch=fields["session_epoch"],
        forgotten=[(t["topic"], t["partitions"]) for t in fields["forgotten_topics_data"]],
    )


class LeaderFetcher:
    """The asyncio shell of a :class:`FetcherCore`: one task and one connection to the leader
    (see the module doc)."""

    def __init__(
        self,
        leader_id: int,
        address: str,
        config: FetcherConfig,
        checkpoint: Callable[[], None],
        quotas: ReplicationQuotas | None = None,
        clock: Clock | None = None,
        fetcher_id: int = 0,
    ) -> None:
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.address = address
        self.config = config
        self.core = FetcherCore(leader_id, config, checkpoint, quotas)
        self._clock = clock or SystemClock()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: AsyncConnection | None = None
        self._stopping = False
        self._client_id = f"broker-{config.local_id}-fetcher-{fetcher_id}-{leader_id}"

    @property
    def partitions(self) -> frozenset[TopicPartition]:
        return self.core.partitions

    def add(self, partition: Partition) -> None:
        """Follow ``partition`` from this leader, finding the divergence point first."""
        self.core.add(partition)
        self._changed.set()

    def remove(self, topic: str, index: int) -> None:
        self.core.remove(topic, index)

    def start(self) -> None:
        self._task = asyncio.create_task(
            self._run(),
            name=f"replica-fetcher-{self.fetcher_id}-{self.config.local_id}-from-{self.leader_id}",
        )

    async def stop(self) -> None:
        self._stopping = True
        self._changed.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._disconnect()

    async def _disconnect(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def _run(self) -> None:
        backoff_s = self.config.backoff_ms / 1000
        # Requests out, oldest first (the connection answers in order).
        out: collections.deque[tuple[LeaderRequest, asyncio.Task[Any]]] = collections.deque()
        while not self._stopping:
            try:
                if out:
                    beside = None
                    if len(out) < _MOST_OUT:
                        beside = self.core.poll_beside(self._clock.monotonic_ms())
                    if beside is not None:
                        out.append(self._send(await self._connected(), beside))
                        continue
                    request, task = out[0]
                    response = await task
                    out.popleft()
                    self.core.received(request, response, self._clock.monotonic_ms())
                    # Its records are views of the connection's receive buffer: let go of them
                    # so that the next answer reuses the buffer rather than faulting in a new one.
                    del response, task
                    continue
                step = self.core.poll(self._clock.monotonic_ms())
                if isinstance(step, Wait):
                    if not self.core.partitions:
                        # Nothing to follow from this leader (its partitions moved): no
                        # connection and no reconnecting to a leader that may be gone.
                        await self._disconnect()
                    await self._idle(step.until_ms)
                    continue
                out.append(self._send(await self._connected(), step))
            except asyncio.CancelledError:
                self._give_up(out)
                raise
            except (ClientError, OSError) as e:
                self._give_up(out)
                log.info(
                    "broker %d cannot fetch from leader %d at %s: %s",
                    self.config.local_id,
                    self.leader_id,
                    self.address,
                    e,
                )
                await self._disconnect()
                await asyncio.sleep(backoff_s)
            except Exception:
                self._give_up(out)
                log.exception("replica fetcher from leader %d failed", self.leader_id)
                await self._disconnect()
                await asyncio.sleep(backoff_s)

    def _send(
        self, connection: AsyncConnection, step: LeaderRequest
    ) -> tuple[LeaderRequest, asyncio.Task[Any]]:
        """Write ``step`` now (its frame goes out before any later one's) and return the task
        that waits for its answer."""
        if step.api_key == FETCH:
            waiting = connection.request_encoded(
                _fetch_frame(step.fields, self._client_id),
                decode_fetch_v12,
                timeout_s=step.timeout_s,
            )
        else:
            waiting = connection.request(
                step.api_key, step.fields, highest=step.highest, timeout_s=step.timeout_s
            )
        task = asyncio.ensure_future(waiting)
        self.core.sent(step)
        return step, task

    def _give_up(self, out: collections.deque[tuple[LeaderRequest, asyncio.Task[Any]]]) -> None:
        """The requests out will not be answered: their partitions may be asked about again."""
        while out:
            request, task = out.popleft()
            task.cancel()
            self.core.abandoned(request)

    async def _connected(self) -> AsyncConnection:
        if self._connection is None or self._connection.closed:
            self._connection = await AsyncConnection.open(
                self.address,
                client_id=self._client_id,
                timeout_s=self.config.socket_timeout_ms / 1000,
                security=self.config.security,
            )
        return self._connection

    async def _idle(self, until_ms: int | None) -> None:
        """Wait for a partition to be added or ``until_ms``. Called right after the core's poll,
        with no await in between, so an ``add`` is never missed."""
        self._changed.clear()
        timeout = None
        if until_ms is not None:
            timeout = max(until_ms - self._clock.monotonic_ms(), 0) / 1000
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)
