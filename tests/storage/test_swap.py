"""A crash at any step of a cleaning pass leaves the old log or the new one, never a mix.

The crash hook copies the whole data directory at each step, which is what a kill -9 there
would leave on disk (the page cache survives a killed process); each copy is then opened as a
broker opens its data after a crash.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from odradek.clock import ManualClock
from odradek.storage import LogConfig, LogManager, swap
from odradek.storage.cleaner import LogCleaner

from .conftest import append, keyed_batch, records_of

Record = tuple[int, bytes | None, bytes | None]
CONFIG = LogConfig(
    segment_bytes=600,
    index_interval_bytes=100,
    delete=False,
    compact=True,
    min_cleanable_dirty_ratio=0.0,
)


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".tmp"))]


def test_a_crash_at_any_step_leaves_the_old_or_the_new_segments(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    manager = LogManager([data], clock)
    manager.open(lambda topic: CONFIG)
    log = manager.create("table", 0, CONFIG)
    for r in range(24):
        append(log, keyed_batch([(f"k{r % 7}".encode(), f"v{r}".encode()), (b"x", b"y" * 20)]))
    manager.checkpoint()
    before = records_of(log)

    snapshots: list[tuple[str, Path]] = []

    def snapshot(step: str) -> None:
        target = tmp_path / f"crash-{len(snapshots)}"
        shutil.copytree(data, target)
        snapshots.append((step, target))

    monkeypatch.setattr(swap, "crash_hook", snapshot)
    result = LogCleaner(manager, clock).clean_once()
    monkeypatch.setattr(swap, "crash_hook", None)
    assert result is not None
    after = records_of(log)
    assert after != before
    steps = [step for step, _ in snapshots]
    groups = steps.count("cleaned-group")
    assert groups > 1  # the pass writes several segments: the swap is more than one rename
    assert steps[groups:] == [
        "prepared",
        "committed",
        *[s for s in steps if s.startswith("removed-old-")],
        *[s for s in steps if s.startswith("renamed-new-")],
        "swapped",
    ]
    committed = steps.index("committed")
    for i, (step, directory) in enumerate(snapshots):
        reopened_manager = LogManager([directory], clock)
        reopened_manager.open(lambda topic: CONFIG)
        reopened = reopened_manager.get("table", 0)
        assert reopened is not None
        assert records_of(reopened) == (before if i < committed else after), step
        assert leftovers(directory / "table-0") == [], step
        assert reopened.log_end_offset == log.log_end_offset
        # The interrupted compaction finishes: a pass after the restart gets to the same log.
        LogCleaner(reopened_manager, clock).clean_until_done()
        assert records_of(reopened) == after, step
        reopened_manager.close()
    manager.close()


def test_recovery_of_a_swap_is_itself_restartable(tmp_path: Path, clock: ManualClock) -> None:
    """A crash during recovery of a swap: recovery runs again from wherever it stopped."""
    data = tmp_path / "data"
    manager = LogManager([data], clock)
    manager.open(lambda topic: CONFIG)
    log = manager.create("table", 0, CONFIG)
    for r in range(40):
        append(log, keyed_batch([(f"k{r % 3}".encode(), b"v" * 30)]))
    snapshot = tmp_path / "snapshot"

    def at_commit(step: str) -> None:
        if step == "committed":
            shutil.copytree(data, snapshot)

    swap.crash_hook = at_commit
    try:
        LogCleaner(manager, clock).clean_once()
    finally:
        swap.crash_hook = None
    after = records_of(log)
    directory = snapshot / "table-0"
    # Recovery interrupted after its first steps: some old files gone, nothing renamed yet.
    [manifest] = [p for p in directory.iterdir() if p.name.endswith(".swap")]
    first_new = int(manifest.read_text().splitlines()[2].split()[0])
    (directory / f"{first_new:020d}.log").unlink()
    reopened_manager = LogManager([snapshot], clock)
    reopened_manager.open(lambda topic: CONFIG)
    reopened = reopened_manager.get("table", 0)
    assert reopened is not None
    assert records_of(reopened) == after
    reopened_manager.close()
    manager.close()


def test_a_manifest_that_cannot_be_read_stops_the_log_from_opening(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "table-0"
    directory.mkdir()
    (directory / f"{0:020d}.swap").write_text("garbage")
    with pytest.raises(RuntimeError, match="segment swap"):
        swap.recover(directory)
