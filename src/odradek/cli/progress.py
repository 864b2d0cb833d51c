"""Progress of a long command (a large offset reset, a partition reassignment, ``bench``) on
standard error, so that standard output keeps only the answer a script reads.

On a terminal it is one line redrawn in place (``\\r``): a bar when the total is known, the
count, the step being done and the time taken; redrawn at most every ``_REDRAW_S`` so that a
tight loop of ``advance()`` costs little, and, with ``tick_s``, also every ``tick_s`` seconds by
a thread of its own, so that the time keeps moving through a long step that reports nothing (a
``bench`` scenario). Anywhere else (a pipe, a file, CI's log) a bar would be noise: only each
named :meth:`Progress.step` is printed, one line each. ``--quiet`` prints nothing at all.

    with progress_for(args, "resetting offsets", total=len(partitions)) as progress:
        for chunk in chunks:
            progress.step(f"offsets of {len(chunk)} partitions")
            ...
            progress.advance(len(chunk))
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

_REDRAW_S = 0.1
_BAR_WIDTH = 30


def quiet_option(parser: argparse.ArgumentParser, default: object = False) -> None:
    """``--quiet`` / ``-q``; pass ``argparse.SUPPRESS`` to accept it again after an action."""
    parser.add_argument(
        "-q", "--quiet", action="store_true", default=default, help="no progress on stderr"
    )


class Progress:
    """One long operation's progress, drawn on ``stream`` (see the module doc). ``total`` is
    the amount of work (partitions, scenarios, …) or None when not known; ``clock`` gives
    seconds (``time.monotonic`` unless a test passes its own)."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        stream: TextIO | None = None,
        quiet: bool = False,
        interactive: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.quiet = quiet
        if interactive is None:
            isatty = getattr(self.stream, "isatty", None)
            interactive = bool(isatty and isatty())
        self.interactive = interactive
        self._clock = clock
        self._started = clock()
        self._drawn_at: float | None = None
        self._drawn_width = 0
        self._step = ""
        self._finished = False
        # The ticker and the caller both draw: one line at a time.
        self._lock = threading.Lock()
        self._stop_ticking = threading.Event()
        self._ticker: threading.Thread | None = None
        if tick_s is not None and self.interactive and not quiet:
            self._ticker = threading.Thread(
                target=self._tick_every, args=(tick_s,), name="odradek-progress", daemon=True
            )
            self._ticker.start()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.finish()

    def step(self, text: str) -> None:
        """A named stage begins: redrawn on a terminal, a line of its own anywhere else."""
        self._step = text
        if self.quiet:
            return
        if self.interactive:
            self._draw(force=True)
        else:
            self.stream.write(f"{self.label}: {self._count()}{text}\n")
            self.stream.flush()

    def advance(self, amount: int = 1) -> None:
        self.update(self.done + amount)

    def update(self, done: int) -> None:
        """``done`` units of the total are finished."""
        self.done = done
        if not self.quiet and self.interactive:
            self._draw(force=self.total is not None and done >= self.total)

    def tick(self) -> None:
        """Redraw now (what the ticker thread does every ``tick_s``)."""
        if not self.quiet and self.interactive and not self._finished:
            self._draw(force=True)

    def _tick_every(self, tick_s: float) -> None:
        while not self._stop_ticking.wait(tick_s):
            self.tick()

    def finish(self) -> None:
        """End the line on a terminal (the last state stays visible)."""
        if self._finished:
            return
        self._stop_ticking.set()
        if self._ticker is not None:
            self._ticker.join()
        self._finished = True
        if not self.quiet and self.interactive:
            self._draw(force=True)
            with self._lock:
                self.stream.write("\n")
                self.stream.flush()

    def _count(self) -> str:
        if self.total is None:
            return f"{self.done} " if self.done else ""
        return f"{self.done}/{self.total} "

    def line(self) -> str:
        """The terminal line as it would be drawn now."""
        elapsed = self._clock() - self._started
        parts = [self.label]
        if self.total:
            filled = min(_BAR_WIDTH, _BAR_WIDTH * self.done // self.total)
            parts.append("[" + "#" * filled + "." * (_BAR_WIDTH - filled) + "]")
            parts.append(f"{self.done}/{self.total} {100 * self.done // self.total:3d}%")
        elif self.total is None and self.done:
            parts.append(str(self.done))
        parts.append(f"{elapsed:.1f}s")
        if self._step:
            parts.append(self._step)
        return " ".join(parts)

    def _draw(self, force: bool) -> None:
        with self._lock:
            now = self._clock()
            if not force and self._drawn_at is not None and now - self._drawn_at < _REDRAW_S:
                return
            self._drawn_at = now
            text = self.line()
            # Spaces over what a longer previous line left behind.
            padding = " " * max(0, self._drawn_width - len(text))
            self._drawn_width = len(text)
            self.stream.write("\r" + text + padding)
            self.stream.flush()


def progress_for(
    args: argparse.Namespace, label: str, total: int | None = None, tick_s: float | None = None
) -> Progress:
    """A :class:`Progress` on standard error that honours the command's ``--quiet``."""
    return Progress(label, total, quiet=bool(getattr(args, "quiet", False)), tick_s=tick_s)
