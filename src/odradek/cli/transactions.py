"""``odradek transactions list | describe | describe-producers | abort``: what
``kafka-transactions.sh`` shows and does, with its option names."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import (
    columns,
    output_option,
    wants_json,
    write_json,
    write_records,
    write_result,
    write_table,
)
from odradek.client.admin import TransactionAdmin
from odradek.client.core import ClientError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    txns = commands.add_parser(
        "transactions", help="list and describe transactions and producers, abort a hanging one"
    )
    connection_options(txns, DEFAULT_BOOTSTRAP, 30.0)
    actions = txns.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="every transactional id of every coordinator")
    listing.add_argument("--state", action="append", default=[], help="only in this state")
    listing.add_argument(
        "--producer-id", type=int, action="append", default=[], help="only of this producer"
    )
    listing.add_argument(
        "--duration-ms", type=int, default=-1, help="only transactions running at least this long"
    )
    listing.set_defaults(run=run_command(_list, "odradek transactions"))

    describe = actions.add_parser("describe", help="one transactional id at its coordinator")
    describe.add_argument("--transactional-id", required=True)
    describe.set_defaults(run=run_command(_describe, "odradek transactions"))

    producers = actions.add_parser(
        "describe-producers", help="the producers a partition's leader knows"
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    producers.set_defaults(run=run_command(_describe_producers, "odradek transactions"))

    abort = actions.add_parser(
        "abort",
        help="abort a hanging transaction in one partition (its ABORT marker), found by the "
        "offset it started at or given by producer id, epoch and coordinator epoch",
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="the first offset of the transaction")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    abort.set_defaults(run=run_command(_abort, "odradek transactions"))
    for action in (listing, describe, producers, abort):
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)
        output_option(action)


_LIST_COLUMNS = columns(
    ("TransactionalId", "transactional_id"),
    ("Coordinator", "coordinator"),
    ("ProducerId", "producer_id"),
    ("State", "state"),
)
_DESCRIBE_COLUMNS = columns(
    ("CoordinatorId", "coordinator"),
    ("TransactionalId", "transactional_id"),
    ("ProducerId", "producer_id"),
    ("ProducerEpoch", "producer_epoch"),
    ("TransactionState", "state"),
    ("TransactionTimeoutMs", "timeout_ms"),
    ("CurrentTransactionStartTimeMs", "start_ms"),
    ("TransactionDurationMs", "duration_ms"),
    ("TopicPartitions", "partitions_text"),
)
_PRODUCER_COLUMNS = columns(
    ("ProducerId", "producer_id"),
    ("ProducerEpoch", "producer_epoch"),
    ("LatestCoordinatorEpoch", "coordinator_epoch"),
    ("LastSequence", "last_sequence"),
    ("LastTimestamp", "last_timestamp"),
    ("CurrentTransactionStartOffset", "current_transaction_start_offset"),
)


async def _list(args: argparse.Namespace, out: TextIO) -> int:
    async with await TransactionAdmin.connect(
        args.bootstrap_server, timeout_s=args.timeout
    ) as admin:
        listed = await admin.list_transactions(args.state, args.producer_id, args.duration_ms)
    records = [
        {
            "transactional_id": t.transactional_id,
            "coordinator": t.coordinator_id,
            "producer_id": t.producer_id,
            "state": t.state,
        }
        for t in listed
    ]
    write_records(args, records, _LIST_COLUMNS, out)
    return 0


async def _describe(args: argparse.Namespace, out: TextIO) -> int:
    async with await TransactionAdmin.connect(
        args.bootstrap_server, timeout_s=args.timeout
    ) as admin:
        info = await admin.describe_transaction(args.transactional_id)
    if info is None:
        if wants_json(args):
            write_json(None, out)
        else:
            out.write(f"Transactional id '{args.transactional_id}' does not exist.\n")
        return 2
    now = int(time.time() * 1000)
    started = info.start_ms >= 0
    record = {
        "coordinator": info.coordinator_id,
        "transactional_id": info.transactional_id,
        "producer_id": info.producer_id,
        "producer_epoch": info.producer_epoch,
        "state": info.state,
        "timeout_ms": info.timeout_ms,
        "start_ms": info.start_ms if started else None,
        "duration_ms": now - info.start_ms if started else None,
        "partitions": [{"topic": t, "partition": p} for t, p in sorted(info.partitions)],
    }
    if wants_json(args):
        write_json(record, out)
        return 0
    partitions = ",".join(f"{t}-{p}" for t, p in sorted(info.partitions))
    write_table([{**record, "partitions_text": partitions}], _DESCRIBE_COLUMNS, out)
    return 0


async def _describe_producers(args: argparse.Namespace, out: TextIO) -> int:
    async with await TransactionAdmin.connect(
        args.bootstrap_server, timeout_s=args.timeout
    ) as admin:
        producers = await admin.describe_producers(args.topic, args.partition)
    records = [
        {
            "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch,
            "coordinator_epoch": p.coordinator_epoch,
            "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "current_transaction_start_offset": p.current_txn_start_offset
            if p.current_txn_start_offset >= 0
            else None,
        }
        for p in producers
    ]
    if wants_json(args):
        write_json(records, out)
        return 0
    # kafka-transactions.sh prints None where no transaction is open.
    field = "current_transaction_start_offset"
    rows = [{**r, field: "None" if r[field] is None else r[field]} for r in records]
    write_table(rows, _PRODUCER_COLUMNS, out)
    return 0


async def _abort(args: argparse.Namespace, out: TextIO) -> int:
    async with await TransactionAdmin.connect(
        args.bootstrap_server, timeout_s=args.timeout
    ) as admin:
        if args.start_offset is not None:
            found = [
                p
                for p in await admin.describe_producers(args.topic, args.partition)
                if p.current_txn_start_offset == args.start_offset
            ]
            if not found:
                raise ClientError(
                    f"no open transaction in {args.topic}-{args.partition} starts at offset "
                    f"{args.start_offset}"
                )
            producer = found[0]
            pid, epoch, coordinator_epoch = (
                producer.producer_id,
                producer.producer_epoch,
                max(producer.coordinator_epoch, 0),
            )
        elif None not in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
            pid, epoch, coordinator_epoch = (
                args.producer_id,
                args.producer_epoch,
                args.coordinator_epoch,
            )
        else:
            raise ClientError(
                "give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch"
            )
        await admin.abort_transaction(args.topic, args.partition, pid, epoch, coordinator_epoch)
    result = {
        "topic": args.topic,
        "partition": args.partition,
        "producer_id": pid,
        "producer_epoch": epoch,
        "aborted": True,
    }
    text = (
        f"Aborted the transaction of producer {pid} (epoch {epoch}) in "
        f"{args.topic}-{args.partition}."
    )
    write_result(args, result, text, out)
    return 0
