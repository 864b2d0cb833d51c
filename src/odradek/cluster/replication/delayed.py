"""The replica manager's delayed operations (Kafka's ``DelayedProduce`` and ``DelayedFetch``):
what an acks=all produce and a Fetch long-poll wait for, checked each time the purgatory wakes
them, and what they answer once complete.

A :class:`DelayedProduce` completes when every partition it appended to has its high watermark
past the append, or an error ended the wait (leadership lost, the ISR below
``min.insync.replicas``).

A :class:`DelayedFetch` reads every partition once when the Fetch arrives (:meth:`~DelayedFetch.
read`); if that found fewer than ``min.bytes`` and no partition ends the wait, it parks, and a
wake (:meth:`~DelayedFetch.try_complete`) only compares each partition's offsets, role and epoch
with what they were (a "mark"): a partition whose mark moved is looked at again without reading
(an error, or a consumer sent to another replica, ends the wait), and the bytes now between its
fetch offset and its read bound are counted from the log's record of where its recent batches
start (:meth:`PartitionLog.bytes_between`), read from the log only when that record does not
reach back far enough. Once the count reaches ``min.bytes`` the segments are read, once, for
the answer; a slice is never kept across a wake (the cleaner may have replaced its segment
meanwhile). A count that promised more than the read found (compaction since) lets the Fetch
park again for the time it has left.

Neither touches the network or a clock: the purgatory parks them and times them out. Called on
the broker's event loop only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.cluster.replication.partition import FetchIsolation, Partition, RecordSlice
from odradek.cluster.replication.quota import ReplicationQuotas
from odradek.protocol import fetch_response
from odradek.protocol.errors import ErrorCode, KafkaError

# Built unsubscripted: on Python 3.11 calling ``PartitionData[RecordSlice](...)`` makes typing set
# ``__orig_class__`` on the frozen, slotted instance, which fails with a TypeError.
PartitionData = fetch_response.PartitionData
TopicPartitionKey = tuple[str, int]


class Watchable(Protocol):
    """What the purgatory watches: a partition, whose changes call the waiters once."""

    def add_waiter(self, callback: Callable[[], None]) -> None: ...

    def remove_waiter(self, callback: Callable[[], None]) -> None: ...


class Replicating(Protocol):
    """A partition an acks=all append waits on (see :meth:`Partition.replicated`); its
    ``replication`` wakes on what may change the answer (not on appends alone)."""

    @property
    def replication(self) -> Watchable: ...

    def replicated(self, required_offset: int) -> ErrorCode | None: ...


class FetchPosition(Protocol):
    """What a Fetch asks of one partition (a request's entry, or a fetch session's)."""

    @property
    def fetch_offset(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...
    # As last sent in the fetcher's session (None: never), for an incremental Fetch.
    @property
    def sent_high_watermark(self) -> int | None: ...
    @property
    def sent_last_stable_offset(self) -> int | None: ...
    @property
    def sent_log_start_offset(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class FetchParams:
    """What one Fetch asks of every partition it names (Kafka's ``FetchParams``)."""

    replica_id: int  # a follower's broker id; -1 for a consumer
    isolation: FetchIsolation
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # the whole response's
    # Topics the fetcher may not read (TOPIC_AUTHORIZATION_FAILED).
    denied: frozenset[str] = frozenset()
    # In an incremental fetch session: a partition with nothing new is left out.
    incremental: bool = False
    # The live brokers in the consumer's rack, when it may read from a replica there (KIP-392).
    rack_brokers: frozenset[int] | None = None

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


Mark = tuple[Partition, int, int, int, int, int, int, bool, tuple[int, ...], bool]


@dataclass(frozen=True, slots=True)
class _Answer:
    """A partition's answer as far as it is known without reading: final (``data``, None for
    one left out of an incremental response), or to be read (``reads``)."""

    data: PartitionData[RecordSlice] | None
    ends_wait: bool
    reads: bool


_TO_READ = _Answer(None, False, True)


class _Slot:
    """One partition of a DelayedFetch: what the Fetch asks, its mark and answer when last
    looked at, and the bytes a read would find (None: not counted since the mark moved)."""

    __slots__ = ("answer", "available", "key", "mark", "position")

    def __init__(self, key: TopicPartitionKey, position: FetchPosition) -> None:
        self.key = key
        self.position = position
        self.mark: Mark | None = None
        self.answer: _Answer | None = None
        self.available: int | None = None


@dataclass(frozen=True, slots=True)
class FetchResult:
    """A Fetch's answer: the topics with their partitions' data, the record bytes in them, and
    whether an error or a consumer sent elsewhere ended the wait."""

    topics: list[fetch_response.TopicData[RecordSlice]]
    size: int
    ends_wait: bool


class DelayedFetch:
    """One Fetch over its partitions (see the module doc). ``partition_of`` finds a hosted
    partition; ``errors`` are the partitions a follower's fetch may not have; ``quotas`` the
    leader's replication throttle."""

    def __init__(
        self,
        params: FetchParams,
        partitions: Sequence[tuple[TopicPartitionKey, FetchPosition]],
        partition_of: Callable[[str, int], Partition | None],
        quotas: ReplicationQuotas | None = None,
        errors: dict[TopicPartitionKey, ErrorCode] | None = None,
    ) -> None:
        self.params = params
        self._slots = [_Slot(key, position) for key, position in partitions]
        self._partition_of = partition_of
        self._quotas = quotas if params.from_follower else None
        self._errors = errors
        self._isolation = params.isolation

    def watched(self) -> list[Partition]:
        """The hosted partitions whose changes wake this fetch."""
        found = (self._partition_of(*slot.key) for slot in self._slots)
        return [p for p in found if p is not None]

    def satisfied(self, result: FetchResult) -> bool:
        return result.ends_wait or result.size >= self.params.min_bytes

    # -- a wake: offsets compared, nothing read -------------------------------------------------

    def try_complete(self) -> bool:
        """Whether the fetch may answer now: an error or a redirect ends the wait, or the
        bytes to be read reach ``min.bytes``. Reads the log only for a partition whose bytes
        the partition cannot count."""
        found = 0
        for slot in self._slots:
            partition = self._look_at(slot)
            answer = slot.answer
            assert answer is not None
            if answer.ends_wait:
                return True
            if answer.reads and partition is not None:
                if slot.available is None:
                    slot.available = self._available(partition, slot.position)
                found += slot.available
        return min(found, self.params.max_bytes) >= self.params.min_bytes

    def _available(self, partition: Partition, position: FetchPosition) -> int:
        upper = partition.read_bound(self._isolation)
        max_bytes = max(position.max_bytes, 0)
        counted = partition.log.bytes_between(position.fetch_offset, upper)
        if counted is not None:
            return min(counted, max_bytes)
        try:  # the record does not reach back this far: count by reading (and let it go)
            slice_ = partition.read(
                position.fetch_offset,
                max_bytes,
                max_offset=None if self.params.from_follower else upper,
                min_one_batch=False,
            )
        except KafkaError:
            return 0  # the read at completion answers the error
        return slice_.size if slice_ is not None else 0

    # -- a pass that reads: the first one, and at completion ------------------------------------

    def read(self) -> FetchResult:
        """Every partition's answer, reading the log where there is something to read."""
        total = 0
        ends_wait = False
        grouped: list[tuple[str, list[PartitionData[RecordSlice]]]] = []
        for slot in self._slots:
            name, index = slot.key
            if not grouped or grouped[-1][0] != name:
                grouped.append((name, []))
            partition = self._look_at(slot)
            answer = slot.answer
            assert answer is not None
            data = answer.data
            if answer.reads and partition is not None:
                data, error = self._read(partition, slot.position, index, total)
                slot.available = data.records_size
                ends_wait = ends_wait or error
            ends_wait = ends_wait or answer.ends_wait
            if data is not None:
                grouped[-1][1].append(data)
                total += data.records_size
        topics = [fetch_response.TopicData(name, ps) for name, ps in grouped if ps]
        return FetchResult(topics, total, ends_wait)

    def _look_at(self, slot: _Slot) -> Partition | None:
        """The partition of ``slot``, its answer made again if its mark moved."""
        name, index = slot.key
        partition = None if name in self.params.denied else self._partition_of(name, index)
        mark = None if partition is None else self._mark(partition)
        if slot.answer is None or mark != slot.mark:
            slot.mark = mark
            slot.answer = self._settle(partition, name, index, slot.position)
            slot.available = None
        return partition

    def _mark(self, partition: Partition) -> Mark:
        """What a partition's answer depends on besides the request: which partition object
        serves it, its read bound, high watermark, last stable offset, log start, leader epoch
        and leader, role, (for a rack-aware consumer) ISR and (for a throttled follower) whether
        the quota holds it back. Made on every wake of every partition: kept to attribute
        reads (the read bound is one of the offsets beside it)."""
        log = partition.log
        hw = log.high_watermark
        lso = log.last_stable_offset
        isolation = self._isolation
        if isolation == FetchIsolation.HIGH_WATERMARK:
            bound = hw
        elif isolation == FetchIsolation.TXN_COMMITTED:
            bound = lso
        else:
            bound = log.log_end_offset
        return (
            partition,
            bound,
            hw,
            lso,
            log.log_start_offset,
            partition.leader_epoch,
            partition.leader_id,
            partition.is_leader,
            partition.isr if self.params.rack_brokers is not None else (),
            self._quotas is not None and self._held_back(partition),
        )

    def _held_back(self, partition: Partition) -> bool:
        """A follower outside the ISR of a throttled partition gets no records while the
        leader's quota is exceeded."""
        quotas = self._quotas
        return quotas is not None and quotas.leader_holds_back(
            partition.topic, partition.index, self.params.replica_id in partition.isr
        )

    def _refused(self, partition: Partition, position: FetchPosition) -> ErrorCode:
        """Why this broker does not serve the partition to this fetcher (NONE if it does): its
        leader serves, a follower only consumers that may read from followers (KIP-392), and
        only in the epoch the fetcher knows (KIP-320); none whose log dir is offline
        (KIP-112)."""
        if partition.log.offline:
            return ErrorCode.kafka_storage_error
        followers_serve = self.params.rack_brokers is not None
        if not partition.is_leader and not (followers_serve and partition.leader_id >= 0):
            return ErrorCode.not_leader_or_follower
        code = partition.check_leader_epoch(position.current_leader_epoch)
        if code == ErrorCode.none and self._errors:
            code = self._errors.get((partition.topic, partition.index), ErrorCode.none)
        return code

    def _settle(
        self, partition: Partition | None, name: str, index: int, position: FetchPosition
    ) -> _Answer:
        """A partition's answer as far as it needs no read: an error or a redirect (both end
        the wait), nothing new for an incremental session, no records (at the end, or held
        back by the quota), or to be read."""
        params = self.params
        if partition is None:
            code = (
                ErrorCode.topic_authorization_failed
                if name in params.denied
                else ErrorCode.unknown_topic_or_partition
            )
            return _Answer(PartitionData(index, code, -1, -1, -1, None, 0), True, False)
        refused = self._refused(partition, position)
        if refused != ErrorCode.none:
            return _Answer(PartitionData(index, refused, -1, -1, -1, None, 0), True, False)
        log = partition.log
        hw, lso, start = log.high_watermark, log.last_stable_offset, log.log_start_offset
        if params.rack_brokers is not None and partition.is_leader:
            preferred = partition.preferred_read_replica(params.rack_brokers)
            if preferred >= 0:  # answer now: the consumer goes elsewhere
                elsewhere: PartitionData[RecordSlice] = PartitionData(
                    index, 0, hw, lso, start, None, 0, preferred
                )
                return _Answer(elsewhere, True, False)
        fetch_offset = position.fetch_offset
        upper = partition.read_bound(self._isolation)
        if (
            params.incremental
            and fetch_offset == upper
            and position.sent_high_watermark == hw
            and position.sent_last_stable_offset == lso
            and position.sent_log_start_offset == start
        ):
            return _Answer(None, False, False)  # nothing new: left out of the response
        # A fetcher already at the end (the usual case for most partitions of an idle
        # consumer's fetch) needs no look into the segments.
        if fetch_offset == upper or self._held_back(partition):
            return _Answer(PartitionData(index, 0, hw, lso, start, None, 0), False, False)
        return _TO_READ

    def _read(
        self, partition: Partition, position: FetchPosition, index: int, total: int
    ) -> tuple[PartitionData[RecordSlice], bool]:
        """A partition's records (a consumer's below its read bound, with the aborted
        transactions in them for read_committed; a follower's up to the log end), within the
        partition's and the response's byte limits (``total``: the bytes the response holds so
        far), and whether an error ends the wait."""
        log = partition.log
        fetch_offset = position.fetch_offset
        limit = min(position.max_bytes, self.params.max_bytes - total)
        slice_: RecordSlice | None = None
        error = ErrorCode.none
        if limit > 0 or total == 0:
            upper = partition.read_bound(self._isolation)
            try:
                slice_ = partition.read(
                    fetch_offset,
                    max(limit, 0),
                    max_offset=None if self.params.from_follower else upper,
                    min_one_batch=total == 0,
                )
            except KafkaError as e:
                error = e.code
        size = slice_.size if slice_ is not None else 0
        aborted: list[tuple[int, int]] = []
        if self._isolation == FetchIsolation.TXN_COMMITTED and size:
            aborted = partition.aborted_transactions(fetch_offset)
        data = PartitionData(
            index,
            error,
            log.high_watermark,
            log.last_stable_offset,
            log.log_start_offset,
            slice_ if size else None,
            size,
            aborted_transactions=aborted,
        )
        return data, error != ErrorCode.none


class DelayedProduce:
    """An acks=all produce's wait (and a coordinator's for its records): each (partition, offset
    after its append) until the high watermark passes the offset or an error ends that
    partition's wait."""

    def __init__(self, waits: Collection[tuple[Replicating, int]]) -> None:
        self._waits = list(waits)

    def watched(self) -> list[Watchable]:
        return [partition.replication for partition, _ in self._waits]

    def try_complete(self) -> bool:
        return all(p.replicated(offset) is not None for p, offset in self._waits)

    def outcomes(self) -> list[ErrorCode]:
        """Each partition's answer, in order: NONE once replicated, the error that ended the
        wait, or REQUEST_TIMED_OUT (the wait is over, and the high watermark is not there)."""
        outcomes = []
        for partition, offset in self._waits:
            outcome = partition.replicated(offset)
            outcomes.append(ErrorCode.request_timed_out if outcome is None else outcome)
        return outcomes
