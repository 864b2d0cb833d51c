"""The transaction coordinator's state machine (Kafka's ``TransactionCoordinator`` with its
``TransactionStateManager``), without I/O.

Each transactional id has one :class:`TxnMetadata`: its producer id and epoch, the partitions of
the ongoing transaction and its state (Kafka's ``TransactionState``). A request is answered in
Kafka's ``CoordinatorResult`` style: an operation checks the request against the metadata and
returns either an immediate :class:`TxnAnswer`, or a :class:`TxnWrite` — the record to append to
the id's ``__transaction_state`` partition and what to answer once it is replicated. While a
write is in flight the metadata holds it as ``pending`` and other requests for the id get
CONCURRENT_TRANSACTIONS; :meth:`TransactionCoordinator.written` applies the record (or drops it,
when it failed). Ending a transaction is two writes: PrepareCommit/PrepareAbort (the producer's
answer), then — once every partition of the transaction has its marker — CompleteCommit/
CompleteAbort; :class:`MarkerJob` is the work in between, done by the runtime.

State is the replay of the partition's records (:meth:`TransactionCoordinator.replay`), loaded
when the broker leads the partition, with that leadership's epoch as the coordinator epoch
written in every marker. Recovery after a crash is that replay: a transaction found in a Prepare
state gets its markers (again: writing a marker twice is harmless) and its Complete record.

Transaction version 1 (KIP-98 as Kafka 2.x to 3.x runs it): the epoch is bumped by InitProducerId
and when the coordinator aborts a transaction the producer left open (a timeout, or a new
producer with the same transactional id), which fences the old producer. Transaction version 2
(KIP-890 part 2, EndTxn v5): every EndTxn bumps the epoch too — the Prepare record and the
markers carry the new epoch, the producer is told it and starts its next transaction with it, so
a late write of the transaction before is fenced at the partition. When the epochs run out
(32766), the Prepare record names a new producer id (NextProducerId), which the producer is told
and the Complete record moves to, at epoch 0. Version 2 may abort with nothing added (the
producer cannot know whether its first produce added a partition). Called on the broker's
event loop only; the clock is injected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from odradek.clock import Clock
from odradek.coordinator.transaction.records import (
    TxnState,
    TxnValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
    txn_partition_for,
)
from odradek.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_EPOCH = -1
_MAX_EPOCH = 32767

_PREPARED = {
    TxnState.PREPARE_COMMIT: TxnState.COMPLETE_COMMIT,
    TxnState.PREPARE_ABORT: TxnState.COMPLETE_ABORT,
}
_COMPLETE = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.EMPTY)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    partitions: int  # transaction.state.log.num.partitions
    max_timeout_ms: int  # transaction.max.timeout.ms


@dataclass(slots=True)
class TxnMetadata:
    """One transactional id, as the last replicated record of it says (``pending``: a record
    being written now)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    # The epoch before the last bump, so that a producer retrying InitProducerId with the
    # epoch it had (KIP-360) is recognised.
    last_producer_epoch: int = NO_EPOCH
    pending: TxnValue | None = None
    # Transaction version 2: the producer id the Complete record moves to (epochs exhausted).
    next_producer_id: int = NO_PRODUCER_ID

    def value(self) -> TxnValue:
        return TxnValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            self.partitions,
            self.last_update_ms,
            self.start_ms,
            self.next_producer_id,
        )


@dataclass(frozen=True, slots=True)
class TxnAnswer:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Markers to write to every partition of an ending transaction, then the Complete record."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class TxnWrite:
    """A record to append to ``__transaction_state-<partition>``, and the answer to send once it
    is replicated (``answer``; a failed write answers the write's error instead). ``markers``:
    the job that follows a Prepare record."""

    transactional_id: str
    partition: int
    key: bytes
    value: bytes
    next_value: TxnValue
    answer: TxnAnswer
    markers: MarkerJob | None = None


TxnOutcome = TxnAnswer | TxnWrite


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: TxnState
    duration_ms: int


@dataclass(slots=True)
class _Partition:
    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


