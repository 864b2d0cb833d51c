"""``odradek groups list | describe | delete | reset-offsets``: consumer groups as
``kafka-consumer-groups.sh`` shows and changes them."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import Column, columns, output_option, wants_json, write_json, write_table
from odradek.cli.progress import progress_for, quiet_option
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
    quiet_option(reset)
    for action in (listing, describe, delete, reset):
        # Also accepted after the action, as kafka-consumer-groups users write it.
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)
        output_option(action)


_LIST_COLUMNS = columns(
    ("GROUP", "group"),
    ("TYPE", "type"),
    ("STATE", "state"),
    ("PROTOCOL-TYPE", "protocol_type"),
)
_OFFSET_COLUMNS = columns(
    ("GROUP", "group"),
    ("TOPIC", "topic"),
    ("PARTITION", "partition"),
    ("CURRENT-OFFSET", "current_offset"),
    ("LOG-END-OFFSET", "log_end_offset"),
    ("LAG", "lag"),
    ("CONSUMER-ID", "member_id"),
    ("HOST", "host"),
    ("CLIENT-ID", "client_id"),
)
_MEMBER_COLUMNS = (
    *columns(
        ("CONSUMER-ID", "member_id"),
        ("GROUP-INSTANCE-ID", "group_instance_id"),
        ("HOST", "host"),
        ("CLIENT-ID", "client_id"),
        ("#PARTITIONS", "partition_count"),
    ),
    Column("ASSIGNMENT", "assignment_text", escape=False),
)
_RESET_COLUMNS = columns(
    ("GROUP", "group"), ("TOPIC", "topic"), ("PARTITION", "partition"), ("NEW-OFFSET", "offset")
)
# Partitions per ListOffsets round of a reset: the progress bar moves once per round.
_RESET_CHUNK = 500


def list_records(groups: Sequence[ListedGroup]) -> list[dict[str, object]]:
    return [
        {
            "group": g.group_id,
            "type": g.group_type,
            "state": g.state,
            "protocol_type": g.protocol_type or None,
        }
        for g in groups
    ]


def format_list(groups: Sequence[ListedGroup], out: TextIO) -> None:
    records = list_records(groups)
    if not records:
        out.write("No consumer groups.\n")
        return
    write_table(records, _LIST_COLUMNS, out)


def group_record(group: GroupInfo) -> dict[str, Any]:
    """What ``groups describe`` shows of one group, as its JSON object."""
    members = []
    for m in group.members:
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "host": m.host,
                "client_id": m.client_id,
                "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
            }
        )
    offsets = [
        {
            "group": group.group_id,
            "topic": p.topic,
            "partition": p.partition,
            "current_offset": p.committed,
            "log_end_offset": p.end_offset,
            "lag": p.lag,
            "member_id": p.member.member_id if p.member else None,
            "host": p.member.host if p.member else None,
            "client_id": p.member.client_id if p.member else None,
        }
        for p in group.partitions
    ]
    return {
        "group": group.group_id,
        "exists": group.exists,
        "state": group.state,
        "protocol_type": group.protocol_type or None,
        "protocol": group.protocol or None,
        "members": members,
        "offsets": offsets,
    }


def _assignment_text(assignment: Sequence[Mapping[str, Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp["topic"], []).append(tp["partition"])
    return (
        " ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))
        or "-"
    )


def format_describe(group: GroupInfo, out: TextIO) -> None:
    record = group_record(group)
    if not record["exists"]:
        out.write(f"Consumer group '{group.group_id}' does not exist.\n")
        return
    protocol = "/".join(p for p in (group.protocol_type, group.protocol) if p) or "-"
    members = record["members"]
    out.write(
        f"Consumer group '{group.group_id}': {group.state}, protocol {protocol}, "
        f"{len(members)} member{'s' if len(members) != 1 else ''}\n\n"
    )
    if record["offsets"]:
        write_table(record["offsets"], _OFFSET_COLUMNS, out)
    else:
        out.write("No committed offsets and no assigned partitions.\n")
    out.write("\n")
    if not members:
        out.write(f"Consumer group '{group.group_id}' has no active members.\n")
        return
    rows = [
        {
            **m,
            "partition_count": len(m["assignment"]),
            "assignment_text": _assignment_text(m["assignment"]),
        }
        for m in members
    ]
    write_table(rows, _MEMBER_COLUMNS, out)


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
    if wants_json(args):
        write_json(list_records(groups), sys.stdout)
    else:
        format_list(groups, sys.stdout)
    return 0


def _run_describe(args: argparse.Namespace) -> int:
    try:
        described = asyncio.run(_describe(args))
    except ClientError as e:
        print(f"odradek groups: {e}", file=sys.stderr)
        return 1
    if wants_json(args):
        write_json([group_record(g) for g in described], sys.stdout)
    else:
        for i, group in enumerate(described):
            if i:
                sys.stdout.write("\n")
            format_describe(group, sys.stdout)
    return 0 if all(g.exists for g in described) else 2


async def _delete(args: argparse.Namespace, out: TextIO) -> int:
    async with await GroupAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        results = await admin.delete_groups(args.group)
    records = [
        {"group": group, "deleted": not code, "error": code.name.upper() if code else None}
        for group, code in results.items()
    ]
    if wants_json(args):
        write_json(records, out)
    else:
        for r in records:
            if r["deleted"]:
                out.write(f"Deleted group '{r['group']}'.\n")
            else:
                out.write(f"Group '{r['group']}' could not be deleted: {r['error']}\n")
    return 0 if all(r["deleted"] for r in records) else 2


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
        with progress_for(args, f"reset-offsets {args.group}", len(partitions)) as progress:
            new: dict[TopicPartition, int] = {}
            for start in range(0, len(partitions), _RESET_CHUNK):
                chunk = partitions[start : start + _RESET_CHUNK]
                progress.step(f"new offsets of {len(chunk)} partitions")
                new.update(await admin.reset_plan(args.group, chunk, to, value, committed))
                progress.advance(len(chunk))
            if args.execute:
                progress.step(f"committing {len(new)} offsets")
                await admin.reset_offsets(args.group, new)
    records = [
        {"group": args.group, "topic": t, "partition": p, "offset": o}
        for (t, p), o in sorted(new.items())
    ]
    if wants_json(args):
        write_json({"group": args.group, "executed": bool(args.execute), "offsets": records}, out)
        return 0
    write_table(records, _RESET_COLUMNS, out)
    if not args.execute:
        out.write("(dry run: --execute commits these offsets)\n")
    return 0
