"""Idempotent producers: per partition, each producer's epoch and its last few batches.

Kafka's idempotence (KIP-98): a producer with an id and epoch numbers its batches per partition;
the leader appends a batch only if its first sequence follows the last one appended, answers a
retry of one of the last five batches with that batch's original offsets instead of appending it
again, and refuses a gap (OUT_OF_ORDER_SEQUENCE_NUMBER) or an old epoch (INVALID_PRODUCER_EPOCH).

The table lives in memory and is rebuilt from the batch headers of the log's newest segments when
the partition opens; Kafka keeps ``.snapshot`` files for that instead. Called from the event loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import BatchHeader

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
CACHED_BATCHES = 5  # max.in.flight.requests.per.connection that idempotence allows
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class AppendedSequence:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class _Producer:
    epoch: int
    batches: deque[AppendedSequence] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))


def _last_sequence(header: BatchHeader) -> int:
    last = header.base_sequence + header.last_offset_delta
    return last - _INT32_MAX - 1 if last > _INT32_MAX else last  # sequences wrap at int32


def _next_sequence(sequence: int) -> int:
    return 0 if sequence == _INT32_MAX else sequence + 1


class ProducerStateTable:
    """Sequence and epoch checks for one partition's idempotent producers."""

    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

    def check(self, header: BatchHeader) -> AppendedSequence | None:
        """Whether ``header``'s batch may be appended: None if so, the earlier append if it is a
        retry of one; raises :class:`KafkaError` for a fenced epoch or a sequence gap."""
        if header.producer_id == NO_PRODUCER_ID or header.base_sequence == NO_SEQUENCE:
            return None
        producer = self._producers.get(header.producer_id)
        if producer is None:
            return None  # unknown (new, or expired from the table): any sequence starts it
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
        expected = _next_sequence(producer.batches[-1].last_sequence) if producer.batches else 0
        if producer.batches and header.base_sequence != expected:
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {header.producer_id} sent sequence {header.base_sequence}, "
                f"expected {expected}",
            )
        return None

    def record(self, header: BatchHeader, first_offset: int) -> None:
        """Note an appended batch (``first_offset`` is its assigned base offset)."""
        if header.producer_id == NO_PRODUCER_ID or header.base_sequence == NO_SEQUENCE:
            return
        producer = self._producers.get(header.producer_id)
        if producer is None or header.producer_epoch != producer.epoch:
            producer = _Producer(header.producer_epoch)
            self._producers[header.producer_id] = producer
        producer.batches.append(
            AppendedSequence(
                header.base_sequence,
                _last_sequence(header),
                first_offset,
                first_offset + header.last_offset_delta,
            )
        )

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Replay appended batches' headers (offsets already assigned), oldest first."""
        for header in headers:
            if not header.is_control:
                self.record(header, header.base_offset)
