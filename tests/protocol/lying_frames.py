"""Request frames whose array counts lie (the issue's 31-byte Metadata frame and its ListOffsets
and Fetch cousins): kio 0.6.5 alone reserves memory for the claimed count and aborts the process.
Without the 4-byte length prefix; used by the protocol and the server tests alike."""

from __future__ import annotations

import struct

# 2^32 - 2 entries: a compact array's varint length (count + 1) of 0xFFFFFFFF
HUGE_COMPACT_COUNT = b"\xff\xff\xff\xff\x0f"
HUGE_LEGACY_COUNT = struct.pack(">i", 0x7FFFFFFE)
CLIENT_ID = b"odradek8"


def header(api_key: int, version: int, flexible: bool, correlation_id: int = 7) -> bytes:
    prefix = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return prefix + (b"\x00" if flexible else b"")


# Metadata v12: topics, allow_auto_topic_creation, include_topic_authorized_operations, tags
METADATA_V12 = header(3, 12, True) + HUGE_COMPACT_COUNT + b"\x01\x00\x00"
# ListOffsets v7: replica_id, isolation_level, topics
LIST_OFFSETS_V7 = header(2, 7, True) + struct.pack(">ib", -1, 0) + HUGE_COMPACT_COUNT + b"\x00"
# ListOffsets v1 (non-flexible): replica_id, topics
LIST_OFFSETS_V1 = header(2, 1, False) + struct.pack(">i", -1) + HUGE_LEGACY_COUNT
# Fetch v12: replica_id, max_wait, min_bytes, max_bytes, isolation_level, session_id,
# session_epoch, topics
FETCH_V12_FIELDS = struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
FETCH_V12 = header(1, 12, True) + FETCH_V12_FIELDS + HUGE_COMPACT_COUNT
# Fetch v4 (the first kio reads): replica_id, max_wait, min_bytes, max_bytes, isolation, topics
FETCH_V4 = header(1, 4, False) + struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0) + HUGE_LEGACY_COUNT

LYING_FRAMES = {
    "metadata-v12": METADATA_V12,
    "list-offsets-v7": LIST_OFFSETS_V7,
    "list-offsets-v1": LIST_OFFSETS_V1,
    "fetch-v12": FETCH_V12,
    "fetch-v4": FETCH_V4,
}
