"""The broker's delegation tokens follow the store: a token made through one broker's service
reaches another's copy through the change notification, its SCRAM credentials are derived off
the loop before the first login asks, and an expired token is removed by the expiry check."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from odradek.clock import ManualClock
from odradek.cluster.metadata.store import LocalMetadataStore
from odradek.protocol.errors import ErrorCode
from odradek.security.delegation_tokens import TokenSettings
from odradek.security.scram import SCRAM_SHA_256
from odradek.server.delegation_tokens import DelegationTokens

DAY = 24 * 3_600_000


async def _until(condition: Callable[[], bool], timeout: float = 10) -> None:
    """Wait (on the loop) for what a worker thread will make true."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


def test_tokens_reach_every_copy_with_their_credentials(tmp_path: Path) -> None:
    clock = ManualClock()
    store = LocalMetadataStore(tmp_path)
    settings = TokenSettings("secret", 7 * DAY, DAY)

    async def scenario() -> None:
        here = DelegationTokens(settings, clock, store)
        there = DelegationTokens(settings, clock, store)
        await here.follow()
        await there.follow()
        token, hmac = await here.create("User:alice", "User:alice", [], -1)
        await _until(lambda: token.token_id in there.state.tokens)
        await _until(lambda: not there.state.underived() and not here.state.underived())
        login = there.login(token.token_id, SCRAM_SHA_256)
        assert login is not None and login.owner == "User:alice"

        assert await there.renew("User:bob", hmac, -1) == (
            ErrorCode.delegation_token_owner_mismatch,
            -1,
        )
        clock.advance(DAY + 1)
        assert there.login(token.token_id, SCRAM_SHA_256) is None  # expired: refused at once
        await there.remove_expired()
        assert await store.delegation_tokens() == []
        await _until(lambda: not here.state.tokens)
        here.stop()
        there.stop()

    asyncio.run(scenario())
    store.close()


def test_without_a_secret_key_there_are_no_tokens(tmp_path: Path) -> None:
    store = LocalMetadataStore(tmp_path)
    tokens = DelegationTokens(TokenSettings(None), ManualClock(), store)
    asyncio.run(tokens.follow())
    assert not tokens.enabled
    assert tokens.login("any", SCRAM_SHA_256) is None
    store.close()
