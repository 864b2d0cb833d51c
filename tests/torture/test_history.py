"""A history written as JSON lines reads back as the same operations."""

from __future__ import annotations

import threading
from pathlib import Path

from odradek.torture.history import (
    Acked,
    CommitObserved,
    History,
    Nemesis,
    Read,
    Sent,
    describe_op,
)


def test_a_history_round_trips_through_json_lines(tmp_path: Path) -> None:
    history = History()
    history.add(Sent("i1", "i1-000000", "t", 0, None, 1.0))
    history.add(Acked("i1", "i1-000000", "t", 0, 0, None, 2.0))
    history.add(Read("m1", "g", "read_committed", "t", 0, 0, "i1-000000", 3.0))
    history.add(CommitObserved("g", "t", 0, 1, 4.0, 4.5))
    history.add(Nemesis("start", "kill", "broker 2", 5.0))
    path = tmp_path / "history.jsonl"
    history.write(path)
    assert History.read(path).ops() == history.ops()


def test_threads_may_add_at_once() -> None:
    history = History()

    def add(n: int) -> None:
        for i in range(1000):
            history.add(Sent(f"p{n}", f"p{n}-{i}", "t", None, None, float(i)))

    threads = [threading.Thread(target=add, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(history) == 4000


def test_an_op_is_described_on_one_line() -> None:
    line = describe_op(Acked("i1", "i1-000007", "t", 2, 41, None, 9.5))
    assert line == (
        "Acked(producer='i1', value='i1-000007', topic='t', partition=2, offset=41, "
        "txn=None, time=9.5)"
    )
