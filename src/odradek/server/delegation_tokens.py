"""The broker's delegation tokens (KIP-48): Kafka's rules
(:mod:`odradek.security.delegation_tokens`) over a copy of the tokens kept in memory, and the
metadata store that persists them.

SCRAM logins look a token up in the middle of a SASL step, on the event loop, so they read the
copy, never the store. The copy is read whole when the broker starts and again after each
``"delegation_tokens"`` change notification (a token made, renewed, expired or removed on any
broker: Kafka's ``/delegation_token/token_changes`` in ZooKeeper), off the loop through the
store's coroutines; a broker's own changes apply to its copy at once.

Threads: the event loop's only.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.clock import Clock
from odradek.cluster.metadata.store import MetadataStore
from odradek.following import StoreFollower
from odradek.protocol.errors import ErrorCode
from odradek.security.delegation_tokens import (
    TokenChange,
    TokenInformation,
    TokenSettings,
    TokenState,
    derive_credential,
)
from odradek.security.scram import TokenLogin

log = logging.getLogger(__name__)


class DelegationTokens:
    """Create, renew, expire and list tokens; find a token's SCRAM credential for a login."""

    def __init__(self, settings: TokenSettings, clock: Clock, store: MetadataStore) -> None:
        self.settings = settings
        self.state = TokenState(settings, clock)
        self._store = store
        self._follower = StoreFollower(
            store.delegation_tokens, self._replace, {"delegation_tokens"}, "the delegation tokens"
        )

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    async def follow(self) -> None:
        """Read every token now, and again after each change notification."""
        if self.enabled:
            await self._follower.follow(self._store)

    async def _replace(self, tokens: list[TokenInformation]) -> None:
        self.state.replace_all(tokens)
        await self._derive()

    async def _derive(self) -> None:
        # PBKDF2 takes milliseconds: on a thread, so that logins find the credential ready.
        for token_id, mechanism in self.state.underived():
            password = self.state.password_of(token_id)
            credential = await asyncio.to_thread(derive_credential, mechanism, password)
            self.state.add_credential(token_id, mechanism, credential)

    def login(self, token_id: str, mechanism: str) -> TokenLogin | None:
        return self.state.login(token_id, mechanism) if self.enabled else None

    async def create(
        self, owner: str, requester: str, renewers: list[str], max_lifetime_ms: int
    ) -> tuple[TokenInformation, bytes]:
        """A new token, stored, and its HMAC."""
        token = self.state.create(owner, requester, renewers, max_lifetime_ms)
        await self._store.put_delegation_token(token)
        self.state.learn(token)
        log.info("created delegation token %s for %s", token.token_id, owner)
        # Ready for the token's first login (the loop serves others meanwhile).
        await self._derive()
        return token, self.state.hmac_of(token.token_id)

    async def renew(self, principal: str, hmac: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        return await self._apply(self.state.renew(principal, hmac, period_ms))

    async def expire(self, principal: str, hmac: bytes, period_ms: int) -> tuple[ErrorCode, int]:
        return await self._apply(self.state.expire(principal, hmac, period_ms))

    async def _apply(self, change: TokenChange) -> tuple[ErrorCode, int]:
        if change.write is not None:
            await self._store.put_delegation_token(change.write)
            self.state.learn(change.write)
        if change.remove is not None:
            await self._store.remove_delegation_token(change.remove)
            self.state.forget(change.remove)
        return change.error, change.expiry_ms

    async def remove_expired(self) -> None:
        """Remove the tokens past their expiry (the broker's expiry check)."""
        for token_id in self.state.expired_tokens():
            log.info("delegation token %s expired", token_id)
            await self._store.remove_delegation_token(token_id)
            self.state.forget(token_id)

    def stop(self) -> None:
        self._follower.stop()
