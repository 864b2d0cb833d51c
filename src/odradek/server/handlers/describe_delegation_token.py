"""DescribeDelegationToken (41): the tokens of the owners named (none named: every token; an
empty list: none), each shown to its owner and renewers, and to others allowed DESCRIBE on the
token (DELEGATION_TOKEN resource) or DESCRIBE_TOKENS on its owner (USER resource), as Kafka
filters them. Each token is answered with its HMAC, as Kafka does."""

from __future__ import annotations

from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.security.acl import AclOperation, ResourceType
from odradek.security.delegation_tokens import split_principal, visible
from odradek.server.authorize import permits, permits_user, token_requests_allowed
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


@handles(api_key=41, min_version=1, max_version=3)
async def handle_describe_delegation_token(ctx: RequestContext, request: Any) -> Response:
    tokens = ctx.services.tokens
    if not token_requests_allowed(ctx):
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.delegation_token_request_not_allowed, tokens=[]
        )
    if tokens is None or not tokens.enabled:
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.delegation_token_auth_disabled, tokens=[]
        )
    owners = (
        None
        if request.owners is None
        else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    )

    def may_describe_token(token_id: str) -> bool:
        return permits(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id)

    def may_describe_owner(owner: str) -> bool:
        return permits_user(ctx, AclOperation.DESCRIBE_TOKENS, owner)

    shown = []
    for token in sorted(tokens.state.tokens.values(), key=lambda t: t.issue_ms):
        if owners == [] or not visible(
            token, ctx.session.principal, owners, may_describe_token, may_describe_owner
        ):
            continue
        owner_type, owner_name = split_principal(token.owner)
        requester_type, requester_name = split_principal(token.requester)
        shown.append(
            {
                "principal_type": owner_type,
                "principal_name": owner_name,
                "token_requester_principal_type": requester_type,
                "token_requester_principal_name": requester_name,
                "issue_timestamp": token.issue_ms,
                "expiry_timestamp": token.expiry_ms,
                "max_timestamp": token.max_ms,
                "token_id": token.token_id,
                "hmac": tokens.state.hmac_of(token.token_id),
                "renewers": [
                    dict(zip(("principal_type", "principal_name"), split_principal(r), strict=True))
                    for r in token.renewers
                ],
            }
        )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, tokens=shown)
