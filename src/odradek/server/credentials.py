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

from odradek.cluster.metadata.store import MetadataStore
from odradek.following import StoreFollower
from odradek.security.scram import ScramCredential

# The change kind the ZooKeeper engine reports for any /config/changes notification.
_ENTITY_CONFIGS_CHANGED = "client_quotas"


class CredentialCache:
    """Every user's SCRAM credentials, by user and mechanism, as last read from the store."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, str]] = {}
        self._follower: StoreFollower[dict[str, dict[str, str]]] | None = None

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        return None if text is None else ScramCredential.from_kafka(text)

    async def follow(self, store: MetadataStore) -> None:
        """Read every user's credentials now, and again after each change notification."""

        async def read() -> dict[str, dict[str, str]]:
            return {name: await store.user_configs(name) for name in await store.user_names()}

        def apply(users: dict[str, dict[str, str]]) -> None:
            self._users = users

        self._follower = StoreFollower(
            read, apply, {_ENTITY_CONFIGS_CHANGED}, "the users' SCRAM credentials"
        )
        await self._follower.follow(store)

    def stop(self) -> None:
        if self._follower is not None:
            self._follower.stop()
