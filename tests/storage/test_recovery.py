from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.protocol.record_batch import crc_of
from odradek.storage import LogConfig, PartitionLog

from .conftest import BATCH_SIZE, append, headers_of, make_batch, read_all

Opener = Callable[..., PartitionLog]
CONFIG = LogConfig(segment_bytes=4 * BATCH_SIZE, index_interval_bytes=BATCH_SIZE)


def segment_file(tmp_path: Path, base: int, suffix: str = ".log") -> Path:
    return tmp_path / "topic-0" / f"{base:020d}{suffix}"


def filled_log(open_log: Opener, batches: int) -> PartitionLog:
    """A log of single-record batches, 4 to a segment, closed as a killed process leaves it."""
    log = open_log(CONFIG)
    for i in range(batches):
        append(log, make_batch(timestamp=1000 + i))
    log.close()
    return log


def flip_byte(path: Path, position: int) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ 0xFF]))


def test_a_torn_last_batch_is_cut_off(open_log: Opener, tmp_path: Path) -> None:
    filled_log(open_log, 6)
    os.truncate(segment_file(tmp_path, 4), BATCH_SIZE + 20)
    log = open_log(CONFIG, needs_recovery=True)
    assert log.log_end_offset == 5
    assert segment_file(tmp_path, 4).stat().st_size == BATCH_SIZE
    assert [h.base_offset for h in read_all(log)] == [0, 1, 2, 3, 4]
    assert append(log, make_batch()).first_offset == 5
    assert [h.base_offset for h in read_all(log)] == [0, 1, 2, 3, 4, 5]


def test_garbage_after_the_last_batch_is_cut_off(open_log: Opener, tmp_path: Path) -> None:
    filled_log(open_log, 6)
    with segment_file(tmp_path, 4).open("ab") as f:
        f.write(os.urandom(100))
    log = open_log(CONFIG, needs_recovery=True)
    assert log.log_end_offset == 6
    assert log.size_bytes() == 6 * BATCH_SIZE


def test_a_corrupt_last_batch_fails_its_crc_and_goes(open_log: Opener, tmp_path: Path) -> None:
    filled_log(open_log, 6)
    flip_byte(segment_file(tmp_path, 4), 2 * BATCH_SIZE - 3)  # inside the last record
    log = open_log(CONFIG, needs_recovery=True)
    assert log.log_end_offset == 5
    assert [h.base_offset for h in read_all(log)] == [0, 1, 2, 3, 4]


def test_a_corrupt_batch_in_an_earlier_segment_drops_later_ones(
    open_log: Opener, tmp_path: Path
) -> None:
    filled_log(open_log, 10)
    flip_byte(segment_file(tmp_path, 4), BATCH_SIZE + 70)  # in batch 5
    log = open_log(CONFIG, needs_recovery=True, recovery_point=0)
    assert (log.log_end_offset, log.segment_count()) == (5, 2)
    assert not segment_file(tmp_path, 8).exists()
    assert not segment_file(tmp_path, 8, ".index").exists()


def test_segments_below_the_recovery_point_are_not_reread(open_log: Opener, tmp_path: Path) -> None:
    filled_log(open_log, 10)  # segments 0, 4, 8
    flip_byte(segment_file(tmp_path, 0), 4 * BATCH_SIZE - 3)  # batch 3, below the point
    flip_byte(segment_file(tmp_path, 4), 4 * BATCH_SIZE - 3)  # batch 7, at and after it
    log = open_log(CONFIG, needs_recovery=True, recovery_point=4)
    # As in Kafka, only the segments from the one holding the recovery point on are checked.
    assert (log.log_end_offset, log.segment_count()) == (7, 2)
    assert log.recovery_point == 4
    piece = log.read(3, BATCH_SIZE)
    assert piece is not None
    [header] = headers_of(piece.read_bytes())
    assert header.base_offset == 3 and crc_of(piece.read_bytes(), header) != header.crc


