"""Control batches: the end-transaction markers (COMMIT / ABORT) that close a transaction in a
partition (KIP-98).

A marker is a RecordBatch v2 with the transactional and control attributes, the producer's id
and epoch, base sequence -1, and one record whose key and value are, big-endian::

    key    version int16 (0), type int16 (0 ABORT, 1 COMMIT)
    value  version int16 (0), coordinator epoch int32

Pure functions on bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.record_batch import BatchHeader
from odradek.protocol.records import NewRecord, RecordDecodeError, decode_batch, encode_batch

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    commit: bool
    coordinator_epoch: int


class InvalidControlBatch(ValueError):
    """A control batch whose record is not an end-transaction marker this code reads."""


def encode_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    *,
    commit: bool,
    now_ms: int,
) -> bytes:
    """One marker batch (offsets from 0, assigned by the log's append)."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return encode_batch(
        [NewRecord(key, value, (), now_ms)],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        transactional=True,
        control=True,
        now_ms=now_ms,
    )


def marker_commits(key: bytes | None) -> bool | None:
    """Whether a control record's ``key`` is a COMMIT (True) or ABORT (False) marker; None for
    any other control record."""
    if key is None or len(key) < _KEY.size:
        return None
    _, kind = _KEY.unpack_from(key)
    return None if kind not in (ABORT, COMMIT) else kind == COMMIT


def read_end_txn_marker(batch: bytes | bytearray | memoryview, header: BatchHeader) -> EndTxnMarker:
    """The marker in the control batch at ``header`` in ``batch``; raises
    :class:`InvalidControlBatch` for anything else."""
    start = header.position
    try:
        records = decode_batch(memoryview(batch)[start : start + header.size], verify_crc=False)
    except RecordDecodeError as e:
        raise InvalidControlBatch(str(e)) from e
    if len(records) != 1:
        raise InvalidControlBatch(f"a control batch holds {len(records)} records, not 1")
    key, value = records[0].key, records[0].value
    commit = marker_commits(key)
    if commit is None:
        raise InvalidControlBatch(f"control record key {key!r} is no transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise InvalidControlBatch("a transaction marker without a coordinator epoch")
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTxnMarker(commit, coordinator_epoch)
