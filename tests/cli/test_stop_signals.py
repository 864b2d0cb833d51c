"""SIGTERM during start-up: a clean stop, never the signal's default action (exit -15)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.cli.stop_signals import StopSignals

EXIT_TIMEOUT_S = 60


@pytest.fixture
def stop_signals() -> Iterator[StopSignals]:
    signals = StopSignals().install()
    try:
        yield signals
    finally:
        signals.uninstall()


def test_a_signal_before_the_wait_is_kept_for_it(stop_signals: StopSignals) -> None:
    assert stop_signals.received() is None
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)
    assert stop_signals.wait() == signal.SIGTERM
    assert stop_signals.received() == signal.SIGINT
    assert stop_signals.received() is None


def test_the_async_wait_ends_on_a_signal_while_the_loop_runs(stop_signals: StopSignals) -> None:
    async def scenario() -> tuple[signal.Signals, signal.Signals]:
        os.kill(os.getpid(), signal.SIGINT)
        early = await stop_signals.wait_async()
        asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGTERM)
        return early, await stop_signals.wait_async()

    assert asyncio.run(scenario()) == (signal.SIGINT, signal.SIGTERM)


def signal_at_every_line(command: list[str]) -> tuple[int, str]:
    """Start ``command``, send it SIGTERM as soon as it prints its first line and again at
    every line after, until it exits; its exit status and output."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    output: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            process.send_signal(signal.SIGTERM)
        return process.wait(EXIT_TIMEOUT_S), "".join(output)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_stops_cleanly_on_sigterm_from_its_first_line_on(tmp_path: Path) -> None:
    # The unknown setting's warning is the first line, logged before the broker starts, so
    # the first SIGTERM arrives during start-up.
    serve = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(tmp_path)]
    status, output = signal_at_every_line(
        [*serve, "--listen", "127.0.0.1:0", "-o", "log.retention.hourz=5"]
    )
    assert status == 0, output
    lines = output.splitlines()
    # The first SIGTERM went out before the broker listened.
    assert "listening on" not in lines[0], output
    assert any("unknown setting 'log.retention.hourz' is ignored" in line for line in lines)
    assert "listening on" in output and "stopping on SIGTERM" in output, output
    assert output.rstrip().endswith("stopped cleanly"), output


def test_console_stops_cleanly_on_sigterm_from_its_first_line_on() -> None:
    status, output = signal_at_every_line(
        [sys.executable, "-m", "odradek", "console", "--listen", "127.0.0.1:0"]
    )
    assert status == 0, output
    assert "odradek console on http://127.0.0.1:" in output, output
