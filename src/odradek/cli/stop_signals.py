"""SIGTERM and SIGINT as a request to stop a long-running command (``odradek serve``,
``odradek console``), caught from the command's first line to the process's exit.

A handler installed only once start-up is done leaves a window in which the signal's default
action kills the process (exit -15): a supervisor or a test that sends SIGTERM as soon as the
process has printed something would then see a crash instead of a clean stop. So the handler
goes in before anything is printed, and a stop asked for during start-up is kept until the
command waits for it; the command then stops cleanly at once. It is never removed: a second
SIGTERM while the process stops or exits is absorbed too.

The handler writes the signal's number to a pipe and does nothing else (no lock, no logging:
a Python signal handler runs between two bytecodes of the main thread, whatever that thread
holds). The waits read that pipe: :meth:`StopSignals.wait` blocking, :meth:`wait_async` on an
asyncio event loop as a reader of the pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """SIGTERM and SIGINT recorded from :meth:`install` on; main thread only (where Python
    runs signal handlers)."""

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        os.set_blocking(self._read_fd, False)
        self._previous: dict[int, object] = {}

    def install(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def uninstall(self) -> None:
        """Put back the handlers found at :meth:`install` (for tests: a command never
        uninstalls, see the module doc) and close the pipe."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]
        self._previous.clear()
        os.close(self._read_fd)
        os.close(self._write_fd)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # A full pipe already holds a stop request: one more byte would say nothing new.
        with contextlib.suppress(BlockingIOError):
            os.write(self._write_fd, bytes([signum]))

    def received(self) -> signal.Signals | None:
        """The first stop signal received and not yet taken, or None (never waits)."""
        try:
            data = os.read(self._read_fd, 1)
        except BlockingIOError:
            return None
        return signal.Signals(data[0])

    def wait(self) -> signal.Signals:
        """Block until a stop signal comes (at once if one came before); which one."""
        import selectors

        with selectors.DefaultSelector() as selector:
            selector.register(self._read_fd, selectors.EVENT_READ)
            while True:
                received = self.received()
                if received is not None:
                    return received
                selector.select()

    async def wait_async(self) -> signal.Signals:
        """:meth:`wait` on the running event loop, which goes on meanwhile."""
        received = self.received()
        if received is not None:
            return received
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[signal.Signals] = loop.create_future()

        def on_readable() -> None:
            received = self.received()
            if received is not None and not arrived.done():
                arrived.set_result(received)

        loop.add_reader(self._read_fd, on_readable)
        try:
            return await arrived
        finally:
            loop.remove_reader(self._read_fd)
