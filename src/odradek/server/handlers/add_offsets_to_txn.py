"""AddOffsetsToTxn (25): a group's offsets become part of a producer's transaction — the
``__consumer_offsets`` partition of the group is added to it, so that its TxnOffsetCommit
records get the transaction's marker."""

from __future__ import annotations

from typing import Any

from odradek.cluster.metadata.view import CONSUMER_OFFSETS
from odradek.coordinator.common.runtime import CoordinatorError
from odradek.server.authorize import GROUP, TRANSACTIONAL_ID, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.txn_answers import for_version

_FIRST_WITH_PRODUCER_FENCED = 2


@handles(api_key=25, min_version=0, max_version=4)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return refusal(ctx, TRANSACTIONAL_ID)
    if not permits(ctx, Op.READ, GROUP, request.group_id):
        return refusal(ctx, GROUP)
    tid = request.transactional_id
    offsets = [(CONSUMER_OFFSETS, ctx.services.groups.shard.partition_for(request.group_id))]
    try:
        answer = await ctx.services.transactions.write(
            tid,
            lambda txns: txns.answer(
                txns.coordinator.add_partitions(
                    tid, int(request.producer_id), int(request.producer_epoch), offsets
                )
            ),
            api_key=ctx.header.api_key,
        )
        error = answer.error
    except CoordinatorError as e:
        error = e.code
    return ctx.respond(
        throttle_time=0, error_code=for_version(error, ctx.version, _FIRST_WITH_PRODUCER_FENCED)
    )
