"""The ``__consumer_offsets`` record formats, byte for byte as Kafka writes them."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group import records as rec


def test_offset_key_layout() -> None:
    key = rec.encode_key(rec.OffsetKey("grp", "tp", 7))
    assert key == b"\x00\x01" + b"\x00\x03grp" + b"\x00\x02tp" + b"\x00\x00\x00\x07"


def test_group_key_layout() -> None:
    assert rec.encode_key(rec.GroupKey("grp")) == b"\x00\x02\x00\x03grp"


def test_offset_value_v3_layout() -> None:
    value = rec.encode_offset_value(rec.OffsetValue(42, 5, "m", 1000))
    assert value == struct.pack(">hqih", 3, 42, 5, 1) + b"m" + struct.pack(">q", 1000)


def test_older_offset_values_are_read() -> None:
    v1 = struct.pack(">hqh", 1, 42, 0) + struct.pack(">qq", 1000, 2000)
    assert rec.decode_offset_value(v1) == rec.OffsetValue(42, -1, "", 1000)
    v0 = struct.pack(">hqh", 0, 42, 2) + b"ab" + struct.pack(">q", 1000)
    assert rec.decode_offset_value(v0) == rec.OffsetValue(42, -1, "ab", 1000)


def test_group_value_v3_layout() -> None:
    value = rec.GroupValue(
        "consumer",
        3,
        "range",
        "m1",
        123,
        (rec.MemberValue("m1", "i1", "c", "/h", 300, 100, b"S", b"A"),),
    )
    expected = (
        struct.pack(">h", 3)
        + b"\x00\x08consumer"
        + struct.pack(">i", 3)
        + b"\x00\x05range"
        + b"\x00\x02m1"
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + b"\x00\x02m1"
        + b"\x00\x02i1"
        + b"\x00\x01c"
        + b"\x00\x02/h"
        + struct.pack(">ii", 300, 100)
        + struct.pack(">i", 1)
        + b"S"
        + struct.pack(">i", 1)
        + b"A"
    )
    assert rec.encode_group_value(value) == expected


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    value = rec.GroupValue("consumer", 4, None, None, 5, ())
    data = rec.encode_group_value(value)
    assert data == struct.pack(">h", 3) + b"\x00\x08consumer" + struct.pack(
        ">ihhqi", 4, -1, -1, 5, 0
    )
    assert rec.decode_group_value(data) == value


def test_group_value_v0_is_read() -> None:
    data = (
        struct.pack(">h", 0)
        + b"\x00\x08consumer"
        + struct.pack(">i", 1)
        + b"\x00\x05range\x00\x02m1"
        + struct.pack(">i", 1)
        + b"\x00\x02m1\x00\x01c\x00\x02/h"
        + struct.pack(">i", 100)
        + struct.pack(">i", 0)
        + struct.pack(">i", 0)
    )
    value = rec.decode_group_value(data)
    assert value.current_state_timestamp == -1
    assert value.members == (rec.MemberValue("m1", None, "c", "/h", 100, 100, b"", b""),)


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"\x00\x05\x00\x01g", b"\x00\x01\x00\x05ab"],
)
def test_bad_keys_are_refused(data: bytes) -> None:
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(data)


def test_future_value_versions_are_refused() -> None:
    with pytest.raises(rec.RecordFormatError):
        rec.decode_offset_value(struct.pack(">hq", 4, 1))


def test_java_string_hash() -> None:
    assert rec.java_string_hash("") == 0
    assert rec.java_string_hash("hello") == 99162322
    assert rec.java_string_hash("polygenelubricants") == -(2**31)
    assert rec.java_string_hash("é") == 0xE9
    assert rec.java_string_hash("😀") == 0xD83D * 31 + 0xDE00


def test_partition_for_is_in_range() -> None:
    assert rec.partition_for("polygenelubricants", 50) == 0  # abs(MIN_VALUE) is 0, as in Kafka
    assert rec.partition_for("hello", 50) == 99162322 % 50
    # A negative hash: Kafka's Utils.abs (|-421004483| % 50), not a mask of the sign bit.
    assert rec.java_string_hash("consumers") == -421004483
    assert rec.partition_for("consumers", 50) == 33


texts = st.text(max_size=40)


@given(texts, texts, st.integers(0, 2**31 - 1))
def test_keys_round_trip(group: str, topic: str, partition: int) -> None:
    for key in (rec.OffsetKey(group, topic, partition), rec.GroupKey(group)):
        assert rec.decode_key(rec.encode_key(key)) == key


@given(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    texts,
    st.integers(0, 2**62),
)
def test_offset_values_round_trip(offset: int, epoch: int, metadata: str, ts: int) -> None:
    value = rec.OffsetValue(offset, epoch, metadata, ts)
    assert rec.decode_offset_value(rec.encode_offset_value(value)) == value


members = st.builds(
    rec.MemberValue,
    texts,
    st.none() | texts,
    texts,
    texts,
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.binary(max_size=64),
    st.binary(max_size=64),
)


@given(
    texts,
    st.integers(0, 2**31 - 1),
    st.none() | texts,
    st.none() | texts,
    st.integers(-1, 2**62),
    st.lists(members, max_size=4).map(tuple),
)
def test_group_values_round_trip(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    ts: int,
    member_values: tuple[rec.MemberValue, ...],
) -> None:
    value = rec.GroupValue(protocol_type, generation, protocol, leader, ts, member_values)
    assert rec.decode_group_value(rec.encode_group_value(value)) == value


def test_group_value_member_count_past_its_bytes_is_refused() -> None:
    value = rec.encode_group_value(rec.GroupValue("consumer", 4, None, None, 5, ()))
    lying = value[:-4] + struct.pack(">i", 0x7FFFFFFF)
    with pytest.raises(rec.RecordFormatError, match="2147483647 elements"):
        rec.decode_group_value(lying)


def test_tagged_field_count_past_its_bytes_is_refused() -> None:
    with pytest.raises(rec.RecordFormatError, match="elements claimed"):
        rec.RecordReader(b"\xff\xff\xff\xff\x07").skip_tags()


def test_subscription_with_a_lying_topic_count_is_unreadable() -> None:
    from odradek.coordinator.group.group import subscription_topics

    assert subscription_topics(struct.pack(">hi", 0, 0x7FFFFFFF) + b"\x00\x01a") is None
    assert subscription_topics(struct.pack(">hi", 0, 1) + b"\x00\x01a") == ["a"]
