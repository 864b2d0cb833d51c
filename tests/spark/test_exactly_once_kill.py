"""The exactly-once sink against kill -9: a streaming query's driver (its own process group:
Python, the JVM and the Python workers) is killed twice in the middle of a micro-batch — while
a task's transaction holds data it has not committed — and restarted from its checkpoint (the
second kill is of a run that had itself restarted from a killed run's checkpoint).
A read_committed reader of the output then sees every input row exactly once, while a
read_uncommitted one also sees the data of the killed transactions (which shows the kills did
land mid-batch)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from odradek.client.data import READ_COMMITTED, DataClient, TopicPartition
from odradek.protocol.records import NewRecord
from odradek.testing import RunningBroker, wait_until

from .conftest import create_topic, produce
from .test_exactly_once import output_values

# Each kill costs a driver start (a JVM and Spark's planning: most of the test's time); the
# second kill is of a run that recovered from the first, after which a third shows nothing new.
KILLS = 2
MARKER_SLACK = 10  # two tasks' transactions over two partitions: at most four markers
ROWS_PER_PARTITION = 3000
DRIVER = Path(__file__).with_name("eos_query.py")
# Each phase's wait has its own budget: a driver start (a JVM and Spark's planning) is most of
# it, and on a loaded machine four of them in a row overran one shared deadline. The waits poll
# every millisecond, to kill as soon as a transaction is open.
PHASE_S = 120


class OutputEnds:
    """Polls the output's high watermarks and last stable offsets (summed over partitions)
    over two open connections, so a poll takes a couple of milliseconds."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.tps = [TopicPartition(topic, p) for p in range(2)]
        self.plain = DataClient(bootstrap)
        self.committed = DataClient(bootstrap, isolation_level=READ_COMMITTED)

    def __call__(self) -> tuple[int, int]:
        high = sum(self.plain.latest(self.tps).values())
        return high, sum(self.committed.latest(self.tps).values())

    def close(self) -> None:
        self.plain.close()
        self.committed.close()


def uncommitted_batches(checkpoint: Path) -> set[int]:
    """Micro-batches in the checkpoint's offset log but not (yet) in its commit log."""

    def ids(log: str) -> set[int]:
        folder = checkpoint / log
        return (
            {int(p.name) for p in folder.iterdir() if p.name.isdigit()}
            if folder.exists()
            else set()
        )

    return ids("offsets") - ids("commits")


def start_driver(
    bootstrap: str, source: str, output: str, checkpoint: Path
) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.Popen(
        [sys.executable, str(DRIVER), bootstrap, source, output, str(checkpoint)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc: the JVM, and pyspark's worker daemon with its
    workers, which put themselves in a process group of their own."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def kill(driver: subprocess.Popen[bytes]) -> None:
    """kill -9 of the driver and everything it started, at once (local mode: the executors
    too), so no task goes on writing after the kill."""
    for pid in [driver.pid, *descendants(driver.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    driver.wait(30)


def test_killed_and_restarted_query_writes_each_row_once(
    broker: RunningBroker, topic: str, tmp_path: Path
) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+")
    bootstrap = broker.bootstrap
    source, output = f"{topic}-in", f"{topic}-out"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, output, 2)
    sent: list[bytes] = []
    for p in range(2):
        rows = [
            NewRecord(f"k{p}-{i}".encode(), f"{p}/{i}/".encode() + b"x" * 200, timestamp=i)
            for i in range(ROWS_PER_PARTITION)
        ]
        # Small batches: the driver's source fetches one at a time (see eos_query.py).
        sent.extend(r.value or b"" for r in produce(bootstrap, source, p, rows, per_batch=4))
    checkpoint = tmp_path / "checkpoint"
    ends = OutputEnds(bootstrap, output)
    written_before = 0
    driver = start_driver(bootstrap, source, output, checkpoint)
    try:
        for kill_number in range(1, KILLS + 1):
            # Kill as soon as this run has written data into a transaction it has not ended
            # (more offsets than the markers aborting the killed run's transactions take).
            def open_transaction(since: int = written_before + MARKER_SLACK) -> bool:
                high, stable = ends()
                return high > since and high > stable

            wait_until(
                open_transaction, PHASE_S, 0.001, f"an open transaction before kill {kill_number}"
            )
            kill(driver)
            # Mid-batch: Spark had planned a micro-batch and not committed it.
            assert uncommitted_batches(checkpoint), f"kill {kill_number} fell between batches"
            written_before = ends()[0]
            driver = start_driver(bootstrap, source, output, checkpoint)

        def all_committed() -> bool:
            high, stable = ends()
            return (
                high == stable
                and not uncommitted_batches(checkpoint)
                and (len(output_values(bootstrap, output, 2, READ_COMMITTED)) >= len(sent))
            )

        wait_until(all_committed, PHASE_S, 0.001, "the output to hold every row")
    finally:
        kill(driver)
        ends.close()

    committed = Counter(output_values(bootstrap, output, 2, READ_COMMITTED))
    assert committed == Counter(sent)  # every input row once, nothing else
    uncommitted = Counter(output_values(bootstrap, output, 2, 0))
    aborted = uncommitted - committed
    assert sum(aborted.values()) > 0, "no kill landed while a transaction held data"
    assert set(aborted) <= set(sent)
