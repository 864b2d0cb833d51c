from __future__ import annotations

from pathlib import Path

from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager

from .conftest import BATCH_SIZE, append, make_batch, read_all

CONFIG = LogConfig(segment_bytes=2 * BATCH_SIZE)


def configs(topic: str) -> LogConfig:
    return CONFIG


def opened(dirs: list[Path], clock: ManualClock) -> LogManager:
    manager = LogManager(dirs, clock)
    manager.open(configs)
    return manager


def test_clean_close_and_reopen_keep_everything(tmp_path: Path, clock: ManualClock) -> None:
    manager = opened([tmp_path], clock)
    log = manager.create("orders-eu", 3, CONFIG)
    for _ in range(5):
        append(log, make_batch(2))
    assert manager.create("orders-eu", 3, CONFIG) is log
    manager.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()

    manager = opened([tmp_path], clock)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    reopened = manager.get("orders-eu", 3)
    assert reopened is not None and reopened is not log
    assert (reopened.topic, reopened.partition) == ("orders-eu", 3)
    assert (reopened.log_end_offset, reopened.recovery_point) == (10, 10)
    assert reopened.segment_count() == 5  # a 2-record batch fills a segment
    assert [h.base_offset for h in read_all(reopened)] == [0, 2, 4, 6, 8]
    assert manager.get("orders-eu", 4) is None


def test_checkpoint_files_use_kafkas_text_format(tmp_path: Path, clock: ManualClock) -> None:
    manager = opened([tmp_path], clock)
    a = manager.create("a-b", 0, CONFIG)
    b = manager.create("c", 1, CONFIG)
    for _ in range(3):
        append(a, make_batch())
    append(b, make_batch(4))
    a.flush()
    append(a, make_batch())
    a.delete_records_before(2)
    manager.checkpoint()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\na-b 0 3\nc 1 0\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n2\na-b 0 2\nc 1 0\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_unclean_restart_recovers_from_the_checkpointed_point(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = opened([tmp_path], clock)
    log = manager.create("t", 0, CONFIG)
    for _ in range(5):
        append(log, make_batch())
    log.delete_records_before(2)
    log.flush()
    manager.checkpoint()
    append(log, make_batch())
    segment = log.directory / f"{4:020d}.log"
    with segment.open("ab") as f:
        f.write(b"\x00" * 30)  # a torn write; the process dies without closing
    log.close()

    manager = opened([tmp_path], clock)
    log2 = manager.get("t", 0)
    assert log2 is not None
    assert (log2.log_start_offset, log2.log_end_offset, log2.recovery_point) == (2, 6, 5)
    assert segment.stat().st_size == 2 * BATCH_SIZE


def test_an_unclean_open_rewrites_stale_checkpoints_at_once(
    tmp_path: Path, clock: ManualClock
) -> None:
    manager = opened([tmp_path], clock)
    append(manager.create("t", 0, CONFIG), make_batch())
    manager.checkpoint()
    # A crash left entries for a partition now gone and a point past a log's end.
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint.write_text("0\n2\nt 0 9\ngone 0 7\n")

    manager = opened([tmp_path], clock)
    assert checkpoint.read_text() == "0\n1\nt 0 1\n"


def test_new_partitions_go_round_robin_over_log_dirs(tmp_path: Path, clock: ManualClock) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = opened(dirs, clock)
    for partition in range(4):
        append(manager.create("t", partition, CONFIG), make_batch())
    assert sorted(p.name for p in dirs[0].iterdir() if p.is_dir()) == ["t-0", "t-2"]
    assert sorted(p.name for p in dirs[1].iterdir() if p.is_dir()) == ["t-1", "t-3"]
    manager.close()
    assert (dirs[1] / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 1 1\nt 3 1\n"

    manager = opened(dirs, clock)
    assert sorted((log.topic, log.partition) for log in manager.all_logs()) == [
        ("t", p) for p in range(4)
    ]


def test_delete_and_leftovers_of_deletion(tmp_path: Path, clock: ManualClock) -> None:
    manager = opened([tmp_path], clock)
    append(manager.create("t", 0, CONFIG), make_batch())
    manager.create("t", 1, CONFIG)
    manager.delete("t", 0)
    assert manager.get("t", 0) is None
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["t-1"]
    leftover = tmp_path / "t-7.0123abcd-delete"
    leftover.mkdir()
    (leftover / f"{0:020d}.log").write_bytes(b"x")
    manager.close()

    manager = opened([tmp_path], clock)
    assert not leftover.exists()
    assert [(log.topic, log.partition) for log in manager.all_logs()] == [("t", 1)]


def test_flush_due_and_update_config(tmp_path: Path, clock: ManualClock) -> None:
    manager = opened([tmp_path], clock)
    a = manager.create("a", 0, CONFIG)
    b = manager.create("b", 0, CONFIG)
    manager.update_config("a", LogConfig(flush_ms=1000))
    append(a, make_batch())
    append(b, make_batch())
    clock.advance(999)
    manager.flush_due()
    assert a.recovery_point == 0
    clock.advance(1)
    manager.flush_due()  # hands the fsync to the flusher thread
    assert manager.wait_for_flushes(timeout=30)
    assert (a.recovery_point, b.recovery_point) == (1, 0)
    assert a.config.flush_ms == 1000 and b.config is CONFIG
