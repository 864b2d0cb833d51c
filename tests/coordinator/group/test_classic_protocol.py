"""The classic consumer protocol's subscription and assignment bytes, as a consumer group reads
and writes them for its classic members; a client's bad bytes are refused, never trusted."""

from __future__ import annotations

import struct

import pytest

from odradek.client.admin import decode_assignment
from odradek.coordinator.group.classic_protocol import (
    BadSubscription,
    decode_assignment_partitions,
    decode_subscription,
    encode_assignment,
)

from .support import assignment, subscription


def test_a_version_0_subscription_names_its_topics() -> None:
    read = decode_subscription(subscription("a", "b"))
    assert (read.topics, read.owned, read.rack_id) == (("a", "b"), (), None)


def test_a_newer_version_than_known_is_read_as_the_newest() -> None:
    # v3 (owned partitions, generation, rack) with a version number from the future
    body = struct.pack(">hi", 9, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    body += struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 4)
    body += struct.pack(">i", 7) + struct.pack(">h", 2) + b"r1"
    read = decode_subscription(body)
    assert (read.topics, read.owned, read.rack_id) == (("t",), (("t", 4),), "r1")


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\xff\xff", struct.pack(">hi", 0, 2**31 - 1), struct.pack(">hi", 0, 1)],
)
def test_bad_subscriptions_are_refused(data: bytes) -> None:
    with pytest.raises(BadSubscription):
        decode_subscription(data)


def test_assignments_round_trip_for_every_client() -> None:
    encoded = encode_assignment([("b", 1), ("a", 2), ("a", 0)])
    assert decode_assignment(encoded) == (("a", 0), ("a", 2), ("b", 1))
    assert decode_assignment_partitions(assignment({"t": [3, 1]})) == (("t", 3), ("t", 1))
    assert decode_assignment_partitions(b"") == ()
    with pytest.raises(BadSubscription):
        decode_assignment_partitions(struct.pack(">hi", 0, 2**31 - 1))
