"""Producer state of one partition: idempotent producers' sequences and transactions.

Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` (KIP-98).  Per producer id: its epoch,
its last few batches (a producer numbers its batches; the leader appends a batch only if its
first sequence follows the last one, answers a retry of one of the last five with the original
offsets, refuses a gap with OUT_OF_ORDER_SEQUENCE_NUMBER and an old epoch with
INVALID_PRODUCER_EPOCH), the epoch of the transaction coordinator that last wrote a marker for
it, and the first offset of its ongoing transaction in this partition.  A transactional batch
starts a transaction when none is ongoing; a control batch (COMMIT or ABORT marker) ends it.
The first offset of the oldest transaction not yet decided, or decided but whose marker is not
yet replicated, is the partition's first unstable offset, which bounds the last stable offset.

Snapshot format (Kafka's ``<20-digit offset>.snapshot``, the state after every batch below that
offset), big-endian::

    version int16 (1), crc uint32 (CRC-32C of everything after it), count int32, then per
    producer: producer_id int64, epoch int16, last_sequence int32, last_offset int64,
    offset_delta int32, timestamp int64, coordinator_epoch int32, current_txn_first_offset int64

``last_sequence``/``last_offset``/``offset_delta`` describe the producer's last batch (-1, -1, 0
if none); ``current_txn_first_offset`` is -1 without an ongoing transaction.

Crash: a snapshot is written to a temporary name and renamed; one written on a roll is not
fsynced (the log's flush covers the data it describes later), so a crash of the machine may
leave it empty or torn: its CRC then fails, it is deleted, and an older one is used.  The log
replays the batch headers after the snapshot it loads.

Caller: the partition's :class:`~odradek.storage.log.PartitionLog`, on the event-loop thread.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from odradek.protocol.control import EndTxnMarker
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader
from odradek.storage.fileio import read_file, write_file_atomically
from odradek.storage.formats import SNAPSHOT_SUFFIX, segment_file_name

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_OFFSET = -1
CACHED_BATCHES = 5  # max.in.flight.requests.per.connection that idempotence allows
_INT32_MAX = 2**31 - 1

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


@dataclass(frozen=True, slots=True)
class AppendedSequence:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[AppendedSequence] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int = NO_OFFSET


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: its first offset here and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class ProducerView:
    """One producer as DescribeProducers shows it."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_first_offset: int


def _last_sequence(header: BatchHeader) -> int:
    last = header.base_sequence + header.last_offset_delta
    return last - _INT32_MAX - 1 if last > _INT32_MAX else last  # sequences wrap at int32


def _next_sequence(sequence: int) -> int:
    return 0 if sequence == _INT32_MAX else sequence + 1


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / segment_file_name(offset, SNAPSHOT_SUFFIX)


def snapshot_offsets(directory: Path, names: Iterable[str] | None = None) -> list[int]:
    """Offsets of the snapshot files in ``directory`` (among ``names``, its listing, if the
    caller has it), ascending."""
    offsets = []
    for name in os.listdir(directory) if names is None else names:
        stem = name[: -len(SNAPSHOT_SUFFIX)]
        if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


class InvalidSnapshot(ValueError):
    pass


