"""``odradek configs describe | alter``: a topic's or a broker's configs, as
``kafka-configs.sh`` shows and changes them (DescribeConfigs, IncrementalAlterConfigs)."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, print_table, run_command
from odradek.cli.topics import key_values
from odradek.client.admin import BROKER_RESOURCE, TOPIC_RESOURCE, ClusterAdmin
from odradek.client.core import ClientError

_TYPES = {"topics": TOPIC_RESOURCE, "brokers": BROKER_RESOURCE}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    configs = commands.add_parser("configs", help="describe and alter topic and broker configs")
    connection_options(configs, DEFAULT_BOOTSTRAP, 30.0)
    actions = configs.add_subparsers(dest="action", required=True)
    describe = actions.add_parser("describe", help="the configs of a topic or a broker")
    alter = actions.add_parser("alter", help="set or delete configs of a topic or a broker")
    for action in (describe, alter):
        action.add_argument("--entity-type", choices=sorted(_TYPES), required=True)
        action.add_argument("--entity-name", required=True, help="topic name, or broker id")
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)
    describe.add_argument(
        "--all", action="store_true", help="every setting with its source, defaults included"
    )
    describe.add_argument("--output", choices=("table", "json"), default="table")
    describe.set_defaults(run=run_command(_describe, "odradek configs"))
    alter.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]")
    alter.add_argument("--delete-config", action="append", default=[], metavar="K[,K]")
    alter.set_defaults(run=run_command(_alter, "odradek configs"))


async def _describe(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        entries = await admin.describe_configs(_TYPES[args.entity_type], args.entity_name)
    if not args.all:
        entries = [e for e in entries if e[2] not in ("DEFAULT_CONFIG",)]
    if args.output == "json":
        out.write(
            json.dumps(
                [{"name": n, "value": v, "source": s, "read_only": r} for n, v, s, r in entries],
                indent=2,
            )
            + "\n"
        )
        return 0
    if not entries:
        out.write(f"No configs set for {args.entity_type} {args.entity_name} (--all shows all).\n")
        return 0
    rows: list[tuple[str, ...]] = [("NAME", "VALUE", "SOURCE", "READ-ONLY")]
    rows += [
        (n, "-" if v is None or v == "" else v.replace(" ", "\\u0020"), s, "yes" if r else "no")
        for n, v, s, r in entries
    ]
    print_table(rows, out)
    return 0


async def _alter(args: argparse.Namespace, out: TextIO) -> int:
    set_values = key_values(args.add_config)
    delete = [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]
    if not set_values and not delete:
        raise ClientError("nothing to change: give --add-config or --delete-config")
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        await admin.alter_configs(_TYPES[args.entity_type], args.entity_name, set_values, delete)
    out.write(f"Completed updating config for {args.entity_type} {args.entity_name}.\n")
    return 0
