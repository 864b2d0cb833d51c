"""What the broker's own schema registry knows of schema ids, for validating records' ids on
the produce path (``confluent.key/value.schema.validation``) without waiting on the loop.

The ids are the registry store's replay of ``_schemas``, published by its thread as an immutable
set the event loop reads. A record may name an id registered a moment ago, through another
broker's registry, that this replay has not read yet: a refusal for an unknown id first asks for
a replay (:meth:`KnownSchemaIds.refreshed`) and validates again. Requests that ask while a replay
runs share the next one, begun after they asked, so a flood of unknown ids costs one replay at a
time, never one each.

Threads: the broker's event loop; the replays run on the registry's store thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Callable, Mapping

from odradek.registry.state import SchemaIdUse

log = logging.getLogger(__name__)


class KnownSchemaIds:
    """``known.get(schema_id)``: the id's use (its subjects) among those ``ids()`` gives (the
    registry's replay, read afresh each time); replays of it on demand by ``refresh`` (which
    runs one on the registry's thread)."""

    def __init__(
        self,
        ids: Callable[[], Mapping[int, SchemaIdUse]],
        refresh: Callable[[], concurrent.futures.Future[None]],
    ) -> None:
        self._ids = ids
        self._refresh = refresh
        self._waiters: list[asyncio.Future[None]] = []
        self._task: asyncio.Task[None] | None = None

    def __contains__(self, schema_id: object) -> bool:
        return schema_id in self._ids()

    def get(self, schema_id: int) -> SchemaIdUse | None:
        return self._ids().get(schema_id)

    def refreshed(self) -> asyncio.Future[None]:
        """Done once a replay begun after this call has ended (well or not: the ids are then
        as it left them). Cancelling it (a produce's timeout) leaves the replay to the others."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._replays(), name="schema-ids-refresh")
        return waiter

    async def _replays(self) -> None:
        while self._waiters:
            waiters, self._waiters = self._waiters, []
            try:
                await asyncio.wrap_future(self._refresh())
            except Exception as e:  # the registry's store failed: the ids stay as they are
                log.warning("schema registry: could not replay _schemas for schema ids: %s", e)
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for waiter in self._waiters:
            waiter.cancel()
        self._waiters.clear()
