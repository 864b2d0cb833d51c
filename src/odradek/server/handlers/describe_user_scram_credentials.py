"""DescribeUserScramCredentials (50): which SCRAM mechanisms each user has a credential for, and
with how many iterations (never the salt or keys), as Kafka answers (KIP-554). No users named:
every user with a credential."""

from __future__ import annotations

from collections import Counter
from typing import Any

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol.errors import ErrorCode
from odradek.security.scram import MECHANISM_TYPES, ScramCredential
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _infos(configs: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "mechanism": MECHANISM_TYPES[mechanism],
            "iterations": ScramCredential.from_kafka(text).iterations,
        }
        for mechanism, text in sorted(configs.items())
        if mechanism in MECHANISM_TYPES
    ]


@handles(api_key=50, min_version=0, max_version=0)
async def handle_describe_user_scram_credentials(ctx: RequestContext, request: Any) -> Response:
    store = ctx.services.topics.store
    try:
        if not request.users:
            results = []
            for user in await store.user_names():
                infos = _infos(await store.user_configs(user))
                if infos:
                    results.append(
                        {
                            "user": user,
                            "error_code": ErrorCode.none,
                            "error_message": None,
                            "credential_infos": infos,
                        }
                    )
            return ctx.respond(
                throttle_time=0, error_code=ErrorCode.none, error_message=None, results=results
            )
        names = [u.name for u in request.users]
        repeated = {name for name, count in Counter(names).items() if count > 1}
        results = []
        for name in dict.fromkeys(names):
            message: str | None
            if name in repeated:
                code, message, infos = (
                    ErrorCode.duplicate_resource,
                    f"Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {name}",
                    [],
                )
            else:
                infos = _infos(await store.user_configs(name))
                code, message = (
                    (ErrorCode.none, None)
                    if infos
                    else (
                        ErrorCode.resource_not_found,
                        f"Attempt to describe a user credential that does not exist: {name}",
                    )
                )
            results.append(
                {
                    "user": name,
                    "error_code": code,
                    "error_message": message,
                    "credential_infos": infos,
                }
            )
    except MetadataStoreError as e:
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.unknown_server_error,
            error_message=f"metadata store: {e}",
            results=[],
        )
    return ctx.respond(
        throttle_time=0, error_code=ErrorCode.none, error_message=None, results=results
    )
