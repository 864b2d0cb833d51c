"""CreateDelegationToken (38): a delegation token for the requester, or on behalf of another
owner (v3, KIP-373: the requester needs CREATE_TOKENS on that owner's USER resource), with
renewers (users only) and a maximum lifetime capped by ``delegation.token.max.lifetime.ms``.
Kafka's order of checks: a connection that may not ask for tokens (unauthenticated, or logged in
with a token), then the owner's authorisation, then the renewers' type, then tokens disabled."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation
from odradek.security.delegation_tokens import split_principal
from odradek.server.authorize import permits_user, token_requests_allowed
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles

_MS = datetime.timedelta(milliseconds=1)


@handles(api_key=38, min_version=1, max_version=3)
async def handle_create_delegation_token(ctx: RequestContext, request: Any) -> Response:
    requester = ctx.session.principal
    owner_name = getattr(request, "owner_principal_name", None)
    owner = f"{request.owner_principal_type}:{owner_name}" if owner_name else requester

    def answer(code: ErrorCode, **fields: Any) -> Response:
        owner_type, owner_plain = split_principal(owner)
        requester_type, requester_plain = split_principal(requester)
        values: dict[str, Any] = {
            "issue_timestamp": -1,
            "expiry_timestamp": -1,
            "max_timestamp": -1,
            "token_id": "",
            "hmac": b"",
            **fields,
        }
        return ctx.respond(
            throttle_time=0,
            error_code=code,
            principal_type=owner_type,
            principal_name=owner_plain,
            token_requester_principal_type=requester_type,
            token_requester_principal_name=requester_plain,
            **values,
        )

    if not token_requests_allowed(ctx):
        return answer(ErrorCode.delegation_token_request_not_allowed)
    if owner != requester and not permits_user(ctx, AclOperation.CREATE_TOKENS, owner):
        return answer(ErrorCode.delegation_token_authorization_failed)
    if any(r.principal_type != "User" for r in request.renewers):
        return answer(ErrorCode.invalid_principal_type)
    tokens = ctx.services.tokens
    if tokens is None or not tokens.enabled:
        return answer(ErrorCode.delegation_token_auth_disabled)
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in request.renewers]
    try:
        token, hmac = await tokens.create(owner, requester, renewers, request.max_lifetime // _MS)
    except MetadataStoreError:
        return answer(ErrorCode.unknown_server_error)
    return answer(
        ErrorCode.none,
        issue_timestamp=token.issue_ms,
        expiry_timestamp=token.expiry_ms,
        max_timestamp=token.max_ms,
        token_id=token.token_id,
        hmac=hmac,
    )
