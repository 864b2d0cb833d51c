"""A slow link without ``tc netem``: packets queued to user space by iptables' ``NFQUEUE`` target
and let go (an ACCEPT verdict) ``delay`` seconds after they arrived, in the order they came.

The kernel keeps each queued packet until a verdict names it, so holding the verdict holds the
packet, at the network layer, for every protocol alike: TCP sees a longer round trip, not a proxy.
The rule that queues them carries ``--queue-bypass``, so when no program listens on the queue (this
one not yet started, or gone) packets pass as if the rule were not there: a delayer that dies
leaves a fast link, never a dead one.

The program (``python -m odradek.torture.delay --queue N --delay-ms D --max-s S``, run inside the
network namespace whose packets it holds, as root) binds queue ``N`` with NetfilterQueue
(libnetfilter_queue), prints ``bound`` once it listens, and ends, releasing (accepting) every
packet it still holds, on SIGTERM or SIGINT, at the end of its standard input (the process that
started it went away), or after ``S`` seconds, whichever comes first.

:class:`DelayLine` is its pure core: which held packets are due at a given time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Sequence
from typing import Generic, TypeVar

T = TypeVar("T")

# Packets the kernel may hold for the queue before it drops more: a 300 ms delay on a busy
# broker's replication and client traffic stays well inside it.
QUEUE_MAX_PACKETS = 20_000


class DelayLine(Generic[T]):
    """Items held ``delay_s`` each, released in arrival order. Every item waits the same time,
    so the line stays sorted by due time and the head is always the next due."""

    def __init__(self, delay_s: float) -> None:
        if delay_s < 0:
            raise ValueError("a delay cannot be negative")
        self.delay_s = delay_s
        self._held: collections.deque[tuple[float, T]] = collections.deque()

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, item: T, now: float) -> None:
        self._held.append((now + self.delay_s, item))

    def due(self, now: float) -> list[T]:
        """The items due at ``now``, oldest first, taken off the line."""
        released = []
        while self._held and self._held[0][0] <= now:
            released.append(self._held.popleft()[1])
        return released

    def wait_s(self, now: float) -> float | None:
        """Seconds until the next item is due (0 when one is), None when nothing is held."""
        if not self._held:
            return None
        return max(0.0, self._held[0][0] - now)

    def release_all(self) -> list[T]:
        released = [item for _, item in self._held]
        self._held.clear()
        return released


def run(queue_number: int, delay_s: float, max_s: float) -> int:
    from netfilterqueue import COPY_META, NetfilterQueue, Packet

    line: DelayLine[Packet] = DelayLine(delay_s)
    queue = NetfilterQueue()
    queue.bind(
        queue_number,
        lambda packet: line.hold(packet, time.monotonic()),
        max_len=QUEUE_MAX_PACKETS,
        mode=COPY_META,
    )
    # A signal only wakes the loop (through the wakeup socket): raised inside NetfilterQueue's
    # callback, an exception would cross its C code.
    stopping: list[int] = []
    wakeup, woken = socket.socketpair()
    wakeup.setblocking(False)
    signal.set_wakeup_fd(wakeup.fileno())
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stopping.append(signum))
    end = time.monotonic() + max_s
    selector = selectors.DefaultSelector()
    packets_fd, input_fd = queue.get_fd(), sys.stdin.fileno()
    selector.register(packets_fd, selectors.EVENT_READ)
    selector.register(input_fd, selectors.EVENT_READ)
    selector.register(woken, selectors.EVENT_READ)
    print("bound", flush=True)
    held = 0
    try:
        while not stopping and (now := time.monotonic()) < end:
            wait = line.wait_s(now)
            timeout = end - now if wait is None else min(wait, end - now)
            for key, _ in selector.select(timeout):
                if key.fd == packets_fd:
                    before = len(line)
                    queue.run(block=False)
                    held += len(line) - before
                elif key.fd == input_fd:
                    if not os.read(input_fd, 4096):
                        stopping.append(0)  # whoever started this is gone
                else:
                    woken.recv(4096)
            for packet in line.due(time.monotonic()):
                packet.accept()
    finally:
        for packet in line.release_all():
            packet.accept()
        queue.unbind()
        with contextlib.suppress(OSError):
            print(f"held {held} packets", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.torture.delay")
    parser.add_argument("--queue", type=int, required=True, help="the NFQUEUE number")
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--max-s", type=float, default=600, help="end after this long at most")
    args = parser.parse_args(argv)
    return run(args.queue, args.delay_ms / 1000, args.max_s)


if __name__ == "__main__":
    sys.exit(main())
