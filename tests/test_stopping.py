"""stop_step: a stop's step is bounded even when it swallows its cancellation."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from odradek.stopping import stop_step


def test_a_step_that_ends_is_waited_for() -> None:
    ended: list[str] = []

    async def step() -> None:
        await asyncio.sleep(0)
        ended.append("step")

    assert asyncio.run(stop_step("quick", step(), 5)) is True
    assert ended == ["step"]


def test_a_step_that_swallows_its_cancellation_is_left_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As a stop awaiting a cancelled task under suppress(CancelledError) does: wait_for would
    wait for it forever; stop_step gives up at its timeout and cancels it."""
    cancels: list[int] = []

    async def stubborn(release: asyncio.Event) -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
            cancels.append(1)

    async def main() -> tuple[bool, bool]:
        release = asyncio.Event()
        task = asyncio.ensure_future(stubborn(release))
        finished = await stop_step("stubborn", task, 0)
        await asyncio.sleep(0)  # the cancellation reaches the step
        still_running = not task.done()
        release.set()
        await task
        return finished, still_running

    finished, still_running = asyncio.run(main())
    assert finished is False and still_running
    assert cancels  # it was cancelled (and swallowed it)
    assert "stubborn did not finish within 0 s" in caplog.text


def test_a_failing_step_is_logged_and_the_stop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def failing() -> None:
        raise RuntimeError("broken")

    assert asyncio.run(stop_step("failing", failing(), 5)) is True
    assert "stopping: failing failed" in caplog.text and "broken" in caplog.text
