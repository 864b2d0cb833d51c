"""Reading a coordinator's internal partition back, batch by batch, when it is loaded.

The coordinators (groups on ``__consumer_offsets``, transactions on ``__transaction_state``,
share-partition states on ``__share_group_state``)
rebuild their state by replaying their partitions from the log start to the log end — a leader's
log end, records not yet replicated included, as Kafka loads them. Runs on the event loop; each
call reads about a mebibyte so that a long load can yield between reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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


def replay_data_records(
    partition: Partition,
    offset: int,
    replay: Callable[[int, bytes | None, bytes | None], None],
    malformed: type[Exception],
) -> tuple[int, int | None]:
    """Replay the data records of one read of ``partition`` from ``offset`` (``replay(index,
    key, value)``): how many, and where the next read starts (None: done). A record that
    ``replay`` finds ``malformed`` is logged and passed over, as Kafka's loaders skip it."""
    batches, next_offset = read_batches(partition, offset)
    count = 0
    for header, records in batches:
        if header.is_control:
            continue
        for record in records:
            try:
                replay(partition.index, record.key, record.value)
            except malformed as e:
                log.warning("%s offset %d: %s", partition.name, record.offset, e)
            count += 1
    return count, next_offset
