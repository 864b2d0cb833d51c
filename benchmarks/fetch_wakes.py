"""What a parked Fetch costs the broker each time a partition it waits on wakes it: the replica
manager's DelayedFetch, in the broker's own code, on a real log directory (no sockets, no
clients: the cost is CPU on the event loop per wake).

For a fetch over ``--partitions`` (1, 10, 100, 1000) partitions, when the wake moved nothing (a
leader's append before the high watermark moves, a follower's fetch), two cases: every partition
at its end ("idle"), and every partition holding a small batch, fewer bytes than ``min.bytes``
("holding"). Each prints the cost of a pass that reads every partition (what a Fetch's first pass
costs, and what each wake cost when wakes read again) and of a wake (offsets compared: the
segments are read once, when the fetch completes).

    PYTHONPATH=. python benchmarks/fetch_wakes.py --partitions 1,10,100,1000

(from the repository root: it builds the broker's services as the handler tests do)
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.server.conftest import batch_of, now_ms
from tests.server.handlers.conftest import services

from odradek.clock import ManualClock
from odradek.cluster.replication.delayed import DelayedFetch, FetchParams
from odradek.cluster.replication.partition import FetchIsolation
from odradek.server.fetch_sessions import SessionPartition
from odradek.server.services import BrokerServices


def per_call_us(call: Callable[[], object], seconds: float) -> float:
    calls = 0
    started = time.process_time()
    while (elapsed := time.process_time() - started) < seconds:
        for _ in range(10):
            call()
        calls += 10
    return elapsed / calls * 1e6


def measure(count: int, holding: bool, seconds: float) -> tuple[float, float]:
    """(µs per pass that reads, µs per wake) when the wake moved nothing."""
    with tempfile.TemporaryDirectory() as directory:
        clock = ManualClock(now_ms())
        made = services.__wrapped__(Path(directory), clock)  # type: ignore[attr-defined]
        broker: BrokerServices = next(made)
        topics = broker.topics
        asyncio.run(topics.create_topic("waits", count))
        if holding:
            for i in range(count):
                partition = topics.partition("waits", i)
                assert partition is not None
                partition.append_as_leader(batch_of(b"x" * 100), 1, clock.time_ms())
        params = FetchParams(-1, FetchIsolation.HIGH_WATERMARK, 500, 1 << 30, 1 << 30)
        wanted = [(("waits", i), SessionPartition(0, 1 << 20)) for i in range(count)]
        delayed = DelayedFetch(params, wanted, topics.partition)
        delayed.read()
        assert not delayed.try_complete()
        passes = per_call_us(delayed.read, seconds)
        wakes = per_call_us(delayed.try_complete, seconds)
        made.close()
    return passes, wakes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,10,100,1000")
    parser.add_argument("--seconds", type=float, default=1.0, help="CPU seconds per figure")
    args = parser.parse_args()
    print("case     partitions  read pass µs  wake µs  wake/pass")
    for holding in (False, True):
        for count in (int(c) for c in args.partitions.split(",")):
            passes, wakes = measure(count, holding, args.seconds)
            case = "holding" if holding else "idle"
            print(f"{case:8s} {count:10d}  {passes:12.1f}  {wakes:7.1f}  {wakes / passes:9.2f}")


if __name__ == "__main__":
    main()
