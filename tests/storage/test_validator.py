"""The leader's checks of a produced record set (Kafka's LogValidator), on bytes alone."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import compression
from odradek.protocol.errors import ErrorCode, RecordsRejected
from odradek.protocol.record_batch import (
    NO_TIMESTAMP,
    iter_headers,
    set_max_timestamp,
    validate_batches,
)
from odradek.protocol.records import Header, NewRecord, batch_around, decode_batch, encode_batch
from odradek.storage import LogConfig, validator
from odradek.storage.log import RECORD_NAME_STRATEGY, TOPIC_RECORD_NAME_STRATEGY
from odradek.storage.validator import validate_for_leader

from .conftest import varint

NOW = 1_700_000_000_000


def batch(*keys: bytes | None, timestamp: int = NOW, codec: int = compression.NONE) -> bytes:
    return encode_batch(
        [NewRecord(k, b"v", timestamp=timestamp) for k in keys], now_ms=NOW, compression=codec
    )


def rejected(records: bytes | None, config: LogConfig) -> RecordsRejected:
    with pytest.raises(RecordsRejected) as caught:
        validate_for_leader(records, config, NOW, "t-0")
    return caught.value


def test_a_valid_set_keeps_the_writable_view_it_came_in() -> None:
    data = bytearray(batch(b"k") + batch(None, None))
    view = memoryview(data)
    valid = validate_for_leader(view, LogConfig(), NOW, "t-0")
    assert valid.buffer is view
    assert [h.record_count for h in valid.headers] == [1, 2]
    assert valid.log_append_time is None


def test_read_only_bytes_are_copied_so_offsets_can_be_assigned() -> None:
    data = batch(b"k")
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert isinstance(valid.buffer, bytearray)
    assert bytes(valid.buffer) == data


def test_empty_corrupt_and_oversized_sets_get_kafkas_codes() -> None:
    assert rejected(None, LogConfig()).code == ErrorCode.invalid_record
    corrupt = bytearray(batch(b"k"))
    corrupt[-1] ^= 0xFF
    assert rejected(bytes(corrupt), LogConfig()).code == ErrorCode.corrupt_message
    big = batch(b"k")
    assert rejected(big, LogConfig(max_message_bytes=len(big) - 1)).code == (
        ErrorCode.message_too_large
    )


def test_a_compacted_log_refuses_the_first_keyless_record_by_its_index() -> None:
    error = rejected(batch(b"a", None, None), LogConfig(compact=True))
    assert error.code == ErrorCode.invalid_record
    assert [i for i, _ in error.record_errors] == [1]
    assert "t-0" in error.message
    assert validate_for_leader(batch(b"a", b"b"), LogConfig(compact=True), NOW, "t-0").headers


def test_timestamps_outside_the_topics_bounds_are_refused() -> None:
    config = LogConfig(timestamp_after_max_ms=1000, timestamp_before_max_ms=5000)
    assert rejected(batch(b"k", timestamp=NOW + 1001), config).code == ErrorCode.invalid_timestamp
    assert rejected(batch(b"k", timestamp=NOW - 5001), config).code == ErrorCode.invalid_timestamp
    assert validate_for_leader(batch(b"k", timestamp=NOW + 1000), config, NOW, "t-0").headers


def test_log_append_time_takes_the_brokers_clock_and_skips_the_bounds() -> None:
    config = LogConfig(log_append_time=True, timestamp_before_max_ms=0)
    valid = validate_for_leader(batch(b"k", timestamp=1), config, NOW, "t-0")
    assert valid.log_append_time == NOW


def test_a_topic_codec_rewrites_batches_in_it() -> None:
    config = LogConfig(compression=compression.codec_id("zstd"))
    valid = validate_for_leader(batch(b"a", b"b"), config, NOW, "t-0")
    assert [h.compression for h in valid.headers] == [compression.codec_id("zstd")]
    assert [h.compression for h in iter_headers(valid.buffer)] == [compression.codec_id("zstd")]
    assert valid.headers[0].record_count == 2


def without_max_timestamp(data: bytes) -> bytearray:
    """The batch as sarama before 1.23 writes it: maxTimestamp -1 (CRC made to match)."""
    out = bytearray(data)
    (header,) = iter_headers(out)
    set_max_timestamp(out, header, NO_TIMESTAMP)
    return out


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_a_batch_without_max_timestamp_gets_its_records_greatest(codec: str) -> None:
    records = [NewRecord(b"k", b"v", timestamp=NOW + delta) for delta in (5, 40, 12)]
    data = without_max_timestamp(
        encode_batch(records, now_ms=NOW, compression=compression.codec_id(codec))
    )
    assert [h.max_timestamp for h in iter_headers(data)] == [NO_TIMESTAMP]
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert [h.max_timestamp for h in valid.headers] == [NOW + 40]
    # the rewritten batch is whole: its CRC covers the new field
    assert [h.max_timestamp for h in validate_batches(valid.buffer, 1 << 20)] == [NOW + 40]
    assert [r.timestamp for r in decode_batch(bytes(valid.buffer))] == [NOW + 5, NOW + 40, NOW + 12]


def test_a_batch_without_any_timestamp_is_left_as_it_came() -> None:
    data = bytearray(encode_batch([NewRecord(b"k", b"v", timestamp=NO_TIMESTAMP)], now_ms=NOW))
    (header,) = iter_headers(data)
    assert (header.base_timestamp, header.max_timestamp) == (NO_TIMESTAMP, NO_TIMESTAMP)
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert valid.buffer == data
    assert [h.max_timestamp for h in valid.headers] == [NO_TIMESTAMP]


# -- every record read before the append (Kafka's LogValidator) ---------------------------------

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def record(
    offset_delta: int = 0,
    value: bytes = b"v",
    *,
    key_length: int = -1,
    key_bytes: int | None = None,
    timestamp_delta: int = 0,
    extra: bytes = b"",
    length_change: int = 0,
) -> bytes:
    """One record as DefaultRecord writes it; ``key_bytes`` of key follow its ``key_length``
    (as many as it says, by default), ``extra`` goes after the header count and
    ``length_change`` makes the length prefix lie."""
    body = b"\x00" + varint(timestamp_delta) + varint(offset_delta) + varint(key_length)
    body += (
        b"k" * (max(key_length, 0) if key_bytes is None else key_bytes)
        + varint(len(value))
        + value
        + varint(0)
        + extra
    )
    return varint(len(body) + length_change) + body


def framed(section: bytes, count: int, codec: str = "none", *, compress: bool = True) -> bytes:
    """A batch with a valid CRC around ``section`` claiming ``count`` records, ``section``
    packed with ``codec`` (or, with ``compress=False``, taken as the packed payload as it is)."""
    codec_bits = compression.codec_id(codec)
    payload = compression.compress(codec_bits, section) if compress else section
    return batch_around(payload, count, NOW, NOW, attributes=codec_bits)


def records(count: int) -> bytes:
    return b"".join(record(i) for i in range(count))


@pytest.mark.parametrize("codec", CODECS)
def test_a_valid_batch_of_each_codec_is_stored_as_it_came(codec: str) -> None:
    data = bytearray(framed(records(50), 50, codec))
    view = memoryview(data)
    valid = validate_for_leader(view, LogConfig(), NOW, "t-0")
    assert valid.buffer is view
    assert bytes(valid.buffer) == bytes(framed(records(50), 50, codec))


@pytest.mark.parametrize("codec", CODECS[1:])
@pytest.mark.parametrize(
    "payload", [b"garbage, not compressed at all", bytes(range(256)), b"\xff" * 64]
)
def test_a_valid_crc_around_a_garbage_payload_is_corrupt_message(
    codec: str, payload: bytes
) -> None:
    error = rejected(framed(payload, 1, codec, compress=False), LogConfig())
    assert error.code == ErrorCode.corrupt_message
    assert "t-0" in error.message


@pytest.mark.parametrize("codec", CODECS[1:])
def test_a_truncated_compressed_payload_is_corrupt_message(codec: str) -> None:
    packed = compression.compress(compression.codec_id(codec), records(100))
    error = rejected(framed(packed[: len(packed) // 2], 100, codec, compress=False), LogConfig())
    assert error.code == ErrorCode.corrupt_message


def test_an_unknown_codec_is_corrupt_message() -> None:
    data = batch_around(records(1), 1, NOW, NOW, attributes=5)
    assert rejected(data, LogConfig()).code == ErrorCode.corrupt_message


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    ("section", "count"),
    [
        (records(3), 4),  # fewer records than the count
        (records(4), 3),  # more: bytes left over after the count
        (records(3) + b"\x00", 3),  # a trailing byte
        (records(2) + record(2)[:-3], 3),  # the last record cut short
        (record(0, length_change=1), 1),  # a length past the end
        (record(0, length_change=-1), 1),  # a length shorter than the fields
        (record(0, extra=b"\x00"), 1),  # fields shorter than the length
        (record(0, key_length=1 << 30, key_bytes=3), 1),  # a key past the record
        (record(0, value=b"")[:-1] + varint(0x7FFFFFFF), 1),  # a header count past the record
        (record(0)[:-1] + varint(-2), 1),  # a negative header count
        (record(0)[:-1] + varint(1) + varint(-5) + varint(-1), 1),  # a negative header key length
        (b"\xff\xff\xff\xff\xff\x01" + bytes(20), 1),  # a varint past 5 bytes
        (varint(0x7FFFFFFF) + bytes(10), 1),  # a huge record length
        (bytes(7), 0x7FFFFFFF),  # a huge record count
    ],
    ids=[
        "too-few",
        "too-many",
        "trailing-byte",
        "truncated-record",
        "length-past-end",
        "length-short",
        "fields-short",
        "huge-key",
        "huge-header-count",
        "negative-header-count",
        "negative-header-key",
        "long-varint",
        "huge-length",
        "huge-count",
    ],
)
def test_broken_framing_is_invalid_record(codec: str, section: bytes, count: int) -> None:
    error = rejected(framed(section, count, codec), LogConfig())
    assert error.code == ErrorCode.invalid_record, error.message


@pytest.mark.parametrize("length", [-2, -7, -100_000])
def test_a_length_below_minus_one_is_invalid_record(length: int) -> None:
    """Kafka's reader takes it for null; librdkafka's and this project's refuse it, so the log
    must not hold it."""
    key = record(0, key_length=length)
    value = record(0)[:-3] + varint(length) + varint(0)
    header = record(0)[:-1] + varint(1) + varint(1) + b"h" + varint(length)
    for section in (key, value, header):
        fixed = varint(len(section) - 1) + section[1:]  # the length prefix made to match
        assert rejected(framed(fixed, 1), LogConfig()).code == ErrorCode.invalid_record


@pytest.mark.parametrize("codec", CODECS[1:])
def test_records_that_inflate_past_the_limit_are_message_too_large(
    codec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(validator, "DECOMPRESSION_FACTOR", 1)
    config = LogConfig()  # the limit: 1 x max.message.bytes (at least 1 MiB)
    big = record(0, value=bytes(2 << 20))
    assert rejected(framed(big, 1, codec), config).code == ErrorCode.message_too_large
    assert validate_for_leader(framed(record(0, bytes(1000)), 1, codec), config, NOW, "t-0")


def test_an_idempotent_batch_needs_a_base_sequence() -> None:
    data = encode_batch([NewRecord(None, b"v")], now_ms=NOW, producer_id=7, producer_epoch=0)
    assert rejected(data, LogConfig()).code == ErrorCode.invalid_record
    good = encode_batch(
        [NewRecord(None, b"v")], now_ms=NOW, producer_id=7, producer_epoch=0, base_sequence=0
    )
    assert validate_for_leader(good, LogConfig(), NOW, "t-0").headers


def test_max_timestamp_is_taken_from_the_records_where_the_header_lies() -> None:
    data = bytearray(batch(b"a", timestamp=NOW))
    (header,) = iter_headers(data)
    set_max_timestamp(data, header, NOW + 999_999)
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert [h.max_timestamp for h in valid.headers] == [NOW]
    assert validate_batches(valid.buffer, 1 << 20)  # its CRC made to match


def test_every_records_timestamp_is_held_to_the_bounds_not_only_the_greatest() -> None:
    stamps = [NOW, NOW - 10_000, NOW - 1, NOW - 20_000]
    data = encode_batch([NewRecord(None, b"v", timestamp=t) for t in stamps], now_ms=NOW)
    error = rejected(data, LogConfig(timestamp_before_max_ms=5000))
    assert error.code == ErrorCode.invalid_timestamp
    assert [i for i, _ in error.record_errors] == [1, 3]
    assert validate_for_leader(data, LogConfig(timestamp_before_max_ms=20_000), NOW, "t-0")


@pytest.mark.parametrize("delta", [1 << 64, -(1 << 64), (1 << 63) - NOW])
def test_a_timestamp_delta_past_64_bits_is_invalid_record(delta: int) -> None:
    section = record(0, timestamp_delta=delta)
    assert rejected(framed(section, 1), LogConfig()).code == ErrorCode.invalid_record


def test_a_compressed_batch_with_offset_deltas_out_of_order_is_renumbered() -> None:
    section = record(0, b"a") + record(0, b"b") + record(5, b"c")
    data = framed(section, 3, "zstd")
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert [h.compression for h in valid.headers] == [compression.codec_id("zstd")]
    decoded = decode_batch(bytes(valid.buffer))
    assert [(r.offset, r.value) for r in decoded] == [(0, b"a"), (1, b"b"), (2, b"c")]
    # uncompressed, Kafka leaves the deltas as they came
    plain = framed(section, 3)
    assert bytes(validate_for_leader(plain, LogConfig(), NOW, "t-0").buffer) == plain


@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=80),
            st.none() | st.binary(max_size=300),
            st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
            st.integers(-(10**9), 10**9),
        ),
        min_size=1,
        max_size=80,
    ),
    st.sampled_from(CODECS),
)
def test_what_any_client_writes_is_accepted(
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]], codec: str
) -> None:
    data = encode_batch(
        [NewRecord(k, v, [Header(hk, hv) for hk, hv in hs], NOW + t) for k, v, hs, t in items],
        now_ms=NOW,
        compression=compression.codec_id(codec),
    )
    valid = validate_for_leader(data, LogConfig(), NOW, "t-0")
    assert [h.max_timestamp for h in valid.headers] == [NOW + max(t for *_, t in items)]


@settings(max_examples=100)
@given(st.data())
def test_a_mutated_batch_is_refused_with_kafkas_codes_or_reads_back(data: st.DataObject) -> None:
    """Bytes flipped under a valid CRC: refused with one of Kafka's codes, never a crash; and a
    set that is accepted decodes."""
    codec = data.draw(st.sampled_from(["none", "gzip"]))
    section = bytearray(b"".join(record(i, b"x" * (i * 7 % 90)) for i in range(12)))
    for _ in range(data.draw(st.integers(1, 4))):
        section[data.draw(st.integers(0, len(section) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, 3))
    batch_bytes = framed(bytes(section[: len(section) - cut]), 12, codec)
    try:
        valid = validate_for_leader(batch_bytes, LogConfig(), NOW, "t-0")
    except RecordsRejected as e:
        assert e.code in (ErrorCode.invalid_record, ErrorCode.corrupt_message)
        return
    decode_batch(bytes(valid.buffer))


# -- big record sets, checked ahead in steps ---------------------------------------------------


def verdict(records: bytes, config: LogConfig, checked: validator.RecordsChecked | None) -> object:
    """What validate_for_leader answers (the bytes it keeps, or the refusal), given ``checked``."""
    try:
        valid = validate_for_leader(records, config, NOW, "t-0", checked=checked)
    except RecordsRejected as e:
        return ("refused", e.code, e.message, e.record_errors)
    return bytes(valid.buffer), valid.headers, valid.log_append_time


def steps_of(records: bytes, config: LogConfig, step_records: int) -> list[str]:
    """The kinds of steps checking_in_steps takes, run here."""
    kinds = []
    steps = validator.checking_in_steps(records, config, "t-0", step_records)
    sent: bytes | RecordsRejected | None = None
    try:
        while True:
            step = steps.send(sent)
            kinds.append("scan" if step is None else "inflate")
            sent = None if step is None else step.run()
    except StopIteration:
        return kinds


@settings(max_examples=150)
@given(st.data())
def test_checks_made_in_steps_of_any_size_give_the_same_answer(data: st.DataObject) -> None:
    """Whatever the batches (valid, mutated under a valid CRC, cut short, miscounted) and
    wherever the scan is cut, validation with the checks made ahead in steps answers as
    validation that makes them itself: same bytes kept, or same code, message and record
    errors."""
    batches = []
    for _ in range(data.draw(st.integers(1, 3))):
        codec = data.draw(st.sampled_from(CODECS))
        count = data.draw(st.integers(1, 30))
        section = bytearray(
            b"".join(
                record(i, b"x" * (i * 7 % 50), timestamp_delta=data.draw(st.integers(-5, 5)))
                for i in range(count)
            )
        )
        for _ in range(data.draw(st.integers(0, 2))):
            section[data.draw(st.integers(0, len(section) - 1))] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, 2))
        claimed = count + data.draw(st.sampled_from([0, 0, 0, -1, 1]))
        batches.append(framed(bytes(section[: len(section) - cut]), claimed, codec))
    records_ = b"".join(batches)
    config = data.draw(
        st.sampled_from(
            [LogConfig(), LogConfig(compact=True), LogConfig(timestamp_before_max_ms=2)]
        )
    )
    step_records = data.draw(st.integers(1, 31))
    checked = validator.check_in_steps(records_, config, "t-0", step_records)
    expected = verdict(records_, config, None)
    if checked is None:  # batches refused before their records are read (no records claimed)
        assert isinstance(expected, tuple) and expected[0] == "refused"
    else:
        assert verdict(records_, config, checked) == expected


@pytest.mark.parametrize("codec", CODECS[1:])
def test_a_garbage_payload_checked_in_steps_is_corrupt_message(codec: str) -> None:
    data = framed(b"garbage, not compressed at all", 1, codec, compress=False)
    checked = validator.check_in_steps(data, LogConfig(), "t-0")
    assert checked is not None
    assert verdict(data, LogConfig(), checked) == verdict(data, LogConfig(), None)
    assert rejected(data, LogConfig()).code == ErrorCode.corrupt_message


def test_the_scan_gives_way_after_each_part_and_a_compressed_batch_is_inflated_first() -> None:
    data = framed(records(10), 10, "zstd") + framed(records(5), 5)
    assert steps_of(data, LogConfig(), 4) == ["inflate", "scan", "scan", "scan"]
    assert steps_of(data, LogConfig(), 100) == ["inflate"]


def test_checks_made_ahead_are_not_used_where_they_no_longer_apply() -> None:
    data = framed(records(3), 4, "gzip")  # one record fewer than claimed
    checked = validator.check_in_steps(data, LogConfig(), "t-0")
    assert checked is not None
    # made for another decompression limit (max.message.bytes changed meanwhile): made again
    other = validator.RecordsChecked(checked.limit + 1, (validator.RecordsCheck(0, 0, 0, True),))
    assert verdict(data, LogConfig(), other) == verdict(data, LogConfig(), None)
    # a topic validating schema ids reads its records itself
    schema = LogConfig(value_schema_validation=True)
    assert validator.check_in_steps(data, schema, "t-0") is None
    # batches refused before their records are read
    assert validator.check_in_steps(data[:-1], LogConfig(), "t-0") is None


def test_only_big_record_sets_are_checked_in_steps() -> None:
    assert not validator.stepped(None)
    assert not validator.stepped(framed(records(1000), 1000))
    assert not validator.stepped(framed(records(1000), 1000, "zstd"))
    many = validator.STEPPED_RECORDS + 1
    assert validator.stepped(framed(records(many), many, "zstd"))
    assert validator.stepped(framed(records(many), many))
    # few records, but a big compressed batch
    big = record(0, value=random.Random(7).randbytes(validator.STEPPED_COMPRESSED_BYTES))
    packed = framed(big, 1, "lz4")
    assert len(packed) > validator.STEPPED_COMPRESSED_BYTES
    assert validator.stepped(packed)


# Snappy inflates at most some 21 times: a batch of it small enough to be checked inline cannot
# reach the inline bound.
@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_a_small_batch_that_inflates_past_what_is_checked_inline_is_checked_in_steps(
    codec: str,
) -> None:
    """A few kilobytes of zeros whose headers do not say they inflate to megabytes: validated
    inline, the set is handed back (InflatesPastInline, nothing kept); checked in steps first,
    it is validated as any other, and a set just under the bound is validated inline. Past the
    decompression limit itself it stays MESSAGE_TOO_LARGE (the test above)."""
    over = framed(record(0, value=bytes(validator.INLINE_DECOMPRESSED_BYTES)), 1, codec)
    assert not validator.stepped(over)
    with pytest.raises(validator.InflatesPastInline):
        validate_for_leader(over, LogConfig(), NOW, "t-0")
    checked = validator.check_in_steps(over, LogConfig(), "t-0")
    assert checked is not None
    valid = validate_for_leader(over, LogConfig(), NOW, "t-0", checked=checked)
    assert bytes(valid.buffer) == over
    under = framed(record(0, value=bytes(validator.INLINE_DECOMPRESSED_BYTES - 100)), 1, codec)
    assert bytes(validate_for_leader(under, LogConfig(), NOW, "t-0").buffer) == under


# -- schema id validation (confluent.key/value.schema.validation) ------------------------------


def wire(schema_id: int, payload: bytes = b"payload") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big", signed=True) + payload


def kv_batch(*pairs: tuple[bytes | None, bytes | None], codec: int = compression.NONE) -> bytes:
    return encode_batch(
        [NewRecord(k, v, timestamp=NOW) for k, v in pairs], now_ms=NOW, compression=codec
    )


VALUES = LogConfig(value_schema_validation=True)
KEYS = LogConfig(key_schema_validation=True)


@dataclass(frozen=True)
class Use:
    """What the registry holds of an id (see validator.SchemaIdUse)."""

    subjects: frozenset[str]
    record_names: tuple[str, ...] = ()


def registered(
    *ids: int, subjects: tuple[str, ...] = ("t-key", "t-value"), names: tuple[str, ...] = ()
) -> dict[int, Use]:
    """Ids the registry holds, under ``subjects`` (by default topic t's TopicNameStrategy
    subjects), their schemas named ``names``."""
    return {i: Use(frozenset(subjects), names) for i in ids}


def schema_refused(
    records: bytes, config: LogConfig, known: Mapping[int, Use] | None
) -> validator.SchemaIdsRefused:
    with pytest.raises(validator.SchemaIdsRefused) as caught:
        validate_for_leader(records, config, NOW, "t-0", known)
    return caught.value


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_values_with_a_known_id_are_kept_in_every_codec(codec: str) -> None:
    data = kv_batch((None, wire(1)), (b"k", wire(2, b"")), codec=compression.codec_id(codec))
    valid = validate_for_leader(data, VALUES, NOW, "t-0", registered(1, 2))
    assert bytes(valid.buffer) == data


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_value_without_the_prefix_or_with_an_unknown_id_refuses_the_batch(codec: str) -> None:
    data = kv_batch(
        (None, wire(1)),
        (None, b"plain bytes"),
        (None, wire(7)),
        (None, b"\x00\x00\x01"),  # shorter than magic byte and id
        (None, b"\x01" + wire(1)[1:]),  # another magic byte
        codec=compression.codec_id(codec),
    )
    error = schema_refused(data, VALUES, registered(1))
    assert error.code == ErrorCode.invalid_record
    assert [i for i, _ in error.record_errors] == [1, 2, 3, 4]
    assert error.unknown == frozenset({7})
    assert "schema id 7" in error.record_errors[1][1]
    assert "t-0" in error.message


def test_only_an_unknown_id_can_be_learnt_by_asking_the_registry_again() -> None:
    assert schema_refused(kv_batch((None, b"raw")), VALUES, registered()).unknown == frozenset()


def test_null_values_and_keys_pass_as_confluent_lets_tombstones_through() -> None:
    data = kv_batch((None, None), (None, wire(3)))
    assert validate_for_leader(data, VALUES, NOW, "t-0", registered(3)).headers
    assert validate_for_leader(data, KEYS, NOW, "t-0", registered()).headers


def test_keys_and_values_are_validated_each_by_its_own_config() -> None:
    data = kv_batch((b"raw key", wire(3)))
    assert validate_for_leader(data, VALUES, NOW, "t-0", registered(3)).headers
    assert [i for i, _ in schema_refused(data, KEYS, registered(3)).record_errors] == [0]
    both = LogConfig(key_schema_validation=True, value_schema_validation=True)
    assert validate_for_leader(kv_batch((wire(4), wire(3))), both, NOW, "t-0", registered(3, 4))


def test_an_id_under_another_subject_is_refused_and_may_be_learnt() -> None:
    """Confluent Server's subject check: the id must be registered under the subject the
    topic's strategy gives (TopicNameStrategy: t-value), not merely registered."""
    elsewhere = registered(3, subjects=("other-value",))
    error = schema_refused(kv_batch((None, wire(3))), VALUES, elsewhere)
    assert [i for i, _ in error.record_errors] == [0]
    assert "'t-value'" in error.record_errors[0][1]
    assert error.unknown == frozenset({3})  # a replay may find it registered under t-value
    both = LogConfig(key_schema_validation=True, value_schema_validation=True)
    key_only = registered(4, subjects=("t-key",))
    # Keys answer to t-key, values to t-value, even where they share a batch.
    assert validate_for_leader(kv_batch((wire(4), None)), both, NOW, "t-0", key_only).headers
    refused = schema_refused(kv_batch((None, wire(4)), (wire(4), None)), both, key_only)
    assert [i for i, _ in refused.record_errors] == [0]


