"""AddPartitionsToTxn (24): partitions join a producer's transaction at its coordinator.

Versions 0-3 are the producer's (one transaction); version 4 is the brokers' (KIP-890: many
transactions, and ``verify_only`` — a partition leader asking whether a transactional produce
goes to a partition of the producer's ongoing transaction), and the way a partition leader adds
a partition for a transaction version 2 producer (``verify_only`` false). Version 5 is version 4
that may answer TRANSACTION_ABORTABLE (KIP-890). Partitions the cluster does not have are refused
with UNKNOWN_TOPIC_OR_PARTITION and the others of the request are then not attempted, as Kafka
does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from odradek.coordinator.common.runtime import CoordinatorError
from odradek.protocol.errors import ErrorCode
from odradek.server.authorize import transaction_denials
from odradek.server.context import RequestContext, Response
from odradek.server.registry import handles
from odradek.server.txn_answers import for_version

_FIRST_WITH_PRODUCER_FENCED = 2
_FIRST_BATCHED = 4


def _partitions(topics: Iterable[Any]) -> list[tuple[str, int]]:
    return [(topic.name, int(p)) for topic in topics for p in topic.partitions]


def _by_topic(results: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), code in results.items():
        topics.setdefault(topic, []).append(
            {"partition_index": index, "partition_error_code": code}
        )
    return [{"name": name, "results_by_partition": ps} for name, ps in topics.items()]


async def _add(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[tuple[str, int]],
    verify_only: bool = False,
) -> dict[tuple[str, int], ErrorCode]:
    refused = transaction_denials(ctx, transactional_id, partitions)
    if refused:
        return refused
    cluster = ctx.services.cluster
    unknown = {tp for tp in partitions if cluster.partition_info(*tp) is None}
    if unknown:
        return {
            tp: (
                ErrorCode.unknown_topic_or_partition
                if tp in unknown
                else ErrorCode.operation_not_attempted
            )
            for tp in partitions
        }
    transactions = ctx.services.transactions
    if verify_only:
        return transactions.coordinator.verify_partitions(
            transactional_id, producer_id, producer_epoch, partitions
        )
    try:
        answer = await transactions.write(
            transactional_id,
            lambda txns: txns.answer(
                txns.coordinator.add_partitions(
                    transactional_id, producer_id, producer_epoch, partitions
                )
            ),
            api_key=ctx.header.api_key,
        )
    except CoordinatorError as e:
        return dict.fromkeys(partitions, e.code)
    return dict.fromkeys(partitions, answer.error)


@handles(api_key=24, min_version=0, max_version=5)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> Response:
    if ctx.version < _FIRST_BATCHED:
        results = await _add(
            ctx,
            request.v3_and_below_transactional_id,
            int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch),
            _partitions(request.v3_and_below_topics),
        )
        results = {
            tp: for_version(code, ctx.version, _FIRST_WITH_PRODUCER_FENCED)
            for tp, code in results.items()
        }
        return ctx.respond(throttle_time=0, results_by_topic_v3_and_below=_by_topic(results))
    answers = []
    for txn in request.transactions:
        results = await _add(
            ctx,
            txn.transactional_id,
            int(txn.producer_id),
            int(txn.producer_epoch),
            _partitions(txn.topics),
            bool(txn.verify_only),
        )
        answers.append(
            {"transactional_id": txn.transactional_id, "topic_results": _by_topic(results)}
        )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, results_by_transaction=answers)
