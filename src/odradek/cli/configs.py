"""``odradek configs describe | alter``: a topic's or a broker's configs, as
``kafka-configs.sh`` shows and changes them (DescribeConfigs, IncrementalAlterConfigs)."""

from __future__ import annotations

import argparse
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import columns, output_option, write_records, write_result
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
        "--all",
        action="store_true",
        help="every setting with its default, value and source, defaults included",
    )
    describe.set_defaults(run=run_command(_describe, "odradek configs"))
    alter.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]")
    alter.add_argument("--delete-config", action="append", default=[], metavar="K[,K]")
    alter.set_defaults(run=run_command(_alter, "odradek configs"))
    for action in (describe, alter):
        output_option(action)


_COLUMNS = columns(
    ("NAME", "name"),
    ("VALUE", "value"),
    ("DEFAULT", "default"),
    ("SOURCE", "source"),
    ("READ-ONLY", "read_only"),
)


async def _describe(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        entries = await admin.config_entries(_TYPES[args.entity_type], args.entity_name)
    if not args.all:
        entries = [e for e in entries if e.source != "DEFAULT_CONFIG"]
    records = [
        {
            "name": e.name,
            "value": e.value,
            "default": e.default,
            "source": e.source,
            "read_only": e.read_only,
        }
        for e in entries
    ]
    empty = f"No configs set for {args.entity_type} {args.entity_name} (--all shows all)."
    write_records(args, records, _COLUMNS, out, empty=empty)
    return 0


async def _alter(args: argparse.Namespace, out: TextIO) -> int:
    set_values = key_values(args.add_config)
    delete = [k.strip() for item in args.delete_config for k in item.split(",") if k.strip()]
    if not set_values and not delete:
        raise ClientError("nothing to change: give --add-config or --delete-config")
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        await admin.alter_configs(_TYPES[args.entity_type], args.entity_name, set_values, delete)
    result = {
        "entity_type": args.entity_type,
        "entity_name": args.entity_name,
        "set": set_values,
        "deleted": delete,
    }
    text = f"Completed updating config for {args.entity_type} {args.entity_name}."
    write_result(args, result, text, out)
    return 0
