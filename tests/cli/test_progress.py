"""The progress line of long commands: redrawn in place on a terminal (at most every 0.1 s of
the injected clock), one line per step elsewhere, nothing with --quiet."""

from __future__ import annotations

import io

from odradek.cli.progress import Progress


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_gets_one_line_redrawn_with_a_bar() -> None:
    out, clock = FakeTerminal(), FakeClock()
    with Progress("resetting", 4, stream=out, clock=clock) as progress:
        assert progress.interactive
        progress.step("new offsets")
        clock.now += 0.5
        progress.advance()
        clock.now += 0.01
        progress.advance()  # within the redraw interval: not drawn
        clock.now += 0.2
        progress.advance(2)  # the end is always drawn
    frames = out.getvalue().split("\r")[1:]
    assert [f.split()[0] for f in frames] == ["resetting"] * len(frames)
    assert "0/4" in frames[0] and "new offsets" in frames[0]
    assert "[#######" in frames[1] and "1/4  25%" in frames[1] and "0.5s" in frames[1]
    assert not any("2/4" in f for f in frames)  # the skipped redraw
    assert "[" + "#" * 30 + "] 4/4 100%" in frames[-1]
    assert out.getvalue().endswith("\n") and out.getvalue().count("\n") == 1


def test_a_shorter_line_blanks_what_the_longer_one_left() -> None:
    out = FakeTerminal()
    progress = Progress("x", None, stream=out, clock=FakeClock())
    progress.step("a long step name")
    progress.step("short")
    first, second = out.getvalue().split("\r")[1:]
    assert len(second) == len(first) and second.rstrip().endswith("short")


def test_elsewhere_each_step_is_one_line_and_advances_print_nothing() -> None:
    out = io.StringIO()
    with Progress("bench", 2, stream=out, clock=FakeClock()) as progress:
        assert not progress.interactive
        progress.step("running produce")
        progress.advance()
        progress.step("running fetch")
        progress.advance()
    assert out.getvalue() == "bench: 0/2 running produce\nbench: 1/2 running fetch\n"


def test_quiet_prints_nothing() -> None:
    for out in (FakeTerminal(), io.StringIO()):
        with Progress("x", 3, stream=out, quiet=True, clock=FakeClock()) as progress:
            progress.step("a")
            progress.advance(3)
        assert out.getvalue() == ""


def test_a_tick_redraws_so_the_time_moves_through_a_silent_step() -> None:
    out, clock = FakeTerminal(), FakeClock()
    progress = Progress("bench", 3, stream=out, clock=clock, tick_s=3600)
    try:
        progress.step("running produce")
        clock.now += 42
        progress.tick()  # what the ticker thread does every tick_s
        assert out.getvalue().split("\r")[-1].startswith("bench [") and "42.0s" in out.getvalue()
    finally:
        progress.finish()  # stops and joins the ticker without waiting out its interval
    assert progress._ticker is not None and not progress._ticker.is_alive()
    frames = out.getvalue().count("\r")
    progress.tick()  # finished: nothing more is drawn
    assert out.getvalue().count("\r") == frames


def test_no_ticker_where_nothing_is_drawn() -> None:
    assert Progress("x", 1, stream=io.StringIO(), tick_s=1.0)._ticker is None
    assert Progress("x", 1, stream=FakeTerminal(), quiet=True, tick_s=1.0)._ticker is None
