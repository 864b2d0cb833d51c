"""Following the metadata store, as the credential cache does it: every user's credentials read
when it starts following, and again after each entity config change, changes that arrive during
a read folded into one more read; a failed read keeps the credentials it had."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from odradek.cluster.metadata.store import MetadataChange
from odradek.security.scram import make_credential
from odradek.server.credentials import CredentialCache

SHA256 = "SCRAM-SHA-256"


def _credential(password: str) -> str:
    return make_credential(SHA256, password, iterations=4096).to_kafka()


class Users:
    """The part of a metadata store the cache reads: users' configs and change listeners."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, str]] = {}
        self.reads = 0
        self.failing = False
        self.listeners: list[Callable[[MetadataChange], None]] = []

    async def user_names(self) -> list[str]:
        self.reads += 1
        if self.failing:
            raise OSError("ZooKeeper is away")
        await asyncio.sleep(0)  # a read takes a turn of the loop, as a thread's answer does
        return sorted(self.users)

    async def user_configs(self, name: str) -> dict[str, str]:
        return dict(self.users.get(name, {}))

    def add_listener(
        self, loop: asyncio.AbstractEventLoop, listener: Callable[[MetadataChange], None]
    ) -> None:
        self.listeners.append(listener)

    def notify(self) -> None:
        for listener in self.listeners:
            listener(MetadataChange("client_quotas"))


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_the_cache_follows_the_users_as_they_change() -> None:
    async def scenario() -> None:
        store = Users()
        store.users["ann"] = {SHA256: _credential("first")}
        cache = CredentialCache()
        await cache.follow(store)  # type: ignore[arg-type]
        found = cache.lookup("ann", SHA256)
        assert found is not None and found.to_kafka() == store.users["ann"][SHA256]
        assert cache.lookup("bob", SHA256) is None

        store.users["bob"] = {SHA256: _credential("second")}
        del store.users["ann"]
        store.notify()
        store.notify()  # arrives during the first reload: one more read, not two
        await _settle()
        assert cache.lookup("ann", SHA256) is None
        assert cache.lookup("bob", SHA256) is not None
        assert store.reads == 3

        store.failing = True
        store.notify()
        await _settle()
        assert cache.lookup("bob", SHA256) is not None  # the last credentials read still hold
        cache.stop()

    asyncio.run(scenario())
