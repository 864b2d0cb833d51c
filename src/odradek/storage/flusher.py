"""The log flusher: one background thread for the fsyncs and checkpoint writes of the logs.

An fsync can take tens of milliseconds, and a checkpoint write (write, fsync, rename, fsync of the
directory) several of them; done on the event loop they stall every connection.  So the owners
of the logs (the log manager, on the event-loop thread) hand such work to this thread as
:class:`BackgroundJob` objects, run one at a time in the order given, and look at a job's result
later on their own thread.  The flusher knows nothing of logs: a job is a callable.

Jobs that fsync files take descriptors of their own.  :meth:`LogFlusher.fsync` is given fds,
which the job closes when it ends, whether it ran, failed or was cancelled.
:meth:`LogFlusher.fsync_files` (what the logs use) opens each file only when its turn comes,
so that a burst of rolls over tens of thousands of partitions does not hold descriptors while
it waits: a segment's log file through its :class:`~odradek.storage.open_files.SegmentFile`
(never a recycled fd; a segment closed meanwhile is skipped, its log flushed it), the other
files and directories by path, read-only, so that none is created again, and one removed
meanwhile is skipped.  A path renamed over meanwhile (a cleaned segment swapped in) gets an
fsync it did not need, which is harmless: the segment that was to be flushed has left its log.

Crash: nothing is kept here; a job lost with the process leaves its files unsynced, which is
what the recovery point (advanced only after a job ends well) accounts for.

Caller: the log manager and its logs, from their one owning thread.  The thread starts with the
first job and ends when no job is left, so a flusher nobody closes (a test simulating a crash)
leaves no thread behind.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.counters import FLUSH_BUCKETS_S, Histogram
from odradek.storage.open_files import SegmentFile

log = logging.getLogger(__name__)


class BackgroundJob:
    """One piece of work for the flusher thread, and how it ended.

    ``work`` runs unless the job was cancelled before it started; ``cleanup`` runs after it in
    every case (it releases what the job owns).  :attr:`done` and :attr:`succeeded` may be read
    from any thread.
    """

    __slots__ = ("_cancelled", "_cleanup", "_done", "_error", "_name", "_succeeded", "_work")

    def __init__(
        self, name: str, work: Callable[[], None], cleanup: Callable[[], None] | None = None
    ) -> None:
        self._name = name
        self._work = work
        self._cleanup = cleanup
        self._cancelled = False
        self._succeeded = False
        self._error: BaseException | None = None
        self._done = threading.Event()

    def cancel(self) -> None:
        """Skip the work if it has not started; a job already running finishes regardless."""
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def succeeded(self) -> bool:
        """Whether the work ran to its end without raising (False until :attr:`done`)."""
        return self._done.is_set() and self._succeeded

    @property
    def error(self) -> BaseException | None:
        """What the work raised, once :attr:`done` (None if it succeeded or never ran)."""
        return self._error if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def run(self) -> None:
        """Called by the flusher thread (or, for a flusher-less caller, inline)."""
        try:
            if not self._cancelled:
                self._work()
                self._succeeded = True
        except Exception as e:
            # An fsync that fails (EIO) leaves the data unflushed: the caller sees the job did
            # not succeed and does not move its recovery point (a log takes its dir offline).
            self._error = e
            log.exception("background job %s failed", self._name)
        finally:
            try:
                if self._cleanup is not None:
                    self._cleanup()
            except Exception:
                log.exception("cleaning up after background job %s failed", self._name)
            self._done.set()


class LogFlusher:
    """A FIFO of :class:`BackgroundJob` run by one thread (see the module doc)."""

    def __init__(self, name: str = "odradek-log-flusher") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._queue: deque[BackgroundJob] = deque()
        self._thread: threading.Thread | None = None
        # How long each fsync job took (Kafka's LogFlushRateAndTimeMs), written by this
        # flusher's thread only.
        self.flush_time = Histogram(FLUSH_BUCKETS_S)

    def submit(self, job: BackgroundJob) -> BackgroundJob:
        with self._lock:
            self._queue.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        return job

    def fsync(self, name: str, fds: Sequence[int]) -> BackgroundJob:
        """fsync ``fds`` in order, then close them all; the job owns them from this call on."""
        owned = list(fds)

        def work() -> None:
            started = time.perf_counter_ns()
            for fd in owned:
                os.fsync(fd)
            self.flush_time.observe_ns(time.perf_counter_ns() - started)

        def cleanup() -> None:
            for fd in owned:
                os.close(fd)

        return self.submit(BackgroundJob(name, work, cleanup))

    def fsync_files(self, name: str, files: Sequence[Path | SegmentFile]) -> BackgroundJob:
        """fsync ``files`` in order, each opened only then (see the module doc)."""
        owned = list(files)

        def work() -> None:
            started = time.perf_counter_ns()
            for file in owned:
                if isinstance(file, Path):
                    try:
                        fd = os.open(file, os.O_RDONLY)
                    except FileNotFoundError:
                        continue
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                elif not file.closed:
                    with file.use() as fd:
                        os.fsync(fd)
            self.flush_time.observe_ns(time.perf_counter_ns() - started)

        return self.submit(BackgroundJob(name, work))

    def call(self, name: str, work: Callable[[], None]) -> BackgroundJob:
        return self.submit(BackgroundJob(name, work))

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every job submitted so far has ended (not from the flusher thread)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._thread is None, timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    self._idle.notify_all()
                    return
                job = self._queue.popleft()
            job.run()
