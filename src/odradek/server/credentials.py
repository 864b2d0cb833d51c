"""The SCRAM credentials a broker logs users in with, held in memory as Kafka's
``CredentialCache`` holds them.

A SCRAM exchange looks a user's credential up in the middle of a step that is not a coroutine,
on the event loop, so the lookup must not read ZooKeeper. :class:`CredentialCache` reads every
user's configs (``/config/users/<user>``) when the broker starts, and again after each entity
config change notification (``/config/changes``, which AlterUserScramCredentials writes on
whichever broker took it), off the loop through the store's coroutines. A credential added,
changed or deleted anywhere in the cluster is used by this broker's logins once the
notification reaches it, as in Kafka; until then the previous credential holds. A lone broker's
store keeps users in memory already and is asked directly.

Threads: the event loop's only (lookups during SASL steps, reloads as its tasks).
"""

from __future__ import annotations

import asyncio
import logging

from odradek.cluster.metadata.store import MetadataChange, MetadataStore
from odradek.security.scram import ScramCredential

log = logging.getLogger(__name__)

# The change kind the ZooKeeper engine reports for any /config/changes notification.
_ENTITY_CONFIGS_CHANGED = "client_quotas"


class CredentialCache:
    """Every user's SCRAM credentials, by user and mechanism, as last read from the store."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, str]] = {}
        self._reloads: set[asyncio.Task[None]] = set()
        self._dirty = False
        self._reloading = False

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        return None if text is None else ScramCredential.from_kafka(text)

    async def follow(self, store: MetadataStore) -> None:
        """Read every user's credentials now, and again after each change notification."""
        loop = asyncio.get_running_loop()

        def changed(change: MetadataChange) -> None:
            if change.kind == _ENTITY_CONFIGS_CHANGED:
                task = loop.create_task(self._reload(store))
                self._reloads.add(task)
                task.add_done_callback(self._reloads.discard)

        store.add_listener(loop, changed)
        await self._reload(store)

    async def _reload(self, store: MetadataStore) -> None:
        # Notifications coming faster than a reload are folded into one more reload, so that
        # the last read starts after the last notification.
        self._dirty = True
        if self._reloading:
            return
        self._reloading = True
        try:
            while self._dirty:
                self._dirty = False
                try:
                    names = await store.user_names()
                    users = {name: await store.user_configs(name) for name in names}
                except Exception as e:  # the next notification tries again; the old ones hold
                    log.warning("could not read the users' SCRAM credentials: %r", e)
                    return
                self._users = users
        finally:
            self._reloading = False

    def stop(self) -> None:
        for task in self._reloads:
            task.cancel()
