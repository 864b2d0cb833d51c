"""EndTxn (26): commit or abort a producer's transaction at its coordinator.

The answer comes once the coordinator's PrepareCommit/PrepareAbort record is replicated; the
markers follow in the background (a new transaction of the producer meanwhile gets
CONCURRENT_TRANSACTIONS until they are written). Version 5 is KIP-890's second part
(transaction version 2): the coordinator bumps the producer's epoch with every end and answers
the producer id and epoch of its next transaction.
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.server.authorize import TRANSACTIONAL_ID, Op, permits, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.txn_answers import for_version

_FIRST_WITH_PRODUCER_FENCED = 2
_FIRST_OF_TRANSACTION_VERSION_2 = 5


@handles(api_key=26, min_version=0, max_version=5)
async def handle_end_txn(ctx: RequestContext, request: Any) -> Response:
    if not permits(ctx, Op.WRITE, TRANSACTIONAL_ID, request.transactional_id):
        return refusal(ctx, TRANSACTIONAL_ID)
    tid = request.transactional_id
    bump = ctx.version >= _FIRST_OF_TRANSACTION_VERSION_2
    producer_id, producer_epoch = -1, -1
    try:
        answer = await ctx.services.transactions.write(
            tid,
            lambda txns: txns.answer(
                txns.coordinator.end_txn(
                    tid,
                    int(request.producer_id),
                    int(request.producer_epoch),
                    bool(request.committed),
                    bump,
                )
            ),
            api_key=ctx.header.api_key,
        )
        error = answer.error
        producer_id, producer_epoch = answer.producer_id, answer.producer_epoch
    except CoordinatorError as e:
        error = e.code
    return ctx.respond(
        throttle_time=0,
        error_code=for_version(error, ctx.version, _FIRST_WITH_PRODUCER_FENCED),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
