"""A leader's append policy (Kafka's appendRecordsToLeader) on a real log, no sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.cluster.partition import Partition
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage import LogConfig, PartitionLog
from odradek.storage.validator import RecordsRejected

NOW = 1_700_000_000_000


def partition(tmp_path: Path, config: LogConfig | None = None, **kwargs: int) -> Partition:
    log = PartitionLog.open(tmp_path / "t-0", config or LogConfig(), ManualClock())
    return Partition("t", 0, log, **kwargs)


def records(count: int) -> bytes:
    return encode_batch([NewRecord(b"k", b"v") for _ in range(count)], now_ms=NOW)


def test_appends_assign_offsets_and_move_the_high_watermark(tmp_path: Path) -> None:
    p = partition(tmp_path)
    first = p.append_as_leader(records(3), 1, NOW)
    second = p.append_as_leader(records(2), -1, NOW)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert p.high_watermark == 5
    assert p.replicated(5) == ErrorCode.none
    assert p.replicated(6) is None


def test_acks_all_below_min_insync_is_refused_before_the_append(tmp_path: Path) -> None:
    p = partition(tmp_path, min_insync_replicas=2)
    with pytest.raises(KafkaError) as caught:
        p.append_as_leader(records(1), -1, NOW)
    assert caught.value.code == ErrorCode.not_enough_replicas
    assert p.log.log_end_offset == 0
    assert p.append_as_leader(records(1), 1, NOW).first_offset == 0


def test_a_commit_seen_after_the_in_sync_set_shrank_says_so(tmp_path: Path) -> None:
    p = partition(tmp_path)
    p.append_as_leader(records(1), -1, NOW)
    p.min_insync_replicas = 2  # as a config change while the produce waited
    assert p.replicated(1) == ErrorCode.not_enough_replicas_after_append


def test_refused_records_leave_the_log_unchanged(tmp_path: Path) -> None:
    p = partition(tmp_path, LogConfig(compact=True))
    keyless = encode_batch([NewRecord(None, b"v")], now_ms=NOW)
    with pytest.raises(RecordsRejected):
        p.append_as_leader(keyless, 1, NOW)
    assert p.log.log_end_offset == 0


def test_an_append_wakes_the_waiters_once(tmp_path: Path) -> None:
    p = partition(tmp_path)
    woken: list[int] = []
    p.add_waiter(lambda: woken.append(1))
    p.append_as_leader(records(1), 1, NOW)
    p.append_as_leader(records(1), 1, NOW)
    assert woken == [1]
