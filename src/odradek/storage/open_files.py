"""The open descriptors of segment log files: a bounded set, least recently used closed first.

A broker with tens of thousands of partitions cannot keep every segment's file open under an
ordinary descriptor limit (Kafka's users raise it; Kafka keeps one descriptor per segment).  Here
a segment's ``.log`` file is opened when it is written or read, and stays open while it is among
the ``capacity`` files used most recently; the others are closed and reopened on demand.

A descriptor is never closed under a user: :meth:`SegmentFile.use` holds it for the duration
of a call, :meth:`SegmentFile.lend` for a while after it (a Fetch response handed to the
network, sent with ``sendfile`` later), and :meth:`SegmentFile.pin` until the segment closes (a
deleted segment, whose file cannot be reopened).  One evicted while held is closed once let go.
If opening a file fails for want of descriptors (EMFILE, ENFILE), the set gives up half of what
it holds and tries once more.

Files: none of its own.  Crash: nothing to lose, it only holds descriptors.  Caller: any
thread; every method takes the set's lock, and no file system call but ``open`` and ``close``
runs under it.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import os
import resource
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from odradek.clock import Clock, SystemClock

_OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)
_MIN_CAPACITY = 16


def default_capacity() -> int:
    """Half the process's descriptor limit: the rest is for connections and everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(_MIN_CAPACITY, soft // 2)


class OpenFiles:
    """At most ``capacity`` segment files open at once (more only while held: see the module
    doc), for every log of a broker."""

    def __init__(self, capacity: int | None = None, clock: Clock | None = None) -> None:
        self.capacity = default_capacity() if capacity is None else max(1, capacity)
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._open: OrderedDict[SegmentFile, None] = OrderedDict()
        # Evicted while held: (closable after ms, tie breaker, file).
        self._closing: list[tuple[int, int, SegmentFile]] = []
        self._seq = itertools.count()

    _unbounded: OpenFiles | None = None

    @classmethod
    def unbounded(cls) -> OpenFiles:
        """A set that never closes a file before its segment does (what a log opened without
        a log manager uses, as every log did before the set existed)."""
        if cls._unbounded is None:
            cls._unbounded = cls(sys.maxsize)
        return cls._unbounded

    def file(self, path: Path, fd: int = -1) -> SegmentFile:
        """A handle on ``path``; ``fd`` an already open descriptor of it, which it takes."""
        handle = SegmentFile(self, path)
        if fd >= 0:
            with self._lock:
                handle._fd = fd
                self._admit(handle)
        return handle

    @property
    def open_count(self) -> int:
        """Descriptors held now, evicted ones not yet closed included."""
        with self._lock:
            return len(self._open) + sum(1 for _, _, f in self._closing if f._fd >= 0)

    def give_back_half(self) -> None:
        """The process ran out of descriptors elsewhere (a listener could not accept): hold
        at most half as many from now on, and close the rest now (unless held)."""
        with self._lock:
            self.capacity = max(_MIN_CAPACITY, min(self.capacity, len(self._open)) // 2)
            if len(self._open) > self.capacity:
                self._shrink(len(self._open) - self.capacity)

    # -- under the lock ---------------------------------------------------------------------

    def _acquire(self, handle: SegmentFile) -> int:
        if handle._closed:
            raise ValueError(f"{handle.path} is closed")
        if handle._fd >= 0:
            if handle in self._open:
                self._open.move_to_end(handle)
            elif not handle._pinned:
                handle._evicted = False
                self._admit(handle)
            return handle._fd
        try:
            handle._fd = os.open(handle.path, os.O_RDWR)
        except OSError as e:
            if e.errno not in _OUT_OF_FDS or not self._shrink(len(self._open) // 2 + 1):
                raise
            handle._fd = os.open(handle.path, os.O_RDWR)
        self._admit(handle)
        return handle._fd

    def _admit(self, handle: SegmentFile) -> None:
        self._open[handle] = None
        self._close_due()
        if len(self._open) > self.capacity:
            self._shrink(len(self._open) - self.capacity)

    def _shrink(self, count: int) -> bool:
        """Evict the ``count`` least recently used files; whether any descriptor was closed."""
        closed = self._close_due()
        for _ in range(min(count, len(self._open))):
            victim, _ = self._open.popitem(last=False)
            closed = self._evict(victim) or closed
        return closed

    def _evict(self, handle: SegmentFile) -> bool:
        now = self._clock.monotonic_ms()
        if handle._users or handle._lent_until > now:
            handle._evicted = True
            due = max(handle._lent_until, now)
            heapq.heappush(self._closing, (due, next(self._seq), handle))
            return False
        os.close(handle._fd)
        handle._fd = -1
        return True

    def _close_due(self) -> bool:
        closed = False
        now = self._clock.monotonic_ms()
        while self._closing and self._closing[0][0] <= now:
            _, _, handle = heapq.heappop(self._closing)
            if not handle._evicted or handle._fd < 0:
                continue  # used again since, or closed by its segment
            if handle._users or handle._lent_until > now:
                due = max(handle._lent_until, now + 1)
                heapq.heappush(self._closing, (due, next(self._seq), handle))
                continue
            os.close(handle._fd)
            handle._fd = -1
            handle._evicted = False
            closed = True
        return closed

    def _release(self, handle: SegmentFile) -> None:
        handle._users -= 1
        if (
            handle._users == 0
            and handle._evicted
            and handle._lent_until <= self._clock.monotonic_ms()
        ):
            os.close(handle._fd)
            handle._fd = -1
            handle._evicted = False


class SegmentFile:
    """The descriptor of one segment file, open when needed (see :class:`OpenFiles`)."""

    def __init__(self, files: OpenFiles, path: Path) -> None:
        self._files = files
        self.path = path  # the segment renames it (the cleaner's suffix)
        self._fd = -1
        self._users = 0
        self._lent_until = 0
        self._evicted = False
        self._pinned = False
        self._closed = False

    @contextlib.contextmanager
    def use(self) -> Iterator[int]:
        """The descriptor, open and not closed until the block ends."""
        files = self._files
        with files._lock:
            fd = files._acquire(self)
            self._users += 1
        try:
            yield fd
        finally:
            with files._lock:
                files._release(self)

    def lend(self, until_ms: int) -> int:
        """The descriptor, not closed before ``until_ms`` (the set's clock's monotonic_ms)
        unless the segment closes."""
        files = self._files
        with files._lock:
            fd = files._acquire(self)
            self._lent_until = max(self._lent_until, until_ms)
            return fd

    def dup(self) -> int:
        """A descriptor of the caller's own on the file (it closes it)."""
        with self.use() as fd:
            return os.dup(fd)

    def pin(self) -> None:
        """Keep the descriptor open until :meth:`close`: the file is about to be removed, and
        reads handed out earlier may still need it."""
        files = self._files
        with files._lock:
            if self._closed:
                return
            files._acquire(self)
            files._open.pop(self, None)
            self._pinned = True

    @property
    def is_open(self) -> bool:
        return self._fd >= 0

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        files = self._files
        with files._lock:
            files._open.pop(self, None)
            self._closed = True
            self._evicted = False
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
