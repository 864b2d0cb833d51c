"""Idempotent producer checks: sequences follow on, retries are recognised, old epochs fenced."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.protocol.control import EndTxnMarker, encode_end_txn_marker
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import read_header
from odradek.protocol.records import encode_batch
from odradek.storage.producer_state import ProducerStateManager


def header(producer_id: int, epoch: int, sequence: int, count: int = 1):  # type: ignore[no-untyped-def]
    batch = encode_batch(
        [(None, b"v", (), None)] * count,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        now_ms=1,
    )
    return read_header(batch)


def test_sequences_follow_on_and_retries_return_the_first_offsets() -> None:
    table = ProducerStateManager(Path("unused-no-snapshots"))
    first = header(7, 0, 0, count=3)
    assert table.check(first) is None
    table.update(first, 10)
    second = header(7, 0, 3, count=2)
    assert table.check(second) is None
    table.update(second, 13)

    retry = table.check(header(7, 0, 0, count=3))
    assert retry is not None and (retry.first_offset, retry.last_offset) == (10, 12)
    retry = table.check(header(7, 0, 3, count=2))
    assert retry is not None and (retry.first_offset, retry.last_offset) == (13, 14)


def test_a_gap_is_out_of_order() -> None:
    table = ProducerStateManager(Path("unused-no-snapshots"))
    table.update(header(7, 0, 0), 0)
    with pytest.raises(KafkaError) as raised:
        table.check(header(7, 0, 5))
    assert raised.value.code == ErrorCode.out_of_order_sequence_number


def test_old_epochs_are_fenced_and_new_ones_restart_at_zero() -> None:
    table = ProducerStateManager(Path("unused-no-snapshots"))
    table.update(header(7, 2, 0), 0)
    with pytest.raises(KafkaError) as raised:
        table.check(header(7, 1, 1))
    assert raised.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as raised:
        table.check(header(7, 3, 4))
    assert raised.value.code == ErrorCode.out_of_order_sequence_number
    assert table.check(header(7, 3, 0)) is None


def test_only_the_last_five_batches_are_remembered() -> None:
    table = ProducerStateManager(Path("unused-no-snapshots"))
    for i in range(6):
        table.update(header(7, 0, i), i)
    assert table.check(header(7, 0, 1)) is not None
    with pytest.raises(KafkaError):
        table.check(header(7, 0, 0))


def test_non_idempotent_batches_are_not_checked() -> None:
    table = ProducerStateManager(Path("unused-no-snapshots"))
    plain = header(-1, -1, -1)
    assert table.check(plain) is None
    table.update(plain, 0)
    assert table.check(plain) is None


def test_rebuild_from_headers_recognises_retries() -> None:
    appended = encode_batch(
        [(None, b"v", (), None)] * 2,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        base_offset=40,
        now_ms=1,
    )
    table = ProducerStateManager(Path("unused-no-snapshots"))
    table.update(read_header(appended), 40)
    retry = table.check(header(9, 0, 0, count=2))
    assert retry is not None and retry.first_offset == 40


def test_batches_of_one_request_follow_each_other() -> None:
    # Two batches of a known producer in one Produce request: the second follows the first,
    # which the table does not hold until both are appended (Kafka's per-request append info).
    table = ProducerStateManager(Path("unused-no-snapshots"))
    table.update(header(7, 0, 0, count=3), 0)
    assert table.check_request([header(7, 0, 3, count=3), header(7, 0, 6, count=3)]) == [
        None,
        None,
    ]
    with pytest.raises(KafkaError) as raised:
        table.check_request([header(7, 0, 3, count=3), header(7, 0, 7)])
    assert raised.value.code == ErrorCode.out_of_order_sequence_number


def marker_header(producer_id: int, epoch: int):  # type: ignore[no-untyped-def]
    return read_header(encode_end_txn_marker(producer_id, epoch, 0, commit=True, now_ms=1))


def test_an_epoch_a_marker_bumped_starts_at_sequence_zero() -> None:
    """Transaction version 2: the commit marker carries the producer's next epoch. The next
    transaction's second batch, arriving before its first (refused for the moment), must not
    be taken, or the first would be out of order for good."""
    table = ProducerStateManager(Path("unused-no-snapshots"))
    first = header(7, 0, 0, count=30)
    table.update(first, 0)
    marker = marker_header(7, 1)
    table.update(marker, 30, EndTxnMarker(commit=True, coordinator_epoch=0))
    with pytest.raises(KafkaError) as raised:
        table.check(header(7, 1, 10, count=20))
    assert raised.value.code == ErrorCode.out_of_order_sequence_number
    assert table.check(header(7, 1, 0, count=10)) is None


def test_a_producer_a_marker_introduced_starts_at_sequence_zero() -> None:
    table = ProducerStateManager(Path("unused-no-snapshots"))
    table.update(marker_header(7, 3), 0, EndTxnMarker(commit=False, coordinator_epoch=0))
    with pytest.raises(KafkaError) as raised:
        table.check(header(7, 3, 5))
    assert raised.value.code == ErrorCode.out_of_order_sequence_number
    assert table.check(header(7, 3, 0)) is None
