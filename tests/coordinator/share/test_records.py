"""The records of ``__share_group_state`` in Kafka's layout: round trips, and bytes that are not
such a record refused without reading past their end."""

from __future__ import annotations

import struct
import uuid

import pytest

from odradek.cluster.metadata.store import kafka_uuid
from odradek.cluster.share.persister import StateBatch
from odradek.coordinator.group.records import RecordFormatError
from odradek.coordinator.share.records import (
    SNAPSHOT_KEY,
    UPDATE_KEY,
    ShareSnapshot,
    ShareUpdate,
    StateKey,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
    partition_for,
)

TOPIC = uuid.UUID("1b2d3c4e-0000-4000-8000-0123456789ab")
KEY = StateKey("g", TOPIC, 3)
BATCHES = (StateBatch(10, 12, 0, 2), StateBatch(13, 13, 2, 0))


def test_key_layout_is_kafkas() -> None:
    raw = encode_key(SNAPSHOT_KEY, KEY)
    assert raw == struct.pack(">hh", 0, 1) + b"g" + TOPIC.bytes + struct.pack(">i", 3)
    assert decode_key(raw) == (SNAPSHOT_KEY, KEY)
    assert decode_key(encode_key(UPDATE_KEY, KEY)) == (UPDATE_KEY, KEY)


def test_values_round_trip() -> None:
    snapshot = ShareSnapshot(4, 2, 7, 10, 1_000, 2_000, BATCHES)
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot
    update = ShareUpdate(4, 8, -1, BATCHES)
    assert decode_update(encode_update(update)) == update


def test_the_coordinator_key_and_its_partition_are_kafkas() -> None:
    assert kafka_uuid(TOPIC) == "Gy08TgAAQACAAAEjRWeJqw"
    assert KEY.coordinator_key() == "g:Gy08TgAAQACAAAEjRWeJqw:3"
    assert 0 <= partition_for(KEY.coordinator_key(), 50) < 50


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        struct.pack(">h", 5) + b"\x00\x01g",
        struct.pack(">hh", 0, 40) + b"g",  # a group id longer than the bytes
        encode_key(SNAPSHOT_KEY, KEY)[:-1],
    ],
)
def test_a_bad_key_is_refused(raw: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_key(raw)


def test_a_bad_value_is_refused() -> None:
    good = encode_snapshot(ShareSnapshot(0, 0, 0, 0, 0, 0, BATCHES))
    with pytest.raises(RecordFormatError):
        decode_snapshot(good[:-3])
    with pytest.raises(RecordFormatError):
        decode_snapshot(struct.pack(">h", 9) + good[2:])
    # A count of a billion batches in a few bytes: refused before anything is read for them.
    huge = struct.pack(">hiiiqqq", 0, 0, 0, 0, 0, 0, 0) + bytes([0x80, 0x94, 0xEB, 0xDC, 0x03])
    with pytest.raises(RecordFormatError):
        decode_snapshot(huge)
