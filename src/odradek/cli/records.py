"""``odradek produce``, ``odradek consume`` and ``odradek records delete``: records in and out
of a topic from the shell, in the spirit of kcat.

``produce`` reads one record per line of standard input (``--key-separator`` splits a key off
the front, as kcat's ``-K``), partitions keyed records as Kafka's default partitioner does and
keyless ones round robin per batch, and writes them with acks=all. ``consume`` prints records
by a ``--format`` of kcat's letters (``%t`` topic, ``%p`` partition, ``%o`` offset, ``%k`` key,
``%s`` value, ``%T`` timestamp, ``%h`` headers), from the beginning, the end, an offset or a
timestamp, until a count or the partitions' ends (or for ever with ``--follow``).
``records delete`` is DeleteRecords: the log start offset moves up to ``--before``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Iterable
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import FORMATS, output_option, wants_json, write_json, write_result
from odradek.client.admin import ClusterAdmin
from odradek.client.core import ClientError
from odradek.client.data import DataClient, OffsetOutOfRange, TopicPartition
from odradek.protocol.partitioner import key_partition
from odradek.protocol.records import Header, NewRecord, Record, encode_batch, iter_records

_BATCH_RECORDS = 1000
_POLL_S = 0.2


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    produce = commands.add_parser("produce", help="write lines of standard input as records")
    connection_options(produce, DEFAULT_BOOTSTRAP, 30.0)
    produce.add_argument("topic")
    produce.add_argument("--partition", type=int, help="all records to this partition")
    produce.add_argument(
        "--key-separator", metavar="SEP", help="split each line at SEP into key and value"
    )
    produce.add_argument(
        "--header", action="append", default=[], metavar="KEY=VALUE", help="on every record"
    )
    output_option(produce)
    produce.set_defaults(run=_run_produce)

    consume = commands.add_parser("consume", help="print records of a topic")
    connection_options(consume, DEFAULT_BOOTSTRAP, 30.0)
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, action="append", help="only these partitions")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="from the log start")
    start.add_argument("--offset", type=int, help="from this offset (in every partition read)")
    start.add_argument("--timestamp", type=int, metavar="MS", help="from this time (ms)")
    consume.add_argument("--count", type=int, help="stop after this many records")
    consume.add_argument("--follow", action="store_true", help="wait for new records")
    consume.add_argument(
        "--format", default="%s\\n", help="kcat's letters: %%t %%p %%o %%k %%s %%T %%h (\\n)"
    )
    consume.add_argument(
        "--output",
        choices=FORMATS,
        default="table",
        help="json: one JSON object per record (JSON lines, as they arrive); table: --format",
    )
    consume.add_argument("--json", action="store_true", help="the same as --output json")
    consume.set_defaults(run=_run_consume)

    records = commands.add_parser("records", help="delete records below an offset")
    connection_options(records, DEFAULT_BOOTSTRAP, 30.0)
    actions = records.add_subparsers(dest="action", required=True)
    delete = actions.add_parser("delete", help="move a partition's log start (DeleteRecords)")
    delete.add_argument("--topic", required=True)
    delete.add_argument("--partition", type=int, required=True)
    delete.add_argument(
        "--before", type=int, required=True, help="the new log start offset (-1: the end)"
    )
    delete.set_defaults(run=run_command(_delete, "odradek records"))
    connection_options(delete, argparse.SUPPRESS, argparse.SUPPRESS)
    output_option(delete)


# -- produce -------------------------------------------------------------------------------------


def _headers(items: Iterable[str]) -> tuple[Header, ...]:
    headers = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ClientError(f"header {item!r} is not KEY=VALUE")
        headers.append(Header(key, value.encode()))
    return tuple(headers)


def produce_lines(
    client: DataClient,
    topic: str,
    lines: Iterable[str],
    *,
    partition: int | None = None,
    key_separator: str | None = None,
    headers: tuple[Header, ...] = (),
) -> int:
    """Write each line as a record (acks=all); how many were written."""
    info = client.describe([topic], auto_create=True).get(topic)
    if info is None:
        raise ClientError(f"topic {topic!r} does not exist")
    if partition is not None and not 0 <= partition < info.partitions:
        raise ClientError(f"{topic} has no partition {partition}")
    round_robin = itertools.cycle(range(info.partitions))
    written = 0
    line_iter = iter(lines)
    while True:
        chunk = list(itertools.islice(line_iter, _BATCH_RECORDS))
        if not chunk:
            return written
        keyless = partition if partition is not None else next(round_robin)
        by_partition: dict[int, list[NewRecord]] = {}
        for line in chunk:
            text = line.rstrip("\n")
            key: bytes | None = None
            if key_separator is not None and key_separator in text:
                key_text, _, text = text.partition(key_separator)
                key = key_text.encode()
            target = (
                partition
                if partition is not None
                else keyless
                if key is None
                else key_partition(key, info.partitions)
            )
            by_partition.setdefault(target, []).append(NewRecord(key, text.encode(), headers))
        now = int(time.time() * 1000)
        client.produce(
            {
                TopicPartition(topic, p): encode_batch(records, now_ms=now)
                for p, records in by_partition.items()
            }
        )
        written += len(chunk)


def _run_produce(args: argparse.Namespace) -> int:
    client = DataClient(args.bootstrap_server, client_id="odradek-produce", timeout_s=args.timeout)
    try:
        count = produce_lines(
            client,
            args.topic,
            sys.stdin,
            partition=args.partition,
            key_separator=args.key_separator,
            headers=_headers(args.header),
        )
    except ClientError as e:
        print(f"odradek produce: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
    if wants_json(args):
        write_json({"topic": args.topic, "records": count}, sys.stdout)
    else:
        print(f"{count} records written to {args.topic}", file=sys.stderr)
    return 0


# -- consume -------------------------------------------------------------------------------------


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode(errors="replace")


def format_record(fmt: str, topic: str, partition: int, record: Record) -> str:
    """``record`` in kcat's ``-f`` letters."""
    out = []
    i = 0
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
    while i < len(fmt):
        c = fmt[i]
        if c == "%" and i + 1 < len(fmt):
            letter = fmt[i + 1]
            i += 2
            if letter == "t":
                out.append(topic)
            elif letter == "p":
                out.append(str(partition))
            elif letter == "o":
                out.append(str(record.offset))
            elif letter == "k":
                out.append(_text(record.key))
            elif letter == "s":
                out.append(_text(record.value))
            elif letter == "T":
                out.append(str(record.timestamp))
            elif letter == "h":
                out.append(",".join(f"{h.key}={_text(h.value)}" for h in record.headers))
            elif letter == "%":
                out.append("%")
            else:
                out.append("%" + letter)
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _json(topic: str, partition: int, record: Record) -> str:
    return json.dumps(
        {
            "topic": topic,
            "partition": partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": None if record.key is None else _text(record.key),
            "value": None if record.value is None else _text(record.value),
            "headers": {h.key: _text(h.value) for h in record.headers},
        }
    )


