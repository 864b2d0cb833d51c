"""``odradek groups list | describe | delete | reset-offsets``: consumer groups as
``kafka-consumer-groups.sh`` shows and changes them."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from collections.abc import Sequence
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, print_table, run_command
from odradek.client.admin import (
    ClusterAdmin,
    GroupAdmin,
    GroupInfo,
    ListedGroup,
    TopicPartition,
)
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
    delete = actions.add_parser("delete", help="delete groups without members, and their offsets")
    delete.add_argument("group", nargs="+", help="group id(s)")
    delete.set_defaults(run=run_command(_delete, "odradek groups"))
    reset = actions.add_parser(
        "reset-offsets", help="move an inactive group's committed offsets (--dry-run by default)"
    )
    reset.add_argument("--group", required=True)
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--topic", action="append", metavar="TOPIC[:P,P]", help="a topic, or some partitions"
    )
    which.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int)
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS[.sss][+HH:MM]")
    to.add_argument("--shift-by", type=int)
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.set_defaults(run=run_command(_reset, "odradek groups"))
    for action in (listing, describe, delete, reset):
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


async def _delete(args: argparse.Namespace, out: TextIO) -> int:
    async with await GroupAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        results = await admin.delete_groups(args.group)
    failed = 0
    for group, code in results.items():
        if code:
            failed += 1
            out.write(f"Group '{group}' could not be deleted: {code.name}\n")
        else:
            out.write(f"Deleted group '{group}'.\n")
    return 2 if failed else 0


def _datetime_ms(text: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError as e:
        raise ClientError(f"--to-datetime {text!r}: {e}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


async def _partitions(
    admin: GroupAdmin, args: argparse.Namespace, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    wanted: list[TopicPartition] = []
    topics_only = []
    for item in args.topic:
        topic, _, listed = item.partition(":")
        if listed:
            wanted += [(topic, int(p)) for p in listed.split(",") if p.strip()]
        else:
            topics_only.append(topic)
    if topics_only:
        async with await ClusterAdmin.connect(
            args.bootstrap_server, timeout_s=args.timeout
        ) as cluster:
            described = await cluster.describe_cluster(topics_only)
        for topic in described.topics:
            if topic.error:
                raise ClientError(f"topic {topic.name!r}: {topic.error}")
            wanted += [(topic.name, p.partition) for p in topic.partitions]
    return sorted(set(wanted))


async def _reset(args: argparse.Namespace, out: TextIO) -> int:
    async with await GroupAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        committed = await admin.committed(args.group)
        partitions = await _partitions(admin, args, committed)
        if not partitions:
            raise ClientError(f"group {args.group!r} has no offsets for those topics")
        if args.to_earliest:
            to, value = "earliest", 0
        elif args.to_latest:
            to, value = "latest", 0
        elif args.to_offset is not None:
            to, value = "offset", args.to_offset
        elif args.to_datetime is not None:
            to, value = "timestamp", _datetime_ms(args.to_datetime)
        else:
            to, value = "shift", args.shift_by
        new = await admin.reset_plan(args.group, partitions, to, value, committed)
        if args.execute:
            await admin.reset_offsets(args.group, new)
    rows: list[tuple[str, ...]] = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(args.group, t, str(p), str(o)) for (t, p), o in sorted(new.items())]
    print_table(rows, out)
    if not args.execute:
        out.write("(dry run: --execute commits these offsets)\n")
    return 0
