"""Reading a coordinator's internal partition back, batch by batch, when it is loaded.

The coordinators (groups on ``__consumer_offsets``, transactions on ``__transaction_state``)
rebuild their state by replaying their partitions from the log start to the log end — a leader's
log end, records not yet replicated included, as Kafka loads them. Runs on the event loop; each
call reads about a mebibyte so that a long load can yield between reads.
"""

from __future__ import annotations

import logging

from odradek.cluster.replication.partition import Partition
from odradek.protocol.record_batch import BatchHeader
from odradek.protocol.records import Record, RecordDecodeError, iter_records

log = logging.getLogger(__name__)

READ_BYTES = 1 << 20


def read_batches(
    partition: Partition, offset: int
) -> tuple[list[tuple[BatchHeader, list[Record]]], int | None]:
    """The batches of one read from ``offset`` on, and where the next read starts: None once
    the log end is reached or the rest is unreadable (logged)."""
    partition_log = partition.log
    if offset >= partition_log.log_end_offset:
        return [], None
    piece = partition_log.read(offset, READ_BYTES)
    if piece is None:
        return [], None
    batches: list[tuple[BatchHeader, list[Record]]] = []
    try:
        for header, records in iter_records(piece.read_bytes()):
            offset = header.next_offset
            batches.append((header, list(records)))
    except RecordDecodeError as e:
        log.error("%s is unreadable at offset %d: %s", partition.name, offset, e)
        return batches, None
    return batches, (offset if batches else None)
