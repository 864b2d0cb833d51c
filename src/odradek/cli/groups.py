"""``odradek groups list | describe GROUP``: consumer groups as ``kafka-consumer-groups.sh`` shows
them."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, print_table
from odradek.client.admin import GroupAdmin, GroupInfo, ListedGroup
from odradek.client.core import ClientError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = commands.add_parser("groups", help="list and describe consumer groups")
    connection_options(groups, DEFAULT_BOOTSTRAP, 30.0)
    actions = groups.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every group, with its state")
    listing.set_defaults(run=_run_list)
    describe = actions.add_parser(
        "describe", help="members, assignments, committed offsets and lag of groups"
    )
    describe.add_argument("group", nargs="+", help="group id(s)")
    describe.set_defaults(run=_run_describe)
    for action in (listing, describe):
        # Also accepted after the action, as kafka-consumer-groups users write it.
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)


def format_list(groups: Sequence[ListedGroup], out: TextIO) -> None:
    if not groups:
        out.write("No consumer groups.\n")
        return
    rows: list[tuple[str, ...]] = [("GROUP", "STATE", "PROTOCOL-TYPE")]
    rows += [(g.group_id, g.state, g.protocol_type or "-") for g in groups]
    print_table(rows, out)


def _text(value: object) -> str:
    return "-" if value is None else str(value)


def format_describe(group: GroupInfo, out: TextIO) -> None:
    if not group.exists:
        out.write(f"Consumer group '{group.group_id}' does not exist.\n")
        return
    protocol = "/".join(p for p in (group.protocol_type, group.protocol) if p) or "-"
    out.write(
        f"Consumer group '{group.group_id}': {group.state}, protocol {protocol}, "
        f"{len(group.members)} member{'s' if len(group.members) != 1 else ''}\n\n"
    )
    if group.partitions:
        rows: list[tuple[str, ...]] = [
            (
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            )
        ]
        for p in group.partitions:
            rows.append(
                (
                    group.group_id,
                    p.topic,
                    str(p.partition),
                    _text(p.committed),
                    _text(p.end_offset),
                    _text(p.lag),
                    p.member.member_id if p.member else "-",
                    p.member.host if p.member else "-",
                    p.member.client_id if p.member else "-",
                )
            )
        print_table(rows, out)
    else:
        out.write("No committed offsets and no assigned partitions.\n")
    out.write("\n")
    if not group.members:
        out.write(f"Consumer group '{group.group_id}' has no active members.\n")
        return
    members: list[tuple[str, ...]] = [
        ("CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
    ]
    for m in group.members:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in m.assignment:
            by_topic.setdefault(topic, []).append(partition)
        assignment = (
            " ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))
            or "-"
        )
        members.append(
            (
                m.member_id,
                _text(m.group_instance_id),
                m.host,
                m.client_id,
                str(len(m.assignment)),
                assignment,
            )
        )
    print_table(members, out)


async def _list(args: argparse.Namespace) -> list[ListedGroup]:
    async with await GroupAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        return await admin.list_groups()


async def _describe(args: argparse.Namespace) -> list[GroupInfo]:
    async with await GroupAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        return [await admin.describe_group(g) for g in args.group]


def _run_list(args: argparse.Namespace) -> int:
    try:
        groups = asyncio.run(_list(args))
    except ClientError as e:
        print(f"odradek groups: {e}", file=sys.stderr)
        return 1
    format_list(groups, sys.stdout)
    return 0


def _run_describe(args: argparse.Namespace) -> int:
    try:
        described = asyncio.run(_describe(args))
    except ClientError as e:
        print(f"odradek groups: {e}", file=sys.stderr)
        return 1
    for i, group in enumerate(described):
        if i:
            sys.stdout.write("\n")
        format_describe(group, sys.stdout)
    return 0 if all(g.exists for g in described) else 2
