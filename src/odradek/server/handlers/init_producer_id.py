"""InitProducerId (22): producer ids and epochs, for idempotent and transactional producers.

Without a ``transactional.id`` any broker hands out a fresh id (KIP-360: or bumps the epoch of
the id a producer already has). With one, the transaction coordinator of that id answers: the
id's producer id with its epoch bumped, which fences every older producer of the id.
"""

from __future__ import annotations

from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.coordinator.transaction.coordinator import TxnAnswer
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import CLUSTER, TRANSACTIONAL_ID, producer_permitted, refusal
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.txn_answers import for_version

_FIRST_WITH_PRODUCER_FENCED = 4
# How long a request waits for a block of producer ids (a ZooKeeper write in a cluster) before
# it is answered COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
PRODUCER_ID_WAIT_S = 10.0


@handles(api_key=22, min_version=0, max_version=5)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Response:
    producer_id = int(getattr(request, "producer_id", -1))
    epoch = int(getattr(request, "producer_epoch", -1))
    if not producer_permitted(ctx, request.transactional_id):
        rtype = CLUSTER if request.transactional_id is None else TRANSACTIONAL_ID
        return refusal(ctx, rtype, producer_id=-1, producer_epoch=-1)
    if not await ctx.services.producer_ids.ready(PRODUCER_ID_WAIT_S):
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.coordinator_load_in_progress,
            producer_id=-1,
            producer_epoch=-1,
        )
    if request.transactional_id is not None:
        tid: str = request.transactional_id
        timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
        try:
            answer = await ctx.services.transactions.write(
                tid,
                lambda txns: txns.answer(
                    txns.coordinator.init_producer_id(tid, timeout_ms, producer_id, epoch)
                ),
                api_key=ctx.header.api_key,
            )
        except CoordinatorError as e:
            answer = TxnAnswer(e.code)
        return ctx.respond(
            throttle_time=0,
            error_code=for_version(answer.error, ctx.version, _FIRST_WITH_PRODUCER_FENCED),
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )
    if producer_id >= 0 and 0 <= epoch < 32767:
        # KIP-360: a producer recovering from an error bumps its own epoch and keeps its id.
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.none,
            producer_id=producer_id,
            producer_epoch=epoch + 1,
        )
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        producer_id=ctx.services.producer_ids.next_id(),
        producer_epoch=0,
    )
