"""One partition as this broker hosts it: its log, its role (leader or follower), its high
watermark, and the requests parked on it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Generator, Iterable
from dataclasses import dataclass
from enum import IntEnum

from odradek.clock import Clock
from odradek.cluster.metadata.view import PartitionInfo
from odradek.cluster.replication.isr import IsrProposal, IsrTracker
from odradek.protocol.control import encode_end_txn_marker
from odradek.protocol.errors import ErrorCode, KafkaError, RecordsRejected
from odradek.protocol.record_batch import (
    BatchHeader,
    InvalidBatch,
    copied_batches,
    iter_headers,
)
from odradek.storage import AppendInfo, OffsetOutOfRange, PartitionLog, ReadSlice
from odradek.storage.producer_state import NO_PRODUCER_ID, AppendedSequence
from odradek.storage.validator import (
    RecordsChecked,
    SchemaIds,
    Step,
    checking_in_steps,
    stepped,
    validate_for_leader,
)

# What a read of the partition hands out: record batches as a slice of a segment file (sent with
# sendfile) or as bytes. Named here so that the layers above reach the log only through the
# partition.
RecordSlice = ReadSlice

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class _Marker:
    """What a transaction marker's append is checked with besides its batch header."""

    coordinator_epoch: int
    transaction_version: int


class FetchIsolation(IntEnum):
    """How far a fetcher may read (Kafka's ``FetchIsolation``)."""

    LOG_END = 0  # a follower: everything the leader has
    HIGH_WATERMARK = 1  # a read_uncommitted consumer
    TXN_COMMITTED = 2  # a read_committed consumer: below the last stable offset


