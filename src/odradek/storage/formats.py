"""The on-disk formats of a log directory, Kafka's own, so Kafka's tools can read them.

A log directory (one entry of ``log.dirs``) holds one directory per partition, named
``<topic>-<partition>``; topic names may themselves contain ``-``, so the partition number is
whatever follows the last one.  Beside them sit two checkpoint files and, only while the broker
is stopped cleanly, the empty marker file ``.kafka_cleanshutdown``.

A partition directory holds segments.  A segment is named by its base offset (the first offset
it may hold) written as 20 zero-padded decimal digits, and has three files:

``<base>.log``
    RecordBatch v2 batches exactly as the broker stored them (see
    :mod:`odradek.protocol.record_batch`), back to back, nothing else: no file header, no
    padding.  Offsets inside grow strictly from batch to batch.

``<base>.index``
    A sparse offset index: fixed-size entries, appended, never preallocated.  Each entry is
    :data:`OFFSET_INDEX_ENTRY`: the last offset of a batch minus the segment's base offset
    (4 bytes, signed, big-endian), then the byte position of that batch in the ``.log`` file
    (4 bytes).  Both grow strictly from entry to entry.

``<base>.timeindex``
    A sparse time index: entries of :data:`TIME_INDEX_ENTRY`, a timestamp (8 bytes) and a
    relative offset (4 bytes).  An entry says "up to and including the batch ending at this
    offset, the largest timestamp seen is this one"; one is written only when that largest
    timestamp grows, so timestamps grow strictly too.

``<base>.txnindex``
    The aborted transactions whose ABORT marker is in the segment (Kafka's TransactionIndex, see
    :mod:`odradek.storage.txn_index`); only there once the segment has one.

Beside the segments, ``<20-digit offset>.snapshot`` files hold the producer state as of that
offset (see :mod:`odradek.storage.producer_state`).

Checkpoint files are text, as Kafka writes them: a version line (``0``), a line with the number
of entries, then one ``<topic> <partition> <offset>`` line per entry, each line ending in
``\\n``.  Besides the recovery points and log start offsets, ``cleaner-offset-checkpoint`` holds
each compacted partition's first dirty offset: where the log cleaner's next pass starts reading
new records.

A partition directory also holds ``leader-epoch-checkpoint``, Kafka's leader epoch cache
(KIP-101): text lines, ``0`` (the version), the number of entries, then one
``<leader epoch> <start offset>`` line per entry, the first offset written in that epoch; epochs
and start offsets both grow strictly from line to line.  Written as
``leader-epoch-checkpoint.tmp`` and renamed into place (see :mod:`odradek.storage.leader_epoch`).

Log compaction (see :mod:`odradek.storage.swap`) leaves two more kinds of file in a partition
directory, only while it replaces segments:

``<base>.log.cleaned``, ``<base>.index.cleaned``, ``<base>.timeindex.cleaned``
    A cleaned segment being written, in the formats above.  Without a swap manifest naming it,
    a leftover to delete.

``<base>.swap``
    A swap manifest, the commit record of one cleaning pass: text lines, ``0`` (the version),
    the number of entries, then per cleaned segment ``<new base> <old base> <old base> ...``,
    the segments it replaces.  Written as ``<base>.swap.tmp`` and renamed into place.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

# relative offset (int32), position (int32)
OFFSET_INDEX_ENTRY = struct.Struct(">ii")
# timestamp (int64), relative offset (int32)
TIME_INDEX_ENTRY = struct.Struct(">qi")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
# Producer state snapshots, <20-digit offset>.snapshot (see odradek.storage.producer_state):
# named by an offset, not a segment, so not a segment file.
SNAPSHOT_SUFFIX = ".snapshot"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
TEMP_SUFFIX = ".tmp"

# Relative offsets and file positions are int32 in the index formats, which bounds a segment.
MAX_RELATIVE_OFFSET = (1 << 31) - 1
MAX_SEGMENT_BYTES = (1 << 31) - 1

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0

# A partition directory being deleted is first renamed to `<name>.<uuid hex>-delete`, so a crash
# mid-delete leaves a name no partition can have; the log manager removes such leftovers.
DELETE_DIR_SUFFIX = "-delete"


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """``(base offset, suffix)`` of a segment file name, or None for any other file."""
    for suffix in SEGMENT_SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            if len(stem) == 20 and stem.isdigit():
                return int(stem), suffix
    return None


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    topic, sep, number = name.rpartition("-")
    if not sep or not topic or not number.isdigit():
        return None
    return topic, int(number)


def format_checkpoint(entries: Mapping[tuple[str, int], int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in entries.items()]
    return ("\n".join(lines) + "\n").encode()


def parse_checkpoint(data: bytes) -> dict[tuple[str, int], int]:
    """Entries of a checkpoint file; ValueError if it is not one."""
    lines = data.decode().splitlines()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError("checkpoint file lacks a version 0 header")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise ValueError(f"checkpoint file declares {count} entries but has {len(lines) - 2}")
    entries: dict[tuple[str, int], int] = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        entries[(topic, int(partition))] = int(offset)
    return entries


def format_swap_manifest(entries: Mapping[int, list[int]]) -> bytes:
    """A swap manifest: for each new segment's base offset, the bases of those it replaces."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [" ".join(str(b) for b in [new, *old]) for new, old in entries.items()]
    return ("\n".join(lines) + "\n").encode()


def parse_swap_manifest(data: bytes) -> dict[int, list[int]]:
    """Entries of a swap manifest; ValueError if it is not one."""
    lines = data.decode().splitlines()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError("swap manifest lacks a version 0 header")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise ValueError(f"swap manifest declares {count} entries but has {len(lines) - 2}")
    entries: dict[int, list[int]] = {}
    for line in lines[2:]:
        new, *old = (int(field) for field in line.split(" "))
        if not old:
            raise ValueError(f"swap manifest entry {line!r} replaces nothing")
        entries[new] = old
    return entries


def format_leader_epoch_checkpoint(entries: Sequence[tuple[int, int]]) -> bytes:
    """A ``leader-epoch-checkpoint`` file of ``(epoch, start offset)`` entries, oldest first."""
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines += [f"{epoch} {start_offset}" for epoch, start_offset in entries]
    return ("\n".join(lines) + "\n").encode()


def parse_leader_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """Entries of a ``leader-epoch-checkpoint`` file; ValueError if it is not a whole one (torn,
    or not growing strictly)."""
    if not data.endswith(b"\n"):
        raise ValueError("leader epoch checkpoint does not end with a newline: torn")
    lines = data.decode().splitlines()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise ValueError("leader epoch checkpoint lacks a version 0 header")
    count = int(lines[1])
    if len(lines) - 2 != count:
        raise ValueError(
            f"leader epoch checkpoint declares {count} entries but has {len(lines) - 2}"
        )
    entries: list[tuple[int, int]] = []
    for line in lines[2:]:
        epoch_text, offset_text = line.split()
        epoch, start_offset = int(epoch_text), int(offset_text)
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch checkpoint entry {line!r} is negative")
        if entries and (epoch <= entries[-1][0] or start_offset <= entries[-1][1]):
            raise ValueError(f"leader epoch checkpoint entry {line!r} does not follow the last")
        entries.append((epoch, start_offset))
    return entries
