"""TxnOffsetCommit (28): a transactional producer commits a group's offsets inside its transaction.

Sent to the group's coordinator after AddOffsetsToTxn. The offsets are written to the group's
``__consumer_offsets`` partition as a transactional batch of the producer and stay pending until
the transaction's marker lands there (WriteTxnMarkers). Versions 0-5, as Kafka 4 serves them: v2
adds the leader epoch, v3 the generation, member and instance ids (and is flexible), v4 only
allows TRANSACTION_ABORTABLE, v5 is transaction version 2 (KIP-890 part 2), whose producers
send no AddOffsetsToTxn: the commit adds the group's partition to the transaction itself.

Before writing, the transaction coordinator is asked whether the group's partition is in the
producer's ongoing transaction (KIP-890's verification, ``transaction.partition.verification.
enable``): a commit for a group the producer never added is refused. From v5 it is asked to add
it instead, whatever that setting says.

As Kafka: an empty group id is INVALID_GROUP_ID; partitions the cluster does not have
UNKNOWN_TOPIC_OR_PARTITION; the rest go to the coordinator together, and their answer waits until
the commit is replicated.
"""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.view import CONSUMER_OFFSETS
from odradek.coordinator.group.messages import TxnCommitRequest
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import Op, transaction_denials
from odradek.server.context import RequestContext, Response
from odradek.server.offset_commits import commit_offsets, offsets_to_commit
from odradek.server.partition_errors import partition_errors
from odradek.server.registry import handles

_FIRST_WITH_TRANSACTION_ABORTABLE = 4
_FIRST_OF_TRANSACTION_VERSION_2 = 5


async def _verify(ctx: RequestContext, request: Any, add: bool) -> ErrorCode | None:
    """KIP-890: the group's ``__consumer_offsets`` partition must be in the producer's ongoing
    transaction (AddOffsetsToTxn added it), as the transaction coordinator says; the error for
    every partition when it is not, as Kafka 3.6+ answers it."""
    services = ctx.services
    index = services.groups.shard.partition_for(request.group_id)
    verdicts = await services.transactions.verify(
        request.transactional_id,
        int(request.producer_id),
        int(request.producer_epoch),
        [(CONSUMER_OFFSETS, index)],
        add=add,
    )
    code = next(iter(verdicts.values()), ErrorCode.none)
    if code == ErrorCode.none:
        return None
    if code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch):
        return ErrorCode.invalid_producer_epoch
    if code in (
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.concurrent_transactions,
    ):
        return ErrorCode.coordinator_load_in_progress  # retriable for every client
    if ctx.version >= _FIRST_WITH_TRANSACTION_ABORTABLE:
        return ErrorCode.transaction_abortable
    return ErrorCode.invalid_txn_state


@handles(api_key=28, min_version=0, max_version=5)
async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Response:
    requested = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    if not request.group_id:
        refused = dict.fromkeys(requested, ErrorCode.invalid_group_id)
        return ctx.respond(throttle_time=0, topics=partition_errors(request.topics, refused))
    unauthorized = transaction_denials(
        ctx, request.transactional_id, requested, Op.READ, request.group_id
    )
    if unauthorized:
        return ctx.respond(throttle_time=0, topics=partition_errors(request.topics, unauthorized))

    add = ctx.version >= _FIRST_OF_TRANSACTION_VERSION_2
    if add or ctx.services.config.get_bool("transaction.partition.verification.enable"):
        refusal = await _verify(ctx, request, add)
        if refusal is not None:
            refused = dict.fromkeys(requested, refusal)
            return ctx.respond(throttle_time=0, topics=partition_errors(request.topics, refused))

    commits, results = offsets_to_commit(ctx, request.topics)
    if commits:
        commit = TxnCommitRequest(
            group_id=request.group_id,
            transactional_id=request.transactional_id,
            producer_id=int(request.producer_id),
            producer_epoch=int(request.producer_epoch),
            offsets=tuple(commits),
            generation_id=int(getattr(request, "generation_id", -1)),
            member_id=getattr(request, "member_id", ""),
            group_instance_id=getattr(request, "group_instance_id", None),
        )
        results.update(
            await commit_offsets(
                ctx, commit, lambda c: c.offsets.commit_transactional_offsets(commit)
            )
        )
    return ctx.respond(throttle_time=0, topics=partition_errors(request.topics, results))