def test_in_the_segment_holding_the_recovery_point_batches_below_it_are_not_reread(
    open_log: Opener, tmp_path: Path
) -> None:
    filled_log(open_log, 10)  # segments 0, 4, 8
    flip_byte(segment_file(tmp_path, 4), 2 * BATCH_SIZE - 3)  # batch 5, below the point
    flip_byte(segment_file(tmp_path, 4), 4 * BATCH_SIZE - 3)  # batch 7, after it
    log = open_log(CONFIG, needs_recovery=True, recovery_point=6)
    # Batch 5 was fsynced before the crash, so its CRC is not checked: recovery rereads the
    # unflushed tail, not the whole segment it starts in.
    assert (log.log_end_offset, log.segment_count()) == (7, 2)
    assert [h.base_offset for h in read_all(log)] == list(range(7))


def test_a_clean_open_trusts_the_files(open_log: Opener, tmp_path: Path) -> None:
    filled_log(open_log, 6)
    flip_byte(segment_file(tmp_path, 4), 2 * BATCH_SIZE - 3)
    log = open_log(CONFIG)
    assert log.log_end_offset == 6
    assert log.recovery_point == 6


def test_a_missing_index_is_rebuilt(open_log: Opener, tmp_path: Path) -> None:
    filled_log(open_log, 10)
    index = segment_file(tmp_path, 0, ".index")
    timeindex = segment_file(tmp_path, 0, ".timeindex")
    expected = index.read_bytes(), timeindex.read_bytes()
    assert expected[0]  # there were entries to lose
    index.unlink()
    timeindex.unlink()
    log = open_log(CONFIG)
    assert (index.read_bytes(), timeindex.read_bytes()) == expected
    assert [h.base_offset for h in read_all(log)] == list(range(10))
    assert log.max_timestamp_offset() == (9, 1009)


@pytest.mark.parametrize(
    "corruption",
    [
        b"\x00\x00\x00",  # a torn entry
        struct.pack(">ii", 9, 10_000),  # an entry past the end of the log file
        struct.pack(">ii", 1, 250),  # an entry whose offset does not increase
        struct.pack(">ii", 5, 250),  # an entry that points inside a batch
    ],
)
def test_a_corrupt_index_is_rebuilt(
    open_log: Opener, tmp_path: Path, corruption: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    filled_log(open_log, 10)
    index = segment_file(tmp_path, 4, ".index")
    expected = index.read_bytes()
    with index.open("ab") as f:
        f.write(corruption)
    log = open_log(CONFIG, needs_recovery=True, recovery_point=10)
    assert "rebuilding the indexes of" in caplog.text
    assert index.read_bytes() == expected
    for offset in range(10):
        piece = log.read(offset, 1)
        assert piece is not None
        assert headers_of(piece.read_bytes())[0].base_offset == offset


def test_an_empty_active_segment(open_log: Opener, tmp_path: Path) -> None:
    filled_log(open_log, 4)
    segment_file(tmp_path, 4).touch()  # as a crash right after a roll leaves it
    log = open_log(CONFIG, needs_recovery=True)
    assert (log.log_end_offset, log.segment_count()) == (4, 2)
    assert append(log, make_batch()).first_offset == 4


def test_a_zero_length_log_file_alone(open_log: Opener, tmp_path: Path) -> None:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    segment_file(tmp_path, 42).touch()
    log = open_log(CONFIG, needs_recovery=True)
    assert (log.log_start_offset, log.log_end_offset) == (42, 42)
    log.flush()
    assert not segment_file(tmp_path, 42, ".index").exists()  # no entries, no file
    assert append(log, make_batch()).first_offset == 42


def test_a_directory_with_only_indexes(open_log: Opener, tmp_path: Path) -> None:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    segment_file(tmp_path, 7, ".index").write_bytes(struct.pack(">ii", 1, 100))
    segment_file(tmp_path, 7, ".timeindex").touch()
    log = open_log(CONFIG, needs_recovery=True, log_start_offset=3)
    assert (log.log_start_offset, log.log_end_offset) == (3, 3)
    assert not segment_file(tmp_path, 7, ".index").exists()
    assert append(log, make_batch()).first_offset == 3


def test_a_log_start_past_what_survived_starts_the_log_afresh(
    open_log: Opener, tmp_path: Path
) -> None:
    filled_log(open_log, 6)
    log = open_log(CONFIG, needs_recovery=True, log_start_offset=9)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count()) == (9, 9, 1)
    assert append(log, make_batch()).first_offset == 9


