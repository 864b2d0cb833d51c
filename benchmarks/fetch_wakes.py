"""What a parked Fetch costs the broker each time a partition it waits on wakes it: the Fetch
handler's pass over its partitions, in the broker's own code, on a real log directory (no
sockets, no clients: the cost is CPU on the event loop per wake).

Before (every wake read every partition again) and after (a wake first compares each partition's
read bound, log start, epoch and role, and reads only once one moved), in the same run, for a
fetch over ``--partitions`` (1, 10, 100, 1000) partitions, each at its end, when the wake moved
nothing (a leader's append before the high watermark moves, a follower's fetch). A wake that
moved one partition costs the "after" figure plus that one partition's answer.

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

from tests.server.conftest import now_ms
from tests.server.handlers.conftest import HandlerCaller, services

from odradek.clock import ManualClock
from odradek.server.handlers import fetch
from odradek.server.registry import load_handlers
from odradek.server.services import BrokerServices


def per_call_us(call: Callable[[], object], seconds: float) -> float:
    calls = 0
    started = time.process_time()
    while (elapsed := time.process_time() - started) < seconds:
        for _ in range(10):
            call()
        calls += 10
    return elapsed / calls * 1e6


def measure(count: int, seconds: float) -> tuple[float, float]:
    """(µs per wake before, µs per wake after) when the wake moved nothing."""
    with tempfile.TemporaryDirectory() as directory:
        made = services.__wrapped__(Path(directory), ManualClock(now_ms()))  # type: ignore[attr-defined]
        broker: BrokerServices = next(made)
        asyncio.run(broker.topics.create_topic("waits", count))
        caller = HandlerCaller(broker)
        ctx = caller.context(fetch.fetch_request.API_KEY, 12)
        wanted = [(("waits", i), fetch.SessionPartition(0, 1 << 20, -1, -1)) for i in range(count)]
        scope = fetch._Scope(False, False, 1 << 20, None, None, False, frozenset(), -1, None)
        # Before: every wake made every partition's answer again, as a fetch's first pass does.
        before = per_call_us(lambda: fetch._Passes(ctx, scope, wanted).read(), seconds)
        passes = fetch._Passes(ctx, scope, wanted)
        passes.read()
        after = per_call_us(passes.read, seconds)
        caller.close()
        made.close()
    return before, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,10,100,1000")
    parser.add_argument("--seconds", type=float, default=1.0, help="CPU seconds per figure")
    args = parser.parse_args()
    load_handlers()
    print("partitions  before µs/wake  after µs/wake  after/before")
    for count in (int(c) for c in args.partitions.split(",")):
        before, after = measure(count, args.seconds)
        print(f"{count:10d}  {before:14.1f}  {after:13.1f}  {after / before:12.2f}")


if __name__ == "__main__":
    main()
