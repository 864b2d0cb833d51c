"""The exactly-once sink against kill -9: a streaming query's driver (its own process group:
Python, the JVM and the Python workers) is killed three times in the middle of a micro-batch —
while a task's transaction holds data it has not committed — and restarted from its checkpoint.
A read_committed reader of the output then sees every input row exactly once, while a
read_uncommitted one also sees the data of the killed transactions (which shows the kills did
land mid-batch)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.client.data import READ_COMMITTED, DataClient, TopicPartition
from odradek.protocol.records import NewRecord
from odradek.testing import RunningBroker

from .conftest import create_topic, produce
from .test_exactly_once import output_values

KILLS = 3
ROWS_PER_PARTITION = 2000
DRIVER = Path(__file__).with_name("eos_query.py")


def ends(bootstrap: str, topic: str) -> tuple[int, int]:
    """(high watermarks, last stable offsets) of the two partitions of ``topic``, summed."""
    tps = [TopicPartition(topic, p) for p in range(2)]
    with (
        DataClient(bootstrap) as plain,
        DataClient(bootstrap, isolation_level=READ_COMMITTED) as committed,
    ):
        return sum(plain.latest(tps).values()), sum(committed.latest(tps).values())


def start_driver(
    bootstrap: str, source: str, output: str, checkpoint: Path
) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    return subprocess.Popen(
        [sys.executable, str(DRIVER), bootstrap, source, output, str(checkpoint)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the JVM and workers die with it
    )


def kill(driver: subprocess.Popen[bytes]) -> None:
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(30)


def wait_for(condition: Callable[[], bool], what: str, deadline: float) -> None:
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


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
        sent.extend(r.value or b"" for r in produce(bootstrap, source, p, rows))
    checkpoint = tmp_path / "checkpoint"
    deadline = time.monotonic() + 150
    stable_before = 0
    kills = 0
    driver = start_driver(bootstrap, source, output, checkpoint)
    try:
        while kills < KILLS:
            # Kill once this run has made progress past what the killed one left, and a
            # transaction holds data again: a task is writing, its micro-batch not committed.
            def open_transaction(since: int = stable_before) -> bool:
                high, stable = ends(bootstrap, output)
                return stable > since and high > stable

            wait_for(open_transaction, f"an open transaction before kill {kills + 1}", deadline)
            kill(driver)
            kills += 1
            stable_before = ends(bootstrap, output)[0]  # all the killed run wrote
            driver = start_driver(bootstrap, source, output, checkpoint)

        def all_committed() -> bool:
            return len(output_values(bootstrap, output, 2, READ_COMMITTED)) >= len(sent)

        wait_for(all_committed, "the output to hold every row", deadline)
    finally:
        kill(driver)

    committed = Counter(output_values(bootstrap, output, 2, READ_COMMITTED))
    assert committed == Counter(sent)  # every input row once, nothing else
    uncommitted = Counter(output_values(bootstrap, output, 2, 0))
    aborted = uncommitted - committed
    assert aborted, "no kill landed while a transaction held data"
    assert set(aborted) <= set(sent)
