"""Transactions in the partition log: producer state kept on every append, .snapshot files,
.txnindex entries, the last stable offset, and truncation."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest

from odradek.protocol.control import encode_end_txn_marker, read_end_txn_marker
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.record_batch import iter_headers, read_header
from odradek.protocol.records import encode_batch
from odradek.storage import LogConfig, PartitionLog
from odradek.storage.producer_state import ProducerStateManager, snapshot_offsets
from odradek.storage.txn_index import ENTRY_SIZE, TransactionIndex

from .conftest import append

NOW = 1_700_000_000_000


def txn_batch(producer_id: int, sequence: int, count: int = 1, epoch: int = 0) -> bytes:
    return encode_batch(
        [(None, b"t%d" % i, (), NOW) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=True,
        now_ms=NOW,
    )


def idempotent_batch(producer_id: int, sequence: int, epoch: int = 0) -> bytes:
    return encode_batch(
        [(None, b"i", (), NOW)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        now_ms=NOW,
    )


def marker(producer_id: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return encode_end_txn_marker(producer_id, epoch, coordinator_epoch, commit=commit, now_ms=NOW)


def plain_batch() -> bytes:
    return encode_batch([(None, b"p", (), NOW)], now_ms=NOW)


def test_marker_batch_round_trips() -> None:
    batch = marker(42, commit=True, epoch=3, coordinator_epoch=7)
    header = read_header(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, -1)
    decoded = read_end_txn_marker(batch, header)
    assert decoded.commit and decoded.coordinator_epoch == 7
    assert not read_end_txn_marker(marker(1, commit=False), read_header(marker(1, False))).commit


def test_lso_stops_at_an_open_transaction_until_its_marker_is_replicated(
    open_log: Callable[..., PartitionLog],
) -> None:
    log = open_log()
    append(log, plain_batch())  # 0
    append(log, txn_batch(7, 0, count=2))  # 1-2
    append(log, plain_batch())  # 3
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset == 1
    assert log.last_stable_offset == 1
    assert log.producers.has_ongoing_transaction(7, 0)
    assert not log.producers.has_ongoing_transaction(7, 1)
    append(log, marker(7, commit=True))  # 4
    assert not log.producers.has_ongoing_transaction(7, 0)
    # Decided, but the marker is not below the high watermark yet.
    assert log.last_stable_offset == 1
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset is None
    assert log.last_stable_offset == log.high_watermark == 5


def test_the_lso_is_never_above_the_high_watermark(open_log: Callable[..., PartitionLog]) -> None:
    log = open_log()
    append(log, plain_batch(), plain_batch())
    append(log, txn_batch(7, 0))
    log.update_high_watermark(1)
    assert log.last_stable_offset == 1


def test_an_abort_goes_in_the_txnindex_and_is_found_by_readers(
    open_log: Callable[..., PartitionLog],
) -> None:
    log = open_log()
    append(log, txn_batch(7, 0, count=3))  # 0-2
    append(log, txn_batch(8, 0))  # 3
    append(log, marker(7, commit=False))  # 4: aborts 0-2 while 8's transaction is open
    append(log, marker(8, commit=True))  # 5
    log.update_high_watermark(log.log_end_offset)
    active = log.segments[-1]
    assert active.txn_index.path.stat().st_size == ENTRY_SIZE
    (entry,) = TransactionIndex(active.txn_index.path).entries
    # The LSO once 7 was aborted was 8's first offset.
    assert (entry.producer_id, entry.first_offset, entry.last_offset) == (7, 0, 4)
    assert entry.last_stable_offset == 3
    assert log.aborted_transactions(0, 6) == [(7, 0)]
    assert log.aborted_transactions(5, 6) == []  # the marker is before the range
    assert log.aborted_transactions(0, 0) == []


def test_markers_are_checked_for_stale_epochs(open_log: Callable[..., PartitionLog]) -> None:
    log = open_log()
    append(log, txn_batch(7, 0, epoch=2))
    append(log, marker(7, commit=False, epoch=2, coordinator_epoch=5))
    with pytest.raises(KafkaError) as raised:
        log.producers.check_marker(7, 1, 5)
    assert raised.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(KafkaError) as raised:
        log.producers.check_marker(7, 2, 4)
    assert raised.value.code == ErrorCode.transaction_coordinator_fenced
    log.producers.check_marker(7, 3, 5)  # a newer epoch and the same coordinator: fine
    # Transaction version 2: the coordinator bumped the epoch for the marker; the same epoch is
    # only a retry of a marker already written.
    log.producers.check_marker(7, 2, 5, transaction_version=2)
    append(log, txn_batch(7, 0, epoch=3))
    with pytest.raises(KafkaError) as raised:
        log.producers.check_marker(7, 3, 5, transaction_version=2)
    assert raised.value.code == ErrorCode.invalid_producer_epoch
    log.producers.check_marker(7, 4, 5, transaction_version=2)
    log.producers.check_marker(99, 0, 0)  # a producer never seen: fine (Kafka appends it)


def test_a_plain_batch_during_a_transaction_is_invalid_txn_state(
    open_log: Callable[..., PartitionLog],
) -> None:
    log = open_log()
    append(log, txn_batch(7, 0))
    with pytest.raises(KafkaError) as raised:
        log.producers.check(read_header(idempotent_batch(7, 1)))
    assert raised.value.code == ErrorCode.invalid_txn_state
    # The next transactional batch follows on.
    assert log.producers.check(read_header(txn_batch(7, 1))) is None


def test_a_clean_close_snapshots_the_state_and_reopening_replays_nothing(
    open_log: Callable[..., PartitionLog], tmp_path: Path
) -> None:
    log = open_log()
    append(log, idempotent_batch(5, 0))
    append(log, txn_batch(7, 0, count=2))
    append(log, txn_batch(8, 0))
    append(log, marker(8, commit=False, coordinator_epoch=3))
    log.update_high_watermark(log.log_end_offset)
    log.flush()
    log.close()
    directory = tmp_path / "topic-0"
    assert snapshot_offsets(directory) == [5]
    reopened = open_log(high_watermark=5)
    views = {v.producer_id: v for v in reopened.producers.producers()}
    assert views[5].last_sequence == 0 and views[5].txn_first_offset == -1
    assert views[7].txn_first_offset == 1 and views[7].last_sequence == 1
    assert views[8].coordinator_epoch == 3 and views[8].txn_first_offset == -1
    assert reopened.first_unstable_offset == 1
    retry = reopened.producers.check(read_header(idempotent_batch(5, 0)))
    assert retry is not None and retry.first_offset == 0
    reopened.close()


def test_the_snapshot_file_has_kafkas_layout(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.update(read_header(txn_batch(7, 10, count=3, epoch=4)), 20)
    state.write_snapshot(23, sync=True)
    data = (tmp_path / "00000000000000000023.snapshot").read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c.crc32c(data[6:])
    entry = struct.unpack_from(">qhiqiqiq", data, 10)
    assert entry == (7, 4, 12, 22, 2, NOW, -1, 20)
    assert len(data) == 10 + 46


def test_after_a_crash_the_tail_after_the_last_snapshot_is_replayed(
    open_log: Callable[..., PartitionLog], tmp_path: Path
) -> None:
    config = LogConfig(segment_bytes=300)
    log = open_log(config)
    append(log, txn_batch(7, 0))
    while log.segment_count() < 2:
        append(log, plain_batch())
    rolled_at = log.segments[-1].base_offset
    append(log, txn_batch(8, 0))
    append(log, marker(7, commit=False))
    # A crash: no close, so no snapshot at the log end; only the roll's.
    directory = tmp_path / "topic-0"
    assert snapshot_offsets(directory) == [rolled_at]
    end = log.log_end_offset
    reopened = PartitionLog.open(
        directory,
        config,
        log._clock,
        recovery_point=rolled_at,
        needs_recovery=True,
        high_watermark=end,
    )
    assert reopened.log_end_offset == end
    assert reopened.first_unstable_offset == rolled_at + 1  # 8's transaction, replayed
    assert reopened.aborted_transactions(0, end) == [(7, 0)]  # the txnindex entry, rebuilt
    assert len(reopened.segments[-1].txn_index.entries) == 1
    reopened.close()


def test_a_torn_snapshot_is_dropped_for_an_older_one(
    open_log: Callable[..., PartitionLog], tmp_path: Path
) -> None:
    log = open_log()
    append(log, txn_batch(7, 0))
    log.close()
    directory = tmp_path / "topic-0"
    (directory / "00000000000000000001.snapshot").write_bytes(b"\x00\x01garbage")
    reopened = open_log()
    assert snapshot_offsets(directory) == []
    # No readable snapshot: the batches are replayed.
    assert reopened.first_unstable_offset == 0
    reopened.close()


def test_truncation_reloads_producer_state_and_cuts_the_txnindex(
    open_log: Callable[..., PartitionLog], tmp_path: Path
) -> None:
    config = LogConfig(segment_bytes=300)
    log = open_log(config)
    append(log, txn_batch(7, 0))  # 0
    append(log, marker(7, commit=False))  # 1
    while log.segment_count() < 2:
        append(log, plain_batch())
    base = log.log_end_offset
    append(log, txn_batch(8, 0))  # base, in the second segment
    append(log, marker(8, commit=False))  # base + 1
    append(log, txn_batch(9, 0))  # base + 2
    assert log.aborted_transactions(0, log.log_end_offset) == [(7, 0), (8, base)]
    log.truncate_to(base + 1)
    assert log.log_end_offset == base + 1
    assert log.aborted_transactions(0, log.log_end_offset) == [(7, 0)]
    assert log.producers.has_ongoing_transaction(8, 0)
    assert not log.producers.has_ongoing_transaction(9, 0)
    assert log.first_unstable_offset == base
    assert all(o <= base + 1 for o in snapshot_offsets(tmp_path / "topic-0"))
    log.truncate_to(1)
    assert log.aborted_transactions(0, 1) == []
    assert log.producers.has_ongoing_transaction(7, 0)
    assert snapshot_offsets(tmp_path / "topic-0") == []
    log.close()


def test_retention_deletes_old_snapshots(
    open_log: Callable[..., PartitionLog], tmp_path: Path
) -> None:
    config = LogConfig(segment_bytes=200, retention_bytes=1)
    log = open_log(config)
    for _ in range(30):
        append(log, plain_batch())
    directory = tmp_path / "topic-0"
    bases = [s.base_offset for s in log.segments]
    assert snapshot_offsets(directory) == bases[1:]
    log.apply_retention()
    assert log.segment_count() == 1
    assert snapshot_offsets(directory) == [log.segments[0].base_offset]
    log.close()


def test_a_follower_keeps_producer_state(open_log: Callable[..., PartitionLog]) -> None:
    leader = open_log()
    append(leader, txn_batch(7, 0), marker(7, commit=False))
    data = leader.read(0, 1 << 20)
    assert data is not None
    raw = data.read_bytes()
    leader.close()
    shutil.rmtree(leader.directory)
    follower = open_log()
    follower.append_as_follower(raw, list(iter_headers(raw)))
    assert follower.aborted_transactions(0, 2) == [(7, 0)]
    follower.close()


def test_a_small_log_without_producers_gets_no_snapshot_and_reopens_the_same(
    open_log: Callable[..., PartitionLog], tmp_path: Path
) -> None:
    log = open_log()
    append(log, encode_batch([(None, b"v", (), NOW)], now_ms=NOW))  # no producer id
    log.close(flush=True)
    directory = tmp_path / "topic-0"
    assert snapshot_offsets(directory) == []
    reopened = open_log()
    assert reopened.producers.is_empty
    append(reopened, idempotent_batch(5, 0))
    reopened.close(flush=True)
    assert snapshot_offsets(directory) == [2]  # a producer: the snapshot is written
    again = open_log()
    assert [v.producer_id for v in again.producers.producers()] == [5]
    again.close(flush=True)
