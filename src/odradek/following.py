"""Keeping a copy of something the metadata store holds: read it now, and again after each change
the store reports of the kinds that concern it (client quotas, users' credentials, delegation
tokens, client metrics subscriptions).

The reads are the store's coroutines, so they wait off the event loop (ZooKeeper's on its
threads). Changes reported while a read is under way fold into one more read that starts after
them, so the copy ends as the store is after the last change, with at most one read waiting. A
read that fails keeps the copy as it was, until the next change tries again.

The event loop's thread only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class Change(Protocol):
    @property
    def kind(self) -> str: ...


class ChangeSource(Protocol):
    """What a follower needs of the metadata store: its change reports."""

    def add_listener(
        self, loop: asyncio.AbstractEventLoop, listener: Callable[[Change], None]
    ) -> None: ...


class StoreFollower(Generic[T]):
    """Keeps ``apply(await read())`` current with the store's changes of ``kinds``."""

    def __init__(
        self,
        read: Callable[[], Awaitable[T]],
        apply: Callable[[T], Awaitable[None] | None],
        kinds: Collection[str],
        what: str,
    ) -> None:
        self._read = read
        self._apply = apply
        self._kinds = frozenset(kinds)
        self._what = what  # for the log: "the client quotas"
        self._tasks: set[asyncio.Task[None]] = set()
        self._dirty = False
        self._reading = False

    async def follow(self, store: ChangeSource) -> None:
        """Read now (returning once applied), and again after each change of the kinds."""
        loop = asyncio.get_running_loop()

        def changed(change: Change) -> None:
            if change.kind in self._kinds:
                task = loop.create_task(self.reload())
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

        store.add_listener(loop, changed)
        await self.reload()

    async def reload(self) -> None:
        self._dirty = True
        if self._reading:
            return
        self._reading = True
        try:
            while self._dirty:
                self._dirty = False
                try:
                    value = await self._read()
                except Exception as e:
                    log.warning("could not read %s: %r", self._what, e)
                    return
                applied = self._apply(value)
                if applied is not None:
                    await applied
        finally:
            self._reading = False

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
