"""AlterUserScramCredentials (51): add, replace or delete users' SCRAM credentials (KIP-554).

The client sends the salted password (never the password); the broker derives the stored and
server keys and keeps those, with the salt and iterations, in the metadata store as Kafka's
``/config/users/<name>`` entries. Each user gets one result: Kafka's checks, in its order
(a user named twice for one mechanism, an unknown mechanism, iterations outside 4096..16384, an
empty name, deleting what does not exist) answer for the whole user, and nothing of that user
changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from odradek.cluster.metadata.store import MetadataStoreError
from odradek.protocol.errors import ErrorCode
from odradek.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS_BY_TYPE,
    MIN_ITERATIONS,
    credential_from_salted,
)
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles


def _refusal(
    user: str, deletions: list[Any], upsertions: list[Any], current: dict[str, str]
) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    named = Counter(int(d.mechanism) for d in deletions) + Counter(
        int(u.mechanism) for u in upsertions
    )
    if any(count > 1 for count in named.values()):
        return (
            ErrorCode.duplicate_resource,
            "A user credential cannot be altered twice in the same request",
        )
    for item in [*deletions, *upsertions]:
        if int(item.mechanism) not in MECHANISMS_BY_TYPE:
            return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    for upsertion in upsertions:
        if not MIN_ITERATIONS <= int(upsertion.iterations) <= MAX_ITERATIONS:
            return (
                ErrorCode.unacceptable_credential,
                f"Iterations {upsertion.iterations} not in {MIN_ITERATIONS}..{MAX_ITERATIONS}",
            )
        if not upsertion.salt or not upsertion.salted_password:
            return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
    for deletion in deletions:
        if MECHANISMS_BY_TYPE[int(deletion.mechanism)] not in current:
            return (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
    return None


@handles(api_key=51, min_version=0, max_version=0)
async def handle_alter_user_scram_credentials(ctx: RequestContext, request: Any) -> Response:
    store = ctx.services.topics.store
    users: dict[str, tuple[list[Any], list[Any]]] = {}
    for deletion in request.deletions:
        users.setdefault(deletion.name, ([], []))[0].append(deletion)
    for upsertion in request.upsertions:
        users.setdefault(upsertion.name, ([], []))[1].append(upsertion)
    results = []
    for user, (deletions, upsertions) in users.items():
        try:
            current = await store.user_configs(user)
            refusal = _refusal(user, deletions, upsertions, current)
            if refusal is None:
                for deletion in deletions:
                    del current[MECHANISMS_BY_TYPE[int(deletion.mechanism)]]
                for upsertion in upsertions:
                    mechanism = MECHANISMS_BY_TYPE[int(upsertion.mechanism)]
                    current[mechanism] = credential_from_salted(
                        mechanism,
                        bytes(upsertion.salted_password),
                        bytes(upsertion.salt),
                        int(upsertion.iterations),
                    ).to_kafka()
                await store.set_user_configs(user, current)
        except MetadataStoreError as e:
            refusal = ErrorCode.unknown_server_error, f"metadata store: {e}"
        code, message = refusal if refusal is not None else (ErrorCode.none, None)
        results.append({"user": user, "error_code": code, "error_message": message})
    return ctx.respond(throttle_time=0, results=results)