def consume_records(client: DataClient, args: argparse.Namespace, out: TextIO) -> int:
    """Print records as ``args`` says; how many."""
    info = client.describe([args.topic]).get(args.topic)
    if info is None:
        raise ClientError(f"topic {args.topic!r} does not exist")
    partitions = [TopicPartition(args.topic, p) for p in (args.partition or range(info.partitions))]
    if args.from_beginning:
        positions = client.earliest(partitions)
    elif args.offset is not None:
        positions = dict.fromkeys(partitions, args.offset)
    elif args.timestamp is not None:
        positions = client.list_offsets(partitions, args.timestamp)
        ends = client.latest(partitions)
        positions = {tp: o if o >= 0 else ends[tp] for tp, o in positions.items()}
    else:
        positions = client.latest(partitions)
    printed = 0
    while True:
        at_end = True
        for tp in partitions:
            try:
                fetched = client.fetch(tp, positions[tp])
            except OffsetOutOfRange:
                positions[tp] = client.earliest([tp])[tp]
                at_end = False
                continue
            for _, records in iter_records(fetched.records):
                for record in records:
                    if record.offset < positions[tp]:
                        continue
                    out.write(
                        _json(tp.topic, tp.partition, record) + "\n"
                        if args.json or wants_json(args)
                        else format_record(args.format, tp.topic, tp.partition, record)
                    )
                    printed += 1
                    positions[tp] = record.offset + 1
                    if args.count is not None and printed >= args.count:
                        return printed
            positions[tp] = max(positions[tp], fetched.next_offset)
            if positions[tp] < fetched.high_watermark:
                at_end = False
        out.flush()
        if at_end:
            if not args.follow:
                return printed
            time.sleep(_POLL_S)


def _run_consume(args: argparse.Namespace) -> int:
    client = DataClient(args.bootstrap_server, client_id="odradek-consume", timeout_s=args.timeout)
    try:
        consume_records(client, args, sys.stdout)
    except ClientError as e:
        print(f"odradek consume: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        client.close()
    return 0


# -- records delete ------------------------------------------------------------------------------


async def _delete(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        start = await admin.delete_records(args.topic, args.partition, args.before)
    result = {"topic": args.topic, "partition": args.partition, "log_start_offset": start}
    text = f"{args.topic}-{args.partition}: log start offset is now {start}"
    write_result(args, result, text, out)
    return 0