def _fenced_or_unknown(
    metadata: TxnMetadata | None, producer_id: int, producer_epoch: int
) -> ErrorCode | None:
    """Kafka's checks of a producer against its transactional id's metadata."""
    if metadata is None or metadata.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if metadata.producer_epoch != producer_epoch:
        return ErrorCode.producer_fenced
    if metadata.pending is not None:
        return ErrorCode.concurrent_transactions
    return None


def _epoch_before(previous: TxnMetadata | None, v: TxnValue) -> int:
    """The epoch before the last bump once ``v`` follows ``previous`` (written or replayed):
    records of one epoch follow each other (ongoing, prepared, complete) and keep it; a bump
    makes it the epoch bumped; a new producer id has none."""
    if previous is None or previous.producer_id != v.producer_id:
        return NO_EPOCH
    if previous.producer_epoch == v.producer_epoch:
        return previous.last_producer_epoch
    return previous.producer_epoch


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads."""

    def __init__(
        self, config: TxnConfig, clock: Clock, next_producer_id: Callable[[], int]
    ) -> None:
        self.config = config
        self.clock = clock
        self._next_producer_id = next_producer_id
        self._owned: dict[int, _Partition] = {}
        self._loading: dict[int, _Partition] = {}

    # -- ownership -----------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return txn_partition_for(transactional_id, self.config.partitions)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self._owned.pop(partition, None)
        self._loading[partition] = _Partition(coordinator_epoch)

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        """One record of a partition being loaded (a record that does not parse is skipped by
        the caller's handling of :class:`~odradek.coordinator.group.records.RecordFormatError`)."""
        target = self._loading.get(partition)
        if target is None or key is None:
            return
        transactional_id = decode_txn_key(key)
        if value is None:
            target.txns.pop(transactional_id, None)
            return
        v = decode_txn_value(value)
        previous = target.txns.get(transactional_id)
        target.txns[transactional_id] = TxnMetadata(
            transactional_id,
            v.producer_id,
            v.producer_epoch,
            v.timeout_ms,
            v.state,
            v.partitions,
            v.start_ms,
            v.last_update_ms,
            last_producer_epoch=_epoch_before(previous, v),
            next_producer_id=v.next_producer_id,
        )

    def finish_loading(self, partition: int) -> list[MarkerJob]:
        """The partition is served from now on; the marker jobs of the transactions it found
        half-ended (Prepare states), to be done again."""
        loaded = self._loading.pop(partition, None)
        if loaded is None:
            return []
        self._owned[partition] = loaded
        return [
            self._marker_job(m, loaded.coordinator_epoch)
            for m in loaded.txns.values()
            if m.state in _PREPARED
        ]

    def unload(self, partition: int) -> None:
        self._owned.pop(partition, None)
        self._loading.pop(partition, None)

    @property
    def owned(self) -> set[int]:
        return set(self._owned)

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def coordinator_epoch(self, partition: int) -> int | None:
        owned = self._owned.get(partition)
        return None if owned is None else owned.coordinator_epoch

    def _status(self, transactional_id: str) -> tuple[ErrorCode, _Partition | None]:
        index = self.partition_for(transactional_id)
        if index in self._loading:
            return ErrorCode.coordinator_load_in_progress, None
        owned = self._owned.get(index)
        if owned is None:
            return ErrorCode.not_coordinator, None
        return ErrorCode.none, owned

    def status(self, transactional_id: str) -> ErrorCode:
        """NONE when ``transactional_id`` is served here, else why not."""
        return self._status(transactional_id)[0]

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        _, owned = self._status(transactional_id)
        return None if owned is None else owned.txns.get(transactional_id)

    # -- writes --------------------------------------------------------------------------------

    def _write(
        self,
        metadata: TxnMetadata,
        next_value: TxnValue,
        answer: TxnAnswer,
        markers: bool = False,
    ) -> TxnWrite:
        index = self.partition_for(metadata.transactional_id)
        metadata.pending = next_value
        job = None
        if markers:
            epoch = self._owned[index].coordinator_epoch
            job = MarkerJob(
                metadata.transactional_id,
                next_value.producer_id,
                next_value.producer_epoch,
                next_value.state == TxnState.PREPARE_COMMIT,
                epoch,
                next_value.partitions,
            )
        return TxnWrite(
            metadata.transactional_id,
            index,
            encode_txn_key(metadata.transactional_id),
            encode_txn_value(next_value),
            next_value,
            answer,
            job,
        )

    def written(self, write: TxnWrite, ok: bool) -> None:
        """The runtime's report on ``write``: replicated (``ok``), or failed and forgotten."""
        owned = self._owned.get(write.partition)
        metadata = None if owned is None else owned.txns.get(write.transactional_id)
        if metadata is None or metadata.pending != write.next_value:
            return  # unloaded meanwhile: the next leader replays the log instead
        metadata.pending = None
        if not ok:
            return
        v = write.next_value
        metadata.last_producer_epoch = _epoch_before(metadata, v)
        metadata.producer_id = v.producer_id
        metadata.producer_epoch = v.producer_epoch
        metadata.timeout_ms = v.timeout_ms
        metadata.state = v.state
        metadata.partitions = v.partitions
        metadata.start_ms = v.start_ms
        metadata.last_update_ms = v.last_update_ms
        metadata.next_producer_id = v.next_producer_id

    # -- InitProducerId ------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_EPOCH,
    ) -> TxnOutcome:
        status, owned = self._status(transactional_id)
        if owned is None:
            return TxnAnswer(status)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return TxnAnswer(ErrorCode.invalid_transaction_timeout)
        now = self.clock.time_ms()
        metadata = owned.txns.get(transactional_id)
        if metadata is None:
            new_id = self._next_producer_id()
            metadata = TxnMetadata(
                transactional_id,
                new_id,
                NO_EPOCH,
                timeout_ms,
                TxnState.EMPTY,
                frozenset(),
                -1,
                now,
            )
            owned.txns[transactional_id] = metadata
            value = TxnValue(new_id, 0, timeout_ms, TxnState.EMPTY, frozenset(), now, -1)
            return self._write(metadata, value, TxnAnswer(ErrorCode.none, new_id, 0))
        if metadata.pending is not None or metadata.state in _PREPARED:
            return TxnAnswer(ErrorCode.concurrent_transactions)
        if producer_id != NO_PRODUCER_ID:
            # KIP-360: a producer that knows its id and epoch may only bump its own.
            if producer_id != metadata.producer_id:
                return TxnAnswer(ErrorCode.producer_fenced)
            # Kafka's order: the current epoch is bumped; only another one can be the epoch
            # before a bump already made, whose answer was lost (a retry of it).
            if producer_epoch != metadata.producer_epoch:
                if producer_epoch == metadata.last_producer_epoch and metadata.state in _COMPLETE:
                    return TxnAnswer(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)
                return TxnAnswer(ErrorCode.producer_fenced)
        if metadata.state == TxnState.ONGOING:
            # A new producer of this transactional id: abort what the old one left open, with
            # a bumped epoch that fences it; this producer retries meanwhile.
            write = self._abort_with_bump(metadata, now)
            return dataclasses.replace(write, answer=TxnAnswer(ErrorCode.concurrent_transactions))
        new_id, new_epoch = self._bumped(metadata)
        value = TxnValue(new_id, new_epoch, timeout_ms, TxnState.EMPTY, frozenset(), now, -1)
        return self._write(metadata, value, TxnAnswer(ErrorCode.none, new_id, new_epoch))

    def _bumped(self, metadata: TxnMetadata) -> tuple[int, int]:
        if metadata.producer_epoch + 1 >= _MAX_EPOCH:
            return self._next_producer_id(), 0  # epochs exhausted: a new id
        return metadata.producer_id, metadata.producer_epoch + 1

    def _abort_with_bump(self, metadata: TxnMetadata, now: int) -> TxnWrite:
        new_id, new_epoch = self._bumped(metadata)
        if new_id != metadata.producer_id:
            new_id, new_epoch = metadata.producer_id, metadata.producer_epoch
        value = TxnValue(
            new_id,
            new_epoch,
            metadata.timeout_ms,
            TxnState.PREPARE_ABORT,
            metadata.partitions,
            now,
            metadata.start_ms,
        )
        return self._write(metadata, value, TxnAnswer(ErrorCode.none), markers=True)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> TxnOutcome:
        status, owned = self._status(transactional_id)
        if owned is None:
            return TxnAnswer(status)
        metadata = owned.txns.get(transactional_id)
        error = _fenced_or_unknown(metadata, producer_id, producer_epoch)
        if error is not None:
            return TxnAnswer(error)
        assert metadata is not None
        if metadata.state in _PREPARED:
            return TxnAnswer(ErrorCode.concurrent_transactions)
        if metadata.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
            return TxnAnswer(ErrorCode.invalid_txn_state)
        wanted = frozenset(partitions)
        if metadata.state == TxnState.ONGOING and wanted <= metadata.partitions:
            return TxnAnswer(ErrorCode.none)
        now = self.clock.time_ms()
        ongoing = metadata.state == TxnState.ONGOING
        value = TxnValue(
            metadata.producer_id,
            metadata.producer_epoch,
            metadata.timeout_ms,
            TxnState.ONGOING,
            (metadata.partitions if ongoing else frozenset()) | wanted,
            now,
            metadata.start_ms if ongoing else now,
        )
        return self._write(metadata, value, TxnAnswer(ErrorCode.none))

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890's check that a transactional produce (or offset commit) goes to partitions of
        the producer's ongoing transaction: each partition NONE, or the reason it does not."""
        wanted = list(partitions)
        status, owned = self._status(transactional_id)
        if owned is None:
            return dict.fromkeys(wanted, status)
        metadata = owned.txns.get(transactional_id)
        error = _fenced_or_unknown(metadata, producer_id, producer_epoch)
        if error == ErrorCode.concurrent_transactions:
            error = None  # a write in flight does not change which partitions were added
        if error is not None:
            return dict.fromkeys(wanted, error)
        assert metadata is not None
        return {
            tp: (
                ErrorCode.none
                if metadata.state == TxnState.ONGOING and tp in metadata.partitions
                else ErrorCode.invalid_txn_state
            )
            for tp in wanted
        }

    # -- EndTxn --------------------------------------------------------------------------------

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        bump_epoch: bool = False,
    ) -> TxnOutcome:
        """Commit or abort; ``bump_epoch``: transaction version 2 (EndTxn v5), whose answer
        carries the producer id and epoch of the producer's next transaction."""
        status, owned = self._status(transactional_id)
        if owned is None:
            return TxnAnswer(status)
        metadata = owned.txns.get(transactional_id)
        if bump_epoch:
            return self._end_txn_v2(metadata, producer_id, producer_epoch, commit)
        error = _fenced_or_unknown(metadata, producer_id, producer_epoch)
        if error is not None:
            return TxnAnswer(error)
        assert metadata is not None
        state = metadata.state
        if state == TxnState.ONGOING:
            value = TxnValue(
                metadata.producer_id,
                metadata.producer_epoch,
                metadata.timeout_ms,
                TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                metadata.partitions,
                self.clock.time_ms(),
                metadata.start_ms,
            )
            return self._write(metadata, value, TxnAnswer(ErrorCode.none), markers=True)
        if state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return TxnAnswer(ErrorCode.none)  # a retry of the end already done
        if state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            return TxnAnswer(ErrorCode.concurrent_transactions)
        return TxnAnswer(ErrorCode.invalid_txn_state)

    def _end_txn_v2(
        self, metadata: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool
    ) -> TxnOutcome:
        if metadata is None or metadata.producer_id != producer_id:
            return TxnAnswer(ErrorCode.invalid_producer_id_mapping)
        if metadata.pending is not None:
            return TxnAnswer(ErrorCode.concurrent_transactions)
        state = metadata.state
        prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        completed = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if producer_epoch != metadata.producer_epoch:
            # The epoch before the bump this very end made: a retry of it.
            if producer_epoch != metadata.last_producer_epoch:
                return TxnAnswer(ErrorCode.producer_fenced)
            if state == completed:
                return TxnAnswer(ErrorCode.none, metadata.producer_id, metadata.producer_epoch)
            if state == prepared:
                return TxnAnswer(ErrorCode.concurrent_transactions)
            if state == TxnState.ONGOING:
                return TxnAnswer(ErrorCode.producer_fenced)
            return TxnAnswer(ErrorCode.invalid_txn_state)
        now = self.clock.time_ms()
        if state == TxnState.ONGOING:
            partitions, start_ms = metadata.partitions, metadata.start_ms
        elif not commit and state in _COMPLETE:
            partitions, start_ms = frozenset(), now  # an abort of nothing added
        elif state in _PREPARED:
            return TxnAnswer(ErrorCode.concurrent_transactions)
        else:
            return TxnAnswer(ErrorCode.invalid_txn_state)
        epoch = min(metadata.producer_epoch + 1, _MAX_EPOCH)
        next_id = NO_PRODUCER_ID
        answer = TxnAnswer(ErrorCode.none, metadata.producer_id, epoch)
        if metadata.producer_epoch >= _MAX_EPOCH - 1:
            # Epochs exhausted (as Kafka counts them): the markers take the last one, and the
            # producer's next transaction has a new id.
            next_id = self._next_producer_id()
            answer = TxnAnswer(ErrorCode.none, next_id, 0)
        value = TxnValue(
            metadata.producer_id,
            epoch,
            metadata.timeout_ms,
            prepared,
            partitions,
            now,
            start_ms,
            next_id,
        )
        return self._write(metadata, value, answer, markers=True)

    def markers_done(self, job: MarkerJob) -> TxnWrite | None:
        """Every partition has ``job``'s marker: the Complete record to write (None when the
        transaction moved on or the partition is no longer led here)."""
        index = self.partition_for(job.transactional_id)
        owned = self._owned.get(index)
        metadata = None if owned is None else owned.txns.get(job.transactional_id)
        if (
            owned is None
            or metadata is None
            or metadata.pending is not None
            or metadata.state not in _PREPARED
            or metadata.producer_epoch != job.producer_epoch
            or owned.coordinator_epoch != job.coordinator_epoch
        ):
            return None
        moving = metadata.next_producer_id != NO_PRODUCER_ID
        value = TxnValue(
            metadata.next_producer_id if moving else metadata.producer_id,
            0 if moving else metadata.producer_epoch,
            metadata.timeout_ms,
            _PREPARED[metadata.state],
            frozenset(),
            self.clock.time_ms(),
            metadata.start_ms,
        )
        return self._write(metadata, value, TxnAnswer(ErrorCode.none))

    # -- timeouts ------------------------------------------------------------------------------

    def expired(self) -> list[TxnWrite]:
        """Abort (with a bumped epoch, fencing the producer) every ongoing transaction older than
        its timeout, as Kafka's ``abortTimedOutTransactions``."""
        now = self.clock.time_ms()
        writes = []
        for metadata in self._all():
            if (
                metadata.state == TxnState.ONGOING
                and metadata.pending is None
                and metadata.start_ms + metadata.timeout_ms <= now
            ):
                writes.append(self._abort_with_bump(metadata, now))
        return writes

    def next_expiry_ms(self) -> int | None:
        ends = [m.start_ms + m.timeout_ms for m in self._all() if m.state == TxnState.ONGOING]
        return min(ends) if ends else None

    def _all(self) -> Iterator[TxnMetadata]:
        for owned in self._owned.values():
            yield from owned.txns.values()

    def _marker_job(self, metadata: TxnMetadata, coordinator_epoch: int) -> MarkerJob:
        return MarkerJob(
            metadata.transactional_id,
            metadata.producer_id,
            metadata.producer_epoch,
            metadata.state == TxnState.PREPARE_COMMIT,
            coordinator_epoch,
            metadata.partitions,
        )

    # -- describe / list -----------------------------------------------------------------------

    def listing(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> list[TxnListing]:
        wanted_states = set(states)
        wanted_ids = set(producer_ids)
        now = self.clock.time_ms()
        out = []
        for m in self._all():
            if wanted_states and m.state.kafka_name not in wanted_states:
                continue
            if wanted_ids and m.producer_id not in wanted_ids:
                continue
            duration = now - m.start_ms if m.state == TxnState.ONGOING else 0
            if min_duration_ms >= 0 and (m.state != TxnState.ONGOING or duration < min_duration_ms):
                continue
            out.append(TxnListing(m.transactional_id, m.producer_id, m.state, duration))
        return out