def test_an_index_without_entries_has_no_file(
    open_log: Opener, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = LogConfig(index_interval_bytes=4 * BATCH_SIZE)
    log = open_log(config)
    for i in range(3):  # below the index interval: no entry
        append(log, make_batch(timestamp=1000 + i))
    log.flush()
    log.close()
    assert not segment_file(tmp_path, 0, ".index").exists()
    assert not segment_file(tmp_path, 0, ".timeindex").exists()
    log = open_log(config)  # clean: the missing files read as empty, nothing rebuilt
    assert "rebuilding" not in caplog.text
    assert log.log_end_offset == 3
    assert log.max_timestamp_offset() == (2, 1002)
    log.close()
    # kill -9 style: reopened without a clean stop, recovery rebuilds the same (no files)
    log = open_log(config, needs_recovery=True, recovery_point=0)
    assert [h.base_offset for h in read_all(log)] == [0, 1, 2]
    log.flush()
    assert not segment_file(tmp_path, 0, ".index").exists()


def test_a_missing_time_index_beside_offset_entries_is_rebuilt(
    open_log: Opener, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    filled_log(open_log, 10)
    timeindex = segment_file(tmp_path, 0, ".timeindex")
    expected = timeindex.read_bytes()
    timeindex.unlink()
    log = open_log(CONFIG)
    assert "time index file is missing" in caplog.text
    assert timeindex.read_bytes() == expected
    assert log.max_timestamp_offset() == (9, 1009)


def test_opening_looks_only_for_the_index_files_the_directory_lists(
    open_log: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(LogConfig(index_interval_bytes=4 * BATCH_SIZE))
    append(log, make_batch(timestamp=1000))
    log.flush()
    log.close()
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: str | os.PathLike[str], *args: int, **kwargs: int) -> int:
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)
    log = open_log(LogConfig(index_interval_bytes=4 * BATCH_SIZE))
    assert not [p for p in opened if p.endswith(("index", ".timeindex", ".txnindex"))]
    assert log.max_timestamp_offset() == (0, 1000)
    assert log.aborted_transactions(0, 1) == []


def test_a_new_log_makes_its_directory_and_log_file_and_reads_nothing(
    open_log: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    listed: list[str] = []
    real_open, real_listdir = os.open, os.listdir

    def recording_open(path: str | os.PathLike[str], *args: int, **kwargs: int) -> int:
        opened.append(os.path.basename(os.fspath(path)))
        return real_open(path, *args, **kwargs)

    def recording_listdir(path: str | os.PathLike[str]) -> list[str]:
        listed.append(os.fspath(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "open", recording_open)
    monkeypatch.setattr(os, "listdir", recording_listdir)
    log = open_log(CONFIG)
    assert opened == [f"{0:020d}.log"]
    assert listed == []
    monkeypatch.undo()
    append(log, make_batch(timestamp=1000))
    log.close(flush=True)
    log = open_log(CONFIG)
    assert [h.base_offset for h in read_all(log)] == [0]


def test_a_log_expected_new_but_there_is_opened_as_it_is(open_log: Opener) -> None:
    log = open_log(CONFIG)
    append(log, make_batch(timestamp=1000))
    log.close(flush=True)
    log = open_log(CONFIG, new=True)
    assert [h.base_offset for h in read_all(log)] == [0]