class ProducerStateManager:
    """The producers of one partition and its ongoing transactions (see the module doc)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._producers: dict[int, ProducerEntry] = {}
        # first offset → producer id, in offset order (appends come in offset order)
        self._ongoing: dict[int, int] = {}
        # marker offset → the transaction it ended, until the high watermark passes the marker
        self._unreplicated: dict[int, CompletedTxn] = {}

    @property
    def is_empty(self) -> bool:
        """No producer known, so no transaction ongoing."""
        return not self._producers and not self._ongoing

    def reset(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    # -- a leader's checks ---------------------------------------------------------------------

    def check(self, header: BatchHeader) -> AppendedSequence | None:
        """Whether a produced batch may be appended: None if so, the earlier append if it is a
        retry of one; raises :class:`KafkaError` for a fenced epoch, a sequence gap, or a
        non-transactional batch from a producer in a transaction (INVALID_TXN_STATE)."""
        if header.producer_id == NO_PRODUCER_ID:
            return None
        producer = self._producers.get(header.producer_id)
        if producer is None:
            return None  # unknown (new, or expired from the table): any sequence starts it
        if not header.is_transactional and producer.txn_first_offset != NO_OFFSET:
            raise KafkaError(
                ErrorCode.invalid_txn_state,
                f"producer {header.producer_id} sent a non-transactional batch during its "
                f"transaction from offset {producer.txn_first_offset}",
            )
        if header.base_sequence == NO_SEQUENCE:
            return None
        if header.producer_epoch < producer.epoch:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"producer {header.producer_id} epoch {header.producer_epoch} is older than "
                f"{producer.epoch}",
            )
        if header.producer_epoch > producer.epoch:
            if header.base_sequence != 0:
                raise KafkaError(
                    ErrorCode.out_of_order_sequence_number,
                    f"a new epoch of producer {header.producer_id} must start at sequence 0",
                )
            return None
        last_sequence = _last_sequence(header)
        for earlier in producer.batches:
            if (earlier.first_sequence, earlier.last_sequence) == (
                header.base_sequence,
                last_sequence,
            ):
                return earlier
        # A known epoch without batches (a marker started or bumped it: KIP-890's markers carry
        # the producer's next epoch) starts at 0, as Kafka's NO_SEQUENCE + 1: a later batch of
        # that epoch taken first would leave its earlier batches out of order for good.
        expected = _next_sequence(producer.batches[-1].last_sequence) if producer.batches else 0
        if header.base_sequence != expected:
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {header.producer_id} sent sequence {header.base_sequence}, "
                f"expected {expected}",
            )
        return None

    def check_request(self, headers: list[BatchHeader]) -> list[AppendedSequence | None]:
        """:meth:`check` of a request's batches in order, as Kafka's per-request
        ``ProducerAppendInfo`` does: a producer's later batch in the same request follows its
        earlier one (which the table does not hold yet) rather than the table's last."""
        results: list[AppendedSequence | None] = []
        in_request: dict[int, tuple[int, int]] = {}  # producer id → (epoch, last sequence)
        for header in headers:
            earlier = in_request.get(header.producer_id)
            if (
                earlier is not None
                and header.base_sequence != NO_SEQUENCE
                and header.producer_epoch == earlier[0]
            ):
                expected = _next_sequence(earlier[1])
                if header.base_sequence != expected:
                    raise KafkaError(
                        ErrorCode.out_of_order_sequence_number,
                        f"producer {header.producer_id} sent sequence {header.base_sequence} "
                        f"after {earlier[1]} in one request, expected {expected}",
                    )
                results.append(None)
            else:
                results.append(self.check(header))
            if header.producer_id != NO_PRODUCER_ID and header.base_sequence != NO_SEQUENCE:
                in_request[header.producer_id] = (header.producer_epoch, _last_sequence(header))
        return results

    def check_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        transaction_version: int = 0,
    ) -> None:
        """A leader's checks of a transaction marker (Kafka's ``appendEndTxnMarker``): an epoch
        older than the producer's is INVALID_PRODUCER_EPOCH (Kafka's InvalidProducerEpoch for
        markers; PRODUCER_FENCED is for the producer's own requests), and from transaction
        version 2 on (KIP-890: the coordinator bumps the epoch for every marker) the same
        epoch too, unless it is a retry of a marker already written (no transaction ongoing);
        a coordinator epoch older than the last marker's is TRANSACTION_COORDINATOR_FENCED."""
        producer = self._producers.get(producer_id)
        if producer is None:
            return
        stale = producer_epoch < producer.epoch
        if transaction_version >= 2 and producer_epoch == producer.epoch:
            stale = producer.txn_first_offset != NO_OFFSET
        if stale:
            raise KafkaError(
                ErrorCode.invalid_producer_epoch,
                f"marker for producer {producer_id} has epoch {producer_epoch}, older than "
                f"{producer.epoch}",
            )
        if coordinator_epoch < producer.coordinator_epoch:
            raise KafkaError(
                ErrorCode.transaction_coordinator_fenced,
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {producer.coordinator_epoch}",
            )

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        producer = self._producers.get(producer_id)
        return (
            producer is not None
            and producer.epoch == producer_epoch
            and producer.txn_first_offset != NO_OFFSET
        )

    # -- keeping up with the log ---------------------------------------------------------------

    def update(
        self, header: BatchHeader, first_offset: int, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Apply a batch appended at ``first_offset`` (leader, follower or replay), with the
        marker of a control batch; the transaction a marker ended, if any."""
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return None
        producer = self._producers.get(producer_id)
        if header.is_control:
            if marker is None:
                return None
            if producer is None:
                producer = self._producers[producer_id] = ProducerEntry(header.producer_epoch)
            elif header.producer_epoch != producer.epoch:
                producer.epoch = header.producer_epoch
                producer.batches.clear()
            producer.coordinator_epoch = marker.coordinator_epoch
            producer.last_timestamp = header.max_timestamp
            started = producer.txn_first_offset
            if started == NO_OFFSET:
                return None  # Kafka appends a marker for no transaction, and it ends none
            producer.txn_first_offset = NO_OFFSET
            del self._ongoing[started]
            completed = CompletedTxn(producer_id, started, first_offset, not marker.commit)
            self._unreplicated[first_offset] = completed
            return completed
        if header.base_sequence == NO_SEQUENCE and not header.is_transactional:
            return None
        if producer is None:
            producer = self._producers[producer_id] = ProducerEntry(header.producer_epoch)
        elif header.producer_epoch != producer.epoch:
            producer.epoch = header.producer_epoch
            producer.batches.clear()
        if header.base_sequence != NO_SEQUENCE:
            producer.batches.append(
                AppendedSequence(
                    header.base_sequence,
                    _last_sequence(header),
                    first_offset,
                    first_offset + header.last_offset_delta,
                )
            )
        producer.last_timestamp = header.max_timestamp
        if header.is_transactional and producer.txn_first_offset == NO_OFFSET:
            producer.txn_first_offset = first_offset
            self._ongoing[first_offset] = producer_id
        return None

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction undecided, or decided with its marker not
        yet replicated; None if there is none."""
        first = next(iter(self._ongoing), None)
        for txn in self._unreplicated.values():
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def high_watermark_moved(self, high_watermark: int) -> None:
        """Decided transactions whose marker is below ``high_watermark`` are stable now."""
        if not self._unreplicated:
            return
        for marker_offset in [o for o in self._unreplicated if o < high_watermark]:
            del self._unreplicated[marker_offset]

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """The last stable offset once ``completed`` is decided, as far as transactions go
        (what the ``.txnindex`` entry of an aborted one records)."""
        return next(iter(self._ongoing), completed.last_offset + 1)

    def producers(self) -> list[ProducerView]:
        return [
            ProducerView(
                producer_id,
                p.epoch,
                p.batches[-1].last_sequence if p.batches else NO_SEQUENCE,
                p.last_timestamp,
                p.coordinator_epoch,
                p.txn_first_offset,
            )
            for producer_id, p in self._producers.items()
        ]

    def forget_before(self, log_start_offset: int) -> None:
        """Retention moved the log start: producers whose last batch is gone are forgotten (as
        Kafka's ``truncateHead``), unless in a transaction."""
        doomed = [
            producer_id
            for producer_id, p in self._producers.items()
            if p.txn_first_offset == NO_OFFSET
            and p.batches
            and p.batches[-1].last_offset < log_start_offset
        ]
        for producer_id in doomed:
            del self._producers[producer_id]

    # -- snapshots -----------------------------------------------------------------------------

    def encode_snapshot(self) -> bytes:
        body = bytearray(_COUNT.pack(len(self._producers)))
        for producer_id, p in self._producers.items():
            last = p.batches[-1] if p.batches else None
            body += _ENTRY.pack(
                producer_id,
                p.epoch,
                last.last_sequence if last else NO_SEQUENCE,
                last.last_offset if last else NO_OFFSET,
                last.last_offset - last.first_offset if last else 0,
                p.last_timestamp,
                p.coordinator_epoch,
                p.txn_first_offset,
            )
        return _SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)

    def write_snapshot(self, offset: int, *, sync: bool, sync_directory: bool = True) -> None:
        """Write the state, which must be the state after every batch below ``offset``
        (``sync_directory=False``: the caller fsyncs the directory after)."""
        write_file_atomically(
            snapshot_path(self.directory, offset),
            self.encode_snapshot(),
            sync=sync,
            sync_directory=sync_directory,
        )

    def _read_snapshot(self, data: bytes) -> None:
        if len(data) < _SNAPSHOT_HEAD.size + _COUNT.size:
            raise InvalidSnapshot("too short")
        version, crc = _SNAPSHOT_HEAD.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise InvalidSnapshot(f"version {version}")
        body = memoryview(data)[_SNAPSHOT_HEAD.size :]
        if crc32c.crc32c(body) != crc:
            raise InvalidSnapshot("CRC mismatch")
        (count,) = _COUNT.unpack_from(body)
        if count < 0 or len(body) != _COUNT.size + count * _ENTRY.size:
            raise InvalidSnapshot(f"{count} entries do not fit {len(body)} bytes")
        for i in range(count):
            (pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch, txn_first) = (
                _ENTRY.unpack_from(body, _COUNT.size + i * _ENTRY.size)
            )
            producer = ProducerEntry(epoch, last_timestamp=timestamp)
            producer.coordinator_epoch = coordinator_epoch
            if last_seq != NO_SEQUENCE:
                first_seq = last_seq - delta
                if first_seq < 0:
                    first_seq += _INT32_MAX + 1
                producer.batches.append(
                    AppendedSequence(first_seq, last_seq, last_offset - delta, last_offset)
                )
            if txn_first != NO_OFFSET:
                producer.txn_first_offset = txn_first
                self._ongoing[txn_first] = pid
            self._producers[pid] = producer
        self._ongoing = dict(sorted(self._ongoing.items()))

    def load_latest_snapshot(self, at_most: int, *, offsets: list[int] | None = None) -> int | None:
        """Replace the state by the newest readable snapshot at or below ``at_most``, deleting
        the unreadable ones met on the way; its offset, or None (state empty) if none.
        ``offsets``: the snapshots' (:func:`snapshot_offsets`) if the caller has them."""
        if offsets is None:
            offsets = snapshot_offsets(self.directory)
        for offset in reversed(offsets):
            if offset > at_most:
                continue
            path = snapshot_path(self.directory, offset)
            self.reset()
            try:
                self._read_snapshot(read_file(path))
            except (OSError, InvalidSnapshot, struct.error) as e:
                log.warning("removing producer state snapshot %s: %s", path, e)
                path.unlink(missing_ok=True)
                continue
            return offset
        self.reset()
        return None

    def delete_snapshots(
        self,
        *,
        below: int | None = None,
        above: int | None = None,
        offsets: list[int] | None = None,
    ) -> None:
        """Delete the snapshots below ``below`` and above ``above`` (every one without either);
        ``offsets``: the snapshots' (:func:`snapshot_offsets`) if the caller has them."""
        if offsets is None:
            offsets = snapshot_offsets(self.directory)
        for offset in offsets:
            if (below is not None and offset < below) or (above is not None and offset > above):
                snapshot_path(self.directory, offset).unlink(missing_ok=True)