def test_record_name_strategies_take_the_subject_from_the_schemas_name() -> None:
    by_record = LogConfig(
        value_schema_validation=True, value_subject_name_strategy=RECORD_NAME_STRATEGY
    )
    by_topic_record = LogConfig(
        value_schema_validation=True, value_subject_name_strategy=TOPIC_RECORD_NAME_STRATEGY
    )
    data = kv_batch((None, wire(5)))
    named = registered(5, subjects=("shop.Order",), names=("shop.Order",))
    assert validate_for_leader(data, by_record, NOW, "t-0", named).headers
    schema_refused(data, by_topic_record, named)
    schema_refused(data, VALUES, named)  # TopicNameStrategy wants t-value
    topic_named = registered(5, subjects=("t-shop.Order",), names=("shop.Order",))
    assert validate_for_leader(data, by_topic_record, NOW, "t-0", topic_named).headers
    # A Protobuf file names several messages: the record may be any of them.
    messages = registered(5, subjects=("shop.Line",), names=("shop.Order", "shop.Line"))
    assert validate_for_leader(data, by_record, NOW, "t-0", messages).headers
    nameless = registered(5, subjects=("t-value",))
    assert "no record name" in schema_refused(data, by_record, nameless).record_errors[0][1]


def test_a_topic_without_validation_takes_anything_and_needs_no_registry() -> None:
    data = kv_batch((b"raw", b"raw"))
    assert validate_for_leader(data, LogConfig(), NOW, "t-0", None).headers


def test_validation_without_a_registry_refuses_with_invalid_record() -> None:
    error = rejected_with(kv_batch((None, wire(1))), VALUES, None)
    assert error.code == ErrorCode.invalid_record
    assert "schema registry" in error.message
    assert not isinstance(error, validator.SchemaIdsRefused)


def rejected_with(
    records: bytes, config: LogConfig, known: Mapping[int, Use] | None
) -> RecordsRejected:
    with pytest.raises(RecordsRejected) as caught:
        validate_for_leader(records, config, NOW, "t-0", known)
    return caught.value
