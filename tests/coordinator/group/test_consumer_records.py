"""Consumer group records (key types 3-8) in Kafka's layout, byte for byte where it is short
enough to write out, and round trips for the rest."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group import records as rec

TOPIC = uuid.UUID("00000000-0000-0000-0000-000000000001")


def test_keys_and_a_group_epoch_as_kafka_writes_them() -> None:
    key = crec.ConsumerGroupKey(crec.CONSUMER_GROUP_METADATA_KEY, "g")
    assert crec.encode_key(key) == b"\x00\x03\x00\x01g"
    member = crec.ConsumerGroupKey(crec.CONSUMER_GROUP_MEMBER_METADATA_KEY, "g", "m")
    assert crec.encode_key(member) == b"\x00\x05\x00\x01g\x00\x01m"
    assert crec.decode_key(crec.encode_key(member)) == member
    # version 0, int32 epoch, no tagged fields
    assert crec.encode_value(crec.GroupEpochValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"


def test_a_target_assignment_is_compact_arrays_with_tags_per_struct() -> None:
    value = crec.TargetAssignmentMemberValue({TOPIC: frozenset({2, 0})})
    expected = (
        b"\x00\x00"  # version
        + b"\x02"  # one topic
        + TOPIC.bytes
        + b"\x03\x00\x00\x00\x00\x00\x00\x00\x02"  # two partitions, sorted
        + b"\x00"  # the topic's tagged fields
        + b"\x00"  # the value's
    )
    assert crec.encode_value(value) == expected
    assert crec.decode_value(crec.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, expected) == value


def test_round_trips_and_unknown_tags_are_skipped() -> None:
    values: list[crec.ConsumerGroupValue] = [
        crec.PartitionMetadataValue((crec.SubscribedTopic(TOPIC, "t", 6),)),
        crec.PartitionMetadataValue(
            (crec.SubscribedTopic(TOPIC, "t", 3, (("r1", "r2"), (), ("r2",))),)
        ),
        crec.MemberMetadataValue(None, "rack", "client", "/10.0.0.1", ("a", "b"), None, 300, None),
        crec.TargetAssignmentEpochValue(9),
        crec.CurrentAssignmentValue(4, 3, 1, {TOPIC: frozenset({1})}, {TOPIC: frozenset({0})}),
    ]
    for value in values:
        kind = crec.kind_of(value)
        assert crec.decode_value(kind, crec.encode_value(value)) == value
    # A member Kafka converted from a classic group carries ClassicMemberMetadata as tag 0.
    member = crec.encode_value(values[2])
    tagged = member[:-1] + b"\x01\x00\x03abc"
    assert crec.decode_value(crec.CONSUMER_GROUP_MEMBER_METADATA_KEY, tagged) == values[2]


def test_a_count_past_the_value_bytes_is_refused() -> None:
    # a member metadata value (kind 5): instance id, rack, client id, host, then topic names
    data = b"\x00\x00" + b"\x00\x00\x02c\x02h" + b"\xff\xff\xff\xff\x07"
    with pytest.raises(rec.RecordFormatError, match="elements claimed"):
        crec.decode_value(crec.CONSUMER_GROUP_MEMBER_METADATA_KEY, data)
