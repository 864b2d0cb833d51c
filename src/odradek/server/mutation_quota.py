"""KIP-599's controller mutation quota for one CreateTopics, CreatePartitions or DeleteTopics
request: the partitions it creates or deletes count against the client's
``controller_mutation_rate`` (partitions per second).

The versions that know the error (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+) are
held strictly, as Kafka holds them: while the client is over its quota, each further topic of
the request fails with THROTTLING_QUOTA_EXCEEDED, and the answer's throttle time says when to
try again; a topic taken may take the client over. Older versions are never refused: what they
mutate is recorded and the answer only carries the throttle time. Validate-only requests mutate
nothing and count nothing. A topic counts once its mutation succeeded.

The broker's event loop only.
"""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.server.client_throttle import user_of
from odradek.server.context import RequestContext

THROTTLED = "The throttling quota has been exceeded."


class MutationQuota:
    """The quota a request's topics are checked against and recorded in, in their order."""

    def __init__(self, ctx: RequestContext, *, strict: bool, validate_only: bool) -> None:
        quotas = ctx.services.quotas
        self._manager = (
            quotas.mutation
            if quotas is not None and quotas.mutation.enabled and not validate_only
            else None
        )
        self._user = user_of(ctx.session.principal)
        self._client = ctx.header.client_id or ""
        self._strict = strict

    def check(self) -> None:
        """Raise THROTTLING_QUOTA_EXCEEDED when the next topic must be refused."""
        manager = self._manager
        if manager is None or not self._strict:
            return
        if manager.throttle_now(self._user, self._client) > 0:
            raise KafkaError(ErrorCode.throttling_quota_exceeded, THROTTLED)

    def record(self, partitions: int) -> None:
        """A topic's mutation succeeded: count its partitions."""
        if self._manager is not None and partitions > 0:
            self._manager.record(self._user, self._client, partitions)

    def throttle_ms(self) -> int:
        """What the answer carries (0: within the quota)."""
        if self._manager is None:
            return 0
        return self._manager.throttle_now(self._user, self._client)
