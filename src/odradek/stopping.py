"""Bounded steps of a clean stop, shared by the broker and its cluster node (event loop only)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

log = logging.getLogger(__name__)


async def stop_step(name: str, step: Awaitable[object], timeout_s: float) -> bool:
    """Run one step of a stop for at most ``timeout_s``; returns whether it finished.

    A hard bound: ``asyncio.wait_for`` waits for a timed-out step to finish being cancelled,
    and a step that swallows the cancellation (stopping a task it awaits under
    ``suppress(CancelledError)``) would keep the stop waiting. Here a late step is cancelled,
    named in the log and left behind, so that the stop goes on to flush and checkpoint."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task}, timeout=timeout_s)
    if not done:
        task.cancel()
        log.warning("stopping: %s did not finish within %.0f s; going on", name, timeout_s)
        return False
    error = None if task.cancelled() else task.exception()
    if error is not None:
        log.error("stopping: %s failed", name, exc_info=error)
    return True