class Waiters:
    """Callbacks of parked requests, each called once by the next :meth:`wake`."""

    __slots__ = ("_callbacks",)

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], None]] = []

    def __bool__(self) -> bool:
        return bool(self._callbacks)

    def add_waiter(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    def wake(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


class Partition:
    """A partition hosted by this broker, as its leader or as a follower (Kafka's ``Partition``).

    As leader, the append policy lives here, as in Kafka's ``appendRecordsToLeader``:
    ``min.insync.replicas`` for acks=all, validation by the topic's policy
    (:func:`~odradek.storage.validator.validate_for_leader`), idempotent producers' sequences, then
    the log; the followers' fetches feed an
    :class:`~odradek.cluster.replication.isr.IsrTracker`, which moves the high watermark (the
    smallest log end offset in the ISR) and proposes ISR changes. With one replica the ISR is this
    broker alone and the high watermark follows every append. As follower, batches copied from the
    leader are appended with their offsets and epochs, and the high watermark is the leader's, as
    far as this log reaches.

    The role comes from the partition's state (leader, leader epoch, ISR) as the controller or
    the local store wrote it: :meth:`make_leader` and :meth:`make_follower`. Requests parked in the
    purgatory (Fetch long-polls, acks=all produces) register a callback that the next append, high
    watermark move or role change calls once. Called on the broker's event loop only.
    """

    def __init__(
        self,
        topic: str,
        index: int,
        log: PartitionLog,
        *,
        local_id: int,
        clock: Clock,
        replica_lag_time_max_ms: int = 30_000,
        min_insync_replicas: int = 1,
        eligible_leader_replicas: bool = False,
    ) -> None:
        self.topic = topic
        # KIP-966: the high watermark waits for min.insync.replicas (see IsrTracker).
        self.eligible_leader_replicas = eligible_leader_replicas
        self.index = index
        self.log = log
        self.local_id = local_id
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._min_insync_replicas = min_insync_replicas
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.replicas: tuple[int, ...] = ()
        # The ISR as last written, for Metadata; the leader's tracker has the live one.
        self.isr: tuple[int, ...] = ()
        self._tracker: IsrTracker | None = None
        # Parked requests: any change wakes the fetches (and other watchers of the log), only
        # a high watermark move or a change of role, ISR or log dir the acks=all appends
        # (``replication``), after the fetches, as Kafka completes its delayed fetches first.
        self._waiters = Waiters()
        self.replication = Waiters()
        self._info: PartitionInfo | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    def info(self) -> PartitionInfo:
        """Leader, epoch, replicas and ISR as Metadata tells them: the same object for as long
        as they stay the same (Metadata asks it of every partition of every topic it names,
        many times a second while clients start on many partitions)."""
        info = self._info
        if (
            info is None
            or info.leader != self.leader_id
            or info.leader_epoch != self.leader_epoch
            or info.replicas is not self.replicas
            or info.isr is not self.isr
        ):
            info = self._info = PartitionInfo(
                self.leader_id, self.leader_epoch, self.replicas, self.isr
            )
        return info

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed consumers stop (see :attr:`PartitionLog.last_stable_offset`)."""
        return self.log.last_stable_offset

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer, in this epoch, has a transaction open in this partition."""
        return self.log.producers.has_ongoing_transaction(producer_id, producer_epoch)

    def read_bound(self, isolation: FetchIsolation) -> int:
        """Where a fetcher reading with ``isolation`` stops: the log end (a follower), the high
        watermark, or the last stable offset (a read_committed consumer)."""
        if isolation == FetchIsolation.HIGH_WATERMARK:
            return self.log.high_watermark
        if isolation == FetchIsolation.TXN_COMMITTED:
            return self.log.last_stable_offset
        return self.log.log_end_offset

    def aborted_transactions(self, fetch_offset: int) -> list[tuple[int, int]]:
        """The (producer id, first offset) of the aborted transactions a read_committed consumer
        reading from ``fetch_offset`` must skip. Bounded by the last stable offset rather than by
        where its read ends: entries past what the consumer reads are never matched against a
        batch, as Kafka's clients use them."""
        return self.log.aborted_transactions(fetch_offset, self.log.last_stable_offset)

    def preferred_read_replica(self, in_rack: Collection[int]) -> int:
        """The replica a consumer among the live brokers ``in_rack`` should read from (KIP-392):
        an in-sync one there other than this leader, or -1 (read here); this leader wins when
        it is in the rack, as Kafka's RackAwareReplicaSelector."""
        candidates = set(in_rack) & set(self.isr)
        if not candidates or self.local_id in candidates:
            return -1
        return min(candidates)

    @property
    def is_leader(self) -> bool:
        return self._tracker is not None

    @property
    def min_insync_replicas(self) -> int:
        return self._min_insync_replicas

    @min_insync_replicas.setter
    def min_insync_replicas(self, value: int) -> None:
        self._min_insync_replicas = value
        if self._tracker is not None:
            self._tracker.min_insync_replicas = value

    # -- roles ---------------------------------------------------------------------------------

    def make_leader(
        self, leader_epoch: int, replicas: Iterable[int], isr: Iterable[int], zk_version: int
    ) -> bool:
        """Lead in ``leader_epoch`` (Kafka's makeLeader): the epoch starts at the log end, the
        followers' positions are unknown until they fetch. Returns False (and changes nothing)
        for a state older than the one held."""
        if leader_epoch < self.leader_epoch:
            return False
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        log = self.log
        if self._tracker is not None and leader_epoch == self.leader_epoch:
            if self._tracker.replicas_changed(self.replicas):
                log.update_high_watermark(self._tracker.high_watermark)
            self._isr_changed(self.isr, leader_epoch, zk_version)
            return True
        log.assign_epoch_start_offset(leader_epoch, log.log_end_offset)
        if self._tracker is None:
            self._tracker = IsrTracker(
                self.clock,
                leader_id=self.local_id,
                replicas=self.replicas,
                isr=self.isr,
                leader_epoch=leader_epoch,
                zk_version=zk_version,
                leader_epoch_start_offset=log.log_end_offset,
                log_end_offset=log.log_end_offset,
                high_watermark=log.high_watermark,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                min_insync_replicas=self._min_insync_replicas,
            )
            self._tracker.eligible_leader_replicas = self.eligible_leader_replicas
        else:
            self._tracker.reelected(
                replicas=self.replicas,
                isr=self.isr,
                leader_epoch=leader_epoch,
                zk_version=zk_version,
                leader_epoch_start_offset=log.log_end_offset,
                log_end_offset=log.log_end_offset,
            )
        self.leader_id = self.local_id
        self.leader_epoch = leader_epoch
        log.update_high_watermark(self._tracker.high_watermark)
        self._wake()
        return True

    def make_follower(
        self, leader_id: int, leader_epoch: int, replicas: Iterable[int], isr: Iterable[int]
    ) -> bool:
        """Follow ``leader_id`` (or wait for a leader, ``NO_LEADER``) in ``leader_epoch``.
        Returns whether the leader or epoch changed, i.e. whether the fetcher must find where
        this log diverges from the new leader's before fetching again."""
        if leader_epoch < self.leader_epoch:
            return False
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        changed = leader_epoch != self.leader_epoch or leader_id != self.leader_id
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        if self._tracker is not None:
            self._tracker = None
        self._wake()  # parked produces answer NOT_LEADER_OR_FOLLOWER, parked fetches return
        return changed

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """A client's idea of the epoch against ours (KIP-320): older → FENCED_LEADER_EPOCH,
        newer → UNKNOWN_LEADER_EPOCH (this broker has not heard of it yet), -1 → no check."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.none
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def _leader_tracker(self) -> IsrTracker:
        if self._tracker is None:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"broker {self.local_id} is not the leader of {self.name} "
                f"(leader {self.leader_id}, epoch {self.leader_epoch})",
            )
        return self._tracker

    def _acks_all_tracker(self) -> IsrTracker:
        """The leader's tracker, once an acks=all append may go ahead."""
        tracker = self._leader_tracker()
        error = tracker.append_error(-1)
        if error is not None:
            raise KafkaError(
                error,
                f"{len(tracker.isr)} in-sync replica(s) of {self.name} is below "
                f"min.insync.replicas={tracker.min_insync_replicas}",
            )
        return tracker

    # -- leader --------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | memoryview | None,
        required_acks: int,
        now_ms: int,
        schema_ids: SchemaIds | None = None,
        checked: RecordsChecked | None = None,
    ) -> AppendInfo:
        """Validate and append a producer's record set; raises :class:`KafkaError` (or its
        subclass :class:`~odradek.protocol.errors.RecordsRejected`) when it is refused, and
        :class:`~odradek.storage.validator.InflatesPastInline` for records to be checked in steps
        first (see :meth:`checking_records`). ``schema_ids``: the ids the schema registry
        holds, for a topic that validates them; ``checked``: what :meth:`checking_records` learnt
        of these records."""
        tracker = self._acks_all_tracker() if required_acks == -1 else self._leader_tracker()
        valid = validate_for_leader(
            records, self.log.config, now_ms, self.name, schema_ids, self.topic, checked
        )
        return self._append(tracker, valid.buffer, valid.headers, valid.log_append_time)

    def checking_records(
        self, records: bytes | memoryview | None, *, inflating: bool = False
    ) -> Generator[Step, bytes | RecordsRejected | None, RecordsChecked | None] | None:
        """For a big record set to this leader (many records, or a big compressed batch, or
        ``inflating``: one :meth:`append_as_leader` refused with
        :class:`~odradek.storage.validator.InflatesPastInline`), the costly part of its
        validation in steps, to be made before :meth:`append_as_leader` (see
        :func:`~odradek.storage.validator.checking_in_steps`); None for any other."""
        if records is None or self._tracker is None or not (inflating or stepped(records)):
            return None
        return checking_in_steps(records, self.log.config, self.name)

    def write_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        now_ms: int,
        transaction_version: int = 0,
    ) -> AppendInfo:
        """Append a COMMIT or ABORT marker for the producer's transaction as leader (the
        coordinator's WriteTxnMarkers).  Raises NOT_LEADER_OR_FOLLOWER on a follower,
        INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED for a stale marker.  A marker
        for a producer with no transaction here is appended all the same, as Kafka does."""
        tracker = self._leader_tracker()
        batch = bytearray(
            encode_end_txn_marker(
                producer_id, producer_epoch, coordinator_epoch, commit=commit, now_ms=now_ms
            )
        )
        marker = _Marker(coordinator_epoch, transaction_version)
        return self._append(tracker, batch, list(iter_headers(batch)), None, marker=marker)

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None, min_one_batch: bool
    ) -> RecordSlice | None:
        """Record batches from ``offset`` on (see :meth:`PartitionLog.read`); OFFSET_OUT_OF_RANGE
        (a :class:`KafkaError`) for an offset outside the log."""
        try:
            return self.log.read(
                offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch
            )
        except OffsetOutOfRange as e:
            raise KafkaError(ErrorCode.offset_out_of_range, str(e)) from e

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader: move the log start to ``offset`` (-1: the high
        watermark), which may not pass the high watermark; the new log start offset.
        OFFSET_OUT_OF_RANGE (a :class:`KafkaError`) otherwise, as Kafka's
        ``Partition.deleteRecordsOnLeader``."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"{self.name}: {offset} is not between 0 and the high watermark "
                f"{self.high_watermark}",
            )
        try:
            return self.log.delete_records_before(offset)
        except OffsetOutOfRange as e:
            raise KafkaError(ErrorCode.offset_out_of_range, str(e)) from e

    def replicated(self, required_offset: int) -> ErrorCode | None:
        """An acks=all produce's answer once the high watermark reached ``required_offset`` (the
        offset after its last record), None while it has not. As Kafka's
        ``checkEnoughReplicasReachOffset``: NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank
        below ``min.insync.replicas`` meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved,
        KAFKA_STORAGE_ERROR if the log's dir went offline (KIP-112)."""
        if self.log.offline:
            return ErrorCode.kafka_storage_error
        if self._tracker is None:
            return ErrorCode.not_leader_or_follower
        outcome = self._tracker.acks_all_outcome(required_offset - 1)
        return outcome.error if outcome.done else None

    def append(
        self,
        records: bytearray | memoryview,
        headers: list[BatchHeader],
        log_append_time: int | None,
    ) -> AppendInfo:
        """Append batches a coordinator wrote (already validated) as leader. Raises
        NOT_LEADER_OR_FOLLOWER on a follower.

        A coordinator's transactional batch (a TxnOffsetCommit) carries base sequence 0 every
        time, as Kafka's coordinator writes it: like Kafka's ``AppendOrigin.COORDINATOR`` its
        sequence is not checked (nor taken for a retry). Kafka still checks its epoch.

        Checked as an acks=all produce is (NOT_ENOUGH_REPLICAS while the ISR is below
        ``min.insync.replicas``): a coordinator answers once its records are committed, and
        refusing them up front leaves nothing in the log it would have to take back.
        """
        return self._append(
            self._acks_all_tracker(), records, headers, log_append_time, from_coordinator=True
        )

    def _append(
        self,
        tracker: IsrTracker,
        records: bytearray | memoryview,
        headers: list[BatchHeader],
        log_append_time: int | None,
        *,
        from_coordinator: bool = False,
        marker: _Marker | None = None,
    ) -> AppendInfo:
        earlier = self._check_producers(headers, from_coordinator, marker)
        if earlier is not None:
            return earlier
        # The log applies each producer's batch to the producer state as it writes it: the
        # check above and that update are the whole of a leader's producer bookkeeping.
        info = self.log.append(
            records, headers, log_append_time=log_append_time, leader_epoch=self.leader_epoch
        )
        moved = tracker.leader_appended(self.log.log_end_offset)
        if moved:
            self.log.update_high_watermark(tracker.high_watermark)
        self._wake(replication=moved)
        return info

    def _check_producers(
        self, headers: list[BatchHeader], from_coordinator: bool, marker: _Marker | None
    ) -> AppendInfo | None:
        """The producer state's verdict on a leader's append, before the log takes it: a
        transaction marker checked against its producer's epochs (Kafka's
        ``appendEndTxnMarker``), a producer's batches against their sequences and epochs
        (raises :class:`KafkaError`), or, for a retry of batches the log holds already, the
        earlier append's offsets (answered again, nothing appended). A coordinator's batch is
        not checked (Kafka's ``AppendOrigin.COORDINATOR``)."""
        producers = self.log.producers
        if marker is not None:
            header = headers[0]
            producers.check_marker(
                header.producer_id,
                header.producer_epoch,
                marker.coordinator_epoch,
                marker.transaction_version,
            )
        if from_coordinator or all(h.producer_id == NO_PRODUCER_ID for h in headers):
            return None
        earlier: list[AppendedSequence | None] = producers.check_request(headers)
        first, last = earlier[0], earlier[-1]
        if first is None or last is None or any(e is None for e in earlier):
            return None
        return AppendInfo(first.first_offset, last.last_offset, None, self.log.log_start_offset)

    def follower_fetched(self, replica_id: int, fetch_offset: int) -> bool:
        """A follower's fetch from ``fetch_offset`` (its log end offset): the high watermark may
        move. NOT_LEADER_OR_FOLLOWER here, or for a broker that is no replica of the partition.
        Returns whether the follower, an ISR member, fetches from below the high watermark: it
        lost committed records and must leave the ISR now."""
        tracker = self._leader_tracker()
        if replica_id not in self.replicas or replica_id == self.local_id:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"broker {replica_id} is not a follower of {self.name} (replicas {self.replicas})",
            )
        lost = tracker.has_lost_committed(replica_id, fetch_offset)
        if tracker.follower_fetched(replica_id, fetch_offset, self.log.log_end_offset):
            self.log.update_high_watermark(tracker.high_watermark)
            self._wake()
        return lost

    def propose_isr_shrink(self) -> IsrProposal | None:
        """The ISR without the followers lagging past ``replica.lag.time.max.ms``, for the
        caller to write with compare-and-set; None if none lags or a change is in flight."""
        return None if self._tracker is None else self._tracker.propose_shrink()

    def propose_isr_expand(self) -> IsrProposal | None:
        """The ISR with the followers that caught up. Asked only after a follower's fetch, as
        Kafka does: a follower's log end offset known from before (a dead broker's) must not
        bring it back."""
        return None if self._tracker is None else self._tracker.propose_expand()

    def isr_written(self, isr: Iterable[int], leader_epoch: int, zk_version: int) -> None:
        """The partition state now holds ``isr`` (a write of ours or of the controller)."""
        self.isr = tuple(isr)
        if self._tracker is not None:
            self._isr_changed(self.isr, leader_epoch, zk_version)

    def isr_write_failed(self) -> None:
        if self._tracker is not None:
            self._tracker.proposal_failed()

    def _isr_changed(self, isr: tuple[int, ...], leader_epoch: int, zk_version: int) -> None:
        assert self._tracker is not None
        if self._tracker.isr_updated(isr, leader_epoch=leader_epoch, zk_version=zk_version):
            self.log.update_high_watermark(self._tracker.high_watermark)
        self._wake()  # parked acks=all produces re-check min.insync.replicas

    # -- follower ------------------------------------------------------------------------------

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append batches copied from the leader, as they are (offsets and epochs included);
        None when ``records`` holds no whole batch. Only what the copy could have broken is
        checked (:func:`~odradek.protocol.record_batch.copied_batches`): the leader validated
        the batches when it appended them. Raises :class:`KafkaError` for a corrupt batch
        (CORRUPT_MESSAGE) and lets :class:`~odradek.storage.UnexpectedAppendOffset` through."""
        if not records:
            return None
        try:
            headers = copied_batches(records)
        except InvalidBatch as e:
            raise KafkaError(ErrorCode.corrupt_message, f"{self.name}: {e}") from e
        if not headers:
            return None
        last = headers[-1]
        size = last.position + last.size
        if size < len(records):
            records = memoryview(records)[:size]
        info = self.log.append_as_follower(records, headers)
        self._wake()
        return info

    def follow_high_watermark(self, leader_high_watermark: int) -> None:
        """The leader's high watermark, as far as this log reaches (Kafka's follower rule)."""
        before = self.log.high_watermark
        if self.log.update_high_watermark(min(leader_high_watermark, self.log.log_end_offset)) > (
            before
        ):
            self._wake()

    # -- both ----------------------------------------------------------------------------------

    @property
    def has_waiters(self) -> bool:
        """Whether requests are parked on this partition that its next append wakes."""
        return bool(self._waiters)

    def add_waiter(self, callback: Callable[[], None]) -> None:
        self._waiters.add_waiter(callback)

    def remove_waiter(self, callback: Callable[[], None]) -> None:
        self._waiters.remove_waiter(callback)

    def _wake(self, *, replication: bool = True) -> None:
        self._waiters.wake()
        if replication:
            self.replication.wake()

    def wake_all(self) -> None:
        """Release every parked request (the partition is going away)."""
        self._wake()
