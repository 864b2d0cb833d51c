"""What the delegation token handlers share: Renew and Expire answer alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import token_requests_allowed
from odradek.server.context import RequestContext
from odradek.server.delegation_tokens import DelegationTokens


async def changed_expiry(
    ctx: RequestContext,
    change: Callable[[DelegationTokens], Awaitable[tuple[ErrorCode, int]]],
) -> tuple[ErrorCode, int]:
    """What RenewDelegationToken and ExpireDelegationToken answer: the error and the token's
    new expiry timestamp (-1 with an error), after Kafka's checks of the connection."""
    tokens = ctx.services.tokens
    if not token_requests_allowed(ctx):
        return ErrorCode.delegation_token_request_not_allowed, -1
    if tokens is None or not tokens.enabled:
        return ErrorCode.delegation_token_auth_disabled, -1
    try:
        return await change(tokens)
    except MetadataStoreError:
        return ErrorCode.unknown_server_error, -1
