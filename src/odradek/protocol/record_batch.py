"""RecordBatch v2 (magic 2) headers as views over bytes.

Layout of the 61-byte header, big-endian, as Kafka defines it::

    offset  size  field
    0       8     baseOffset
    8       4     batchLength          bytes after this field
    12      4     partitionLeaderEpoch
    16      1     magic                must be 2
    17      4     crc                  CRC-32C of bytes 21..end
    21      2     attributes           bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                       6 delete horizon (KIP-534: baseTimestamp holds it)
    23      4     lastOffsetDelta
    27      8     baseTimestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordCount
    61      ...   records

The broker works on batches without decoding records: it validates the header and the CRC, then
rewrites ``baseOffset`` (outside the CRC) to assign offsets.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of the header outside batchLength
MAGIC = 2
CRC_START = 21

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_MAX_TIMESTAMP_AND_ATTRS = struct.Struct(">h")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
# Set by log compaction (KIP-534) on a batch keeping tombstones: its baseTimestamp is then the
# time after which the cleaner may remove them; record timestamps stay baseTimestamp + delta.
DELETE_HORIZON_BIT = 0x40

NO_TIMESTAMP = -1


class InvalidBatch(ValueError):
    """A batch that breaks the format; ``error`` names the Kafka error a client should get."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error  # "corrupt_message" | "invalid_record" | "message_too_large"


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed header of one batch at ``position`` in some buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def delete_horizon(self) -> int | None:
        """When compaction may remove this batch's tombstones (KIP-534), if it is marked."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None


def read_header(
    buf: bytes | bytearray | memoryview, position: int = 0, at: int | None = None
) -> BatchHeader:
    """Parse the header at ``position``; the caller ensures 61 bytes are there. ``at``: the
    position to record instead (where ``buf`` is a chunk read from further into a file)."""
    return BatchHeader(position if at is None else at, *_HEADER.unpack_from(buf, position))


def iter_headers(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """Headers of the complete batches in ``buf``, stopping at the first incomplete one."""
    position = 0
    end = len(buf)
    while position + HEADER_SIZE <= end:
        header = read_header(buf, position)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
            return
        yield header
        position += header.size


def crc_of(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    start = header.position + CRC_START
    return int(crc32c.crc32c(memoryview(buf)[start : header.position + header.size]))


def validate_batches(buf: bytes | bytearray | memoryview, max_batch_size: int) -> list[BatchHeader]:
    """Check that ``buf`` is one or more whole v2 batches a producer may send.

    Raises :class:`InvalidBatch` naming the Kafka error for the first problem found.
    """
    headers: list[BatchHeader] = []
    position = 0
    end = len(buf)
    if end == 0:
        raise InvalidBatch("invalid_record", "empty record set")
    while position < end:
        if end - position < HEADER_SIZE:
            if end - position >= 17 and buf[position + 16] != MAGIC:
                raise InvalidBatch(
                    "invalid_record", f"record batch magic {buf[position + 16]} is not 2"
                )
            raise InvalidBatch("corrupt_message", "record set ends inside a batch header")
        header = read_header(buf, position)
        if header.magic != MAGIC:
            raise InvalidBatch("invalid_record", f"record batch magic {header.magic} is not 2")
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size > end:
            raise InvalidBatch(
                "corrupt_message", f"batch length {header.batch_length} does not fit the record set"
            )
        if header.size > max_batch_size:
            raise InvalidBatch(
                "message_too_large",
                f"batch of {header.size} bytes is over the limit of {max_batch_size}",
            )
        if crc_of(buf, header) != header.crc:
            raise InvalidBatch("corrupt_message", "record batch CRC does not match its contents")
        if header.record_count < 1:
            raise InvalidBatch("invalid_record", "record batch holds no records")
        if header.last_offset_delta != header.record_count - 1:
            raise InvalidBatch(
                "invalid_record",
                f"record count {header.record_count} disagrees with last offset delta "
                f"{header.last_offset_delta}",
            )
        headers.append(header)
        position += header.size
    return headers


def copied_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """The headers of the whole batches at the start of ``buf``, a leader's log copied to a
    follower: checked as Kafka's follower append checks them (magic 2, the CRC), and for
    nothing a producer is held to, which the leader checked when it took them (a batch
    compaction emptied holds no records; its offsets stay). A batch cut off at the end (a
    fetch's byte limit) is left out. Raises :class:`InvalidBatch` (CORRUPT_MESSAGE)."""
    headers: list[BatchHeader] = []
    position = 0
    end = len(buf)
    while end - position >= HEADER_SIZE:
        header = read_header(buf, position)
        if header.magic != MAGIC:
            raise InvalidBatch("corrupt_message", f"record batch magic {header.magic} is not 2")
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch(
                "corrupt_message", f"batch length {header.batch_length} is too short"
            )
        if position + header.size > end:
            break
        if crc_of(buf, header) != header.crc:
            raise InvalidBatch("corrupt_message", "record batch CRC does not match its contents")
        headers.append(header)
        position += header.size
    return headers


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Assign offsets to the batch at ``position``; the CRC does not cover this field."""
    _BASE_OFFSET.pack_into(buf, position, base_offset)


def set_log_append_time(buf: bytearray | memoryview, header: BatchHeader, timestamp: int) -> None:
    """Stamp a batch with the broker's time (``message.timestamp.type=LogAppendTime``).

    Kafka sets maxTimestamp and the timestamp-type bit and leaves the records alone; both fields
    are under the CRC, so it is recomputed.
    """
    struct.pack_into(">h", buf, header.position + 21, header.attributes | TIMESTAMP_TYPE_BIT)
    set_max_timestamp(buf, header, timestamp)


def set_max_timestamp(buf: bytearray | memoryview, header: BatchHeader, timestamp: int) -> None:
    """Rewrite a batch's maxTimestamp, and so its CRC, which covers it."""
    p = header.position
    struct.pack_into(">q", buf, p + 35, timestamp)
    crc = crc32c.crc32c(memoryview(buf)[p + CRC_START : p + header.size])
    struct.pack_into(">I", buf, p + 17, crc)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the leader epoch of the appending leader (outside the CRC)."""
    struct.pack_into(">i", buf, position + 12, epoch)


def with_compression(buf: bytes | bytearray | memoryview, header: BatchHeader, codec: int) -> bytes:
    """The batch at ``header`` with its records recompressed as ``codec`` (topic compression.type).

    Only the records section changes container; the records themselves, the offsets and
    timestamps stay as they are, so the header's other fields carry over unchanged.
    """
    from odradek.protocol import compression

    start = header.position
    records = memoryview(buf)[start + HEADER_SIZE : start + header.size]
    if header.compression != compression.NONE:
        records = memoryview(compression.decompress(header.compression, records))
    payload = records if codec == compression.NONE else compression.compress(codec, records)
    out = bytearray(memoryview(buf)[start : start + HEADER_SIZE])
    out += payload
    attributes = (header.attributes & ~COMPRESSION_MASK) | codec
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">h", out, 21, attributes)
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
