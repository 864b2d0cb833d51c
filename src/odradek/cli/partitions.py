"""``odradek partitions reassign | list-reassignments | elect-leaders``: what
``kafka-reassign-partitions.sh`` and ``kafka-leader-election.sh`` do, in their JSON formats.

``reassign`` takes Kafka's reassignment file, ``{"version": 1, "partitions": [{"topic": "t",
"partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]}]}`` (``log_dirs`` is accepted
and must be ``any``: a broker here has one log dir per partition):

- ``--generate`` proposes one for ``--topics`` (or Kafka's ``--topics-to-move-json-file``) over
  ``--broker-list``, by Kafka's placement (rack-aware when every broker has a rack), and prints
  the current assignment beside it (keep it to roll back).
- ``--execute`` starts the moves (AlterPartitionReassignments on the controller). With
  ``--throttle BYTES`` it first sets, as Kafka's tool does, ``leader.replication.throttled.rate``
  and ``follower.replication.throttled.rate`` on every broker taking part and the topics'
  ``leader.replication.throttled.replicas`` (the current replicas) and
  ``follower.replication.throttled.replicas`` (the new ones). ``--wait`` polls until the moves
  are done.
- ``--verify`` tells, per partition, whether its move is done; once all are, it clears the
  throttles (Kafka's tool does the same, so run it until it says so).
- ``--cancel`` cancels the moves still in progress (their partitions go back).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import cell, columns, output_option, wants_json, write_json, write_table
from odradek.cli.progress import progress_for, quiet_option
from odradek.client.core import ClientError
from odradek.client.data import TopicPartition
from odradek.client.reassignment import (
    PREFERRED,
    UNCLEAN,
    OngoingReassignment,
    PartitionAdmin,
    PartitionResult,
)
from odradek.cluster.controller.assignment import BrokerMetadata, assign_replicas
from odradek.protocol.errors import ErrorCode, KafkaError

TIMEOUT_S = 30.0
POLL_S = 1.0
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
ELECTION_TYPES = {"preferred": PREFERRED, "unclean": UNCLEAN}

Plan = dict[TopicPartition, tuple[int, ...]]


class PlanError(ValueError):
    """A reassignment or topics file that is not what Kafka's tool takes."""


# -- the files -------------------------------------------------------------------------------


def parse_plan(text: str) -> Plan:
    """Kafka's reassignment JSON → partition → target replicas."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise PlanError(f"not JSON: {e}") from e
    if not isinstance(document, dict) or not isinstance(document.get("partitions"), list):
        raise PlanError('expected {"version": 1, "partitions": [...]}')
    plan: Plan = {}
    for entry in document["partitions"]:
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = tuple(int(r) for r in entry["replicas"])
        except (KeyError, TypeError, ValueError) as e:
            raise PlanError(f"bad partition entry {entry!r}: {e}") from e
        dirs = entry.get("log_dirs")
        if dirs is not None and any(d != "any" for d in dirs):
            raise PlanError(f"{tp.topic}-{tp.partition}: log_dirs other than 'any'")
        if tp in plan:
            raise PlanError(f"{tp.topic}-{tp.partition} is listed twice")
        plan[tp] = replicas
    if not plan:
        raise PlanError("the file lists no partitions")
    return plan


def format_plan(plan: Mapping[TopicPartition, Sequence[int]]) -> str:
    """A plan as Kafka's tool prints it: one line of JSON."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(plan[tp]),
                    "log_dirs": ["any"] * len(plan[tp]),
                }
                for tp in sorted(plan)
            ],
        },
        separators=(",", ":"),
    )


def parse_topics_to_move(text: str) -> list[str]:
    """Kafka's ``{"version": 1, "topics": [{"topic": "a"}]}``."""
    try:
        return [str(t["topic"]) for t in json.loads(text)["topics"]]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise PlanError(f'expected {{"topics": [{{"topic": ...}}]}}: {e}') from e


def parse_ids(text: str) -> list[int]:
    try:
        return [int(i) for i in text.split(",") if i.strip()]
    except ValueError as e:
        raise PlanError(f"not a list of broker ids: {text!r}") from e


def throttled_replicas(
    plan: Plan, current: Mapping[TopicPartition, Sequence[int]]
) -> tuple[dict[str, str], dict[str, str]]:
    """Per topic, Kafka's ``leader.replication.throttled.replicas`` (every current replica of a
    moving partition: any may lead while it moves) and ``follower.replication.throttled.replicas``
    (the replicas being added), as ``partition:broker`` lists."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for tp in sorted(plan):
        before = tuple(current.get(tp, ()))
        if tuple(plan[tp]) == before:
            continue
        leaders.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in before)
        followers.setdefault(tp.topic, []).extend(
            f"{tp.partition}:{b}" for b in plan[tp] if b not in before
        )
    return (
        {t: ",".join(v) for t, v in leaders.items()},
        {t: ",".join(v) for t, v in followers.items() if v},
    )


# -- the commands ------------------------------------------------------------------------------


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    partitions = commands.add_parser(
        "partitions", help="reassign partitions, list reassignments, elect leaders"
    )
    actions = partitions.add_subparsers(dest="action", required=True)

    reassign = actions.add_parser(
        "reassign", help="move partitions to other brokers (kafka-reassign-partitions.sh)"
    )
    connection_options(reassign, DEFAULT_BOOTSTRAP, TIMEOUT_S)
    mode = reassign.add_mutually_exclusive_group(required=True)
    for flag, what in (
        ("--generate", "propose a reassignment of --topics over --broker-list"),
        ("--execute", "start the reassignment in --reassignment-json-file"),
        ("--verify", "tell whether it is done (and clear the throttles once it is)"),
        (
            "--cancel",
            "cancel the moves of --reassignment-json-file still in progress (and clear the "
            "throttles)",
        ),
    ):
        mode.add_argument(flag, action="store_true", help=what)
    reassign.add_argument("--reassignment-json-file", metavar="FILE")
    reassign.add_argument("--topics", metavar="T1,T2", help="topics to move (--generate)")
    reassign.add_argument("--topics-to-move-json-file", metavar="FILE")
    reassign.add_argument("--broker-list", metavar="1,2,3", help="brokers to move to")
    reassign.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES",
        help="replication limit per broker, bytes/s, while the moves run (--execute)",
    )
    reassign.add_argument(
        "--wait", action="store_true", help="with --execute: wait until the moves are done"
    )
    reassign.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="with --verify or --cancel: leave the throttles as they are",
    )
    quiet_option(reassign)
    reassign.set_defaults(run=run_command(_reassign))

    listing = actions.add_parser("list-reassignments", help="the moves in progress")
    connection_options(listing, DEFAULT_BOOTSTRAP, TIMEOUT_S)
    listing.add_argument("--topic", action="append", help="only this topic (repeatable)")
    output_option(listing)
    listing.set_defaults(run=run_command(_list))

    elect = actions.add_parser(
        "elect-leaders", help="preferred or unclean leader election (kafka-leader-election.sh)"
    )
    connection_options(elect, DEFAULT_BOOTSTRAP, TIMEOUT_S)
    elect.add_argument("--election-type", choices=sorted(ELECTION_TYPES), default="preferred")
    elect.add_argument("--topic")
    elect.add_argument("--partition", type=int)
    elect.add_argument("--all-topic-partitions", action="store_true")
    elect.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='partitions as {"partitions": [{"topic": ..., "partition": ...}]}',
    )
    elect.set_defaults(run=run_command(_elect))


def _fail(message: str) -> int:
    print(f"odradek: {message}", file=sys.stderr)
    return 1


async def _reassign(args: argparse.Namespace, out: TextIO) -> int:
    try:
        if args.generate:
            return await _generate(args, out)
        if not args.reassignment_json_file:
            return _fail("--reassignment-json-file is required")
        plan = parse_plan(Path(args.reassignment_json_file).read_text())
    except (PlanError, OSError) as e:
        return _fail(str(e))
    async with await PartitionAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        if args.execute:
            return await _execute(admin, plan, args, out)
        if args.verify:
            return await _verify(admin, plan, out, args.preserve_throttles)
        return await _cancel(admin, plan, out, args.preserve_throttles)


async def _current(
    admin: PartitionAdmin, topics: Iterable[str]
) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's replicas, the target for a partition already moving (as Kafka's tool
    shows them)."""
    names = sorted(set(topics))
    cluster = await admin.describe_cluster(names)
    moving = await admin.list_reassignments()
    current: dict[TopicPartition, tuple[int, ...]] = {}
    for topic in cluster.topics:
        if topic.error is not None:
            raise ClientError(f"topic {topic.name!r}: {topic.error}")
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition)
            ongoing = moving.get(tp)
            current[tp] = ongoing.target if ongoing is not None else p.replicas
    return current


async def _generate(args: argparse.Namespace, out: TextIO) -> int:
    if args.topics_to_move_json_file:
        topics = parse_topics_to_move(Path(args.topics_to_move_json_file).read_text())
    elif args.topics:
        topics = [t for t in args.topics.split(",") if t]
    else:
        return _fail("--generate needs --topics or --topics-to-move-json-file")
    if not args.broker_list:
        return _fail("--generate needs --broker-list")
    wanted = parse_ids(args.broker_list)
    async with await PartitionAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        current = await _current(admin, topics)
        cluster = await admin.describe_cluster([])
    racks = {b.node_id: b.rack for b in cluster.brokers}
    unknown = sorted(set(wanted) - set(racks))
    if unknown:
        return _fail(f"brokers {unknown} are not live")
    brokers = [BrokerMetadata(b, racks[b]) for b in wanted]
    proposed: Plan = {}
    rng = random.Random()
    for topic in sorted(set(topics)):
        partitions = sorted(tp for tp in current if tp.topic == topic)
        if not partitions:
            return _fail(f"topic {topic!r} does not exist")
        factor = len(current[partitions[0]])
        try:
            placed = assign_replicas(brokers, len(partitions), factor, rng)
        except KafkaError as e:
            return _fail(f"topic {topic!r}: {e.message}")
        for tp in partitions:
            proposed[tp] = tuple(placed[tp.partition])
    out.write("Current partition replica assignment\n")
    out.write(format_plan(current) + "\n\n")
    out.write("Proposed partition reassignment configuration\n")
    out.write(format_plan(proposed) + "\n")
    return 0


async def _execute(admin: PartitionAdmin, plan: Plan, args: argparse.Namespace, out: TextIO) -> int:
    current = await _current(admin, {tp.topic for tp in plan})
    missing = sorted(tp for tp in plan if tp not in current)
    if missing:
        return _fail("partitions that do not exist: " + ", ".join(_names(missing)))
    out.write("Current partition replica assignment\n\n")
    out.write(format_plan({tp: current[tp] for tp in plan}) + "\n\n")
    out.write("Save this to use as the --reassignment-json-file option during rollback\n")
    if args.throttle is not None:
        await _set_throttles(admin, plan, current, args.throttle)
        out.write(
            "Warning: You must run --verify periodically, until the reassignment completes, "
            "to ensure the throttle is removed.\n"
            f"The inter-broker throttle limit was set to {args.throttle} B/s\n"
        )
    results = await admin.alter_reassignments(dict(plan))
    if not _report_errors("reassigning", results):
        return 1
    out.write(f"Successfully started partition reassignments for {','.join(_names(plan))}\n")
    if args.wait:
        await _wait(admin, plan, args, out)
    return 0


async def _wait(admin: PartitionAdmin, plan: Plan, args: argparse.Namespace, out: TextIO) -> None:
    """Poll until no partition of ``plan`` is moving: progress on stderr, the outcome on
    ``out``."""
    total = len(plan)
    shown: int | None = None
    with progress_for(args, "reassignment", total) as progress:
        while True:
            moving = [tp for tp in await admin.list_reassignments(plan) if tp in plan]
            if len(moving) != shown:
                shown = len(moving)
                progress.step(f"{shown} partitions moving")
                progress.update(total - shown)
            if not moving:
                break
            await asyncio.sleep(POLL_S)
    out.write(f"{total} of {total} partitions moved\n")


async def _set_throttles(
    admin: PartitionAdmin,
    plan: Plan,
    current: Mapping[TopicPartition, Sequence[int]],
    rate: int,
) -> None:
    leaders, followers = throttled_replicas(plan, current)
    brokers = sorted({b for tp in plan for b in (*plan[tp], *current.get(tp, ()))})
    for broker in brokers:
        await admin.alter_configs(
            BROKER_RESOURCE, str(broker), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}
        )
    for topic in sorted(set(leaders) | set(followers)):
        values = {LEADER_REPLICAS: leaders.get(topic, "")}
        if topic in followers:
            values[FOLLOWER_REPLICAS] = followers[topic]
        await admin.alter_configs(TOPIC_RESOURCE, topic, values)


async def _verify(admin: PartitionAdmin, plan: Plan, out: TextIO, preserve_throttles: bool) -> int:
    moving = await admin.list_reassignments(plan)
    current = await _current(admin, {tp.topic for tp in plan})
    out.write("Status of partition reassignment:\n")
    done = True
    for tp in sorted(plan):
        name = f"{tp.topic}-{tp.partition}"
        if tp in moving:
            done = False
            out.write(f"Reassignment of partition {name} is still in progress.\n")
        elif tuple(current.get(tp, ())) == plan[tp]:
            out.write(f"Reassignment of partition {name} is completed.\n")
        else:
            done = False
            out.write(
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{list(current.get(tp, ()))} rather than {list(plan[tp])}.\n"
            )
    if done and not preserve_throttles:
        out.write("\n")
        await _clear_throttles(admin, plan, out)
    return 0


async def _clear_throttles(admin: PartitionAdmin, plan: Plan, out: TextIO) -> None:
    cluster = await admin.describe_cluster([])
    brokers = [b.node_id for b in cluster.brokers]
    for broker in brokers:
        await admin.alter_configs(BROKER_RESOURCE, str(broker), {}, [LEADER_RATE, FOLLOWER_RATE])
    out.write(f"Clearing broker-level throttles on brokers {cell(brokers)}\n")
    topics = sorted({tp.topic for tp in plan})
    for topic in topics:
        await admin.alter_configs(TOPIC_RESOURCE, topic, {}, [LEADER_REPLICAS, FOLLOWER_REPLICAS])
    out.write(f"Clearing topic-level throttles on topic {','.join(topics)}\n")


async def _cancel(admin: PartitionAdmin, plan: Plan, out: TextIO, preserve_throttles: bool) -> int:
    """Cancel the moves in progress; as Kafka's tool, the throttles go too (a move cancelled
    leaves nothing for them to limit) unless they are to be preserved."""
    results = await admin.alter_reassignments(dict.fromkeys(plan))
    cancelled = [tp for tp, r in results.items() if r.error == ErrorCode.none]
    idle = [tp for tp, r in results.items() if r.error == ErrorCode.no_reassignment_in_progress]
    others = {tp: r for tp, r in results.items() if tp not in cancelled and tp not in idle}
    if cancelled:
        out.write(
            f"Successfully cancelled partition reassignments for: {','.join(_names(cancelled))}\n"
        )
    if idle:
        out.write(f"None of the specified partition moves are active: {','.join(_names(idle))}\n")
    if not _report_errors("cancelling", others):
        return 1
    if not preserve_throttles:
        await _clear_throttles(admin, plan, out)
    return 0


async def _list(args: argparse.Namespace, out: TextIO) -> int:
    async with await PartitionAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        moving = await admin.list_reassignments()
    chosen = {tp: m for tp, m in moving.items() if not args.topic or tp.topic in args.topic}
    records = reassignments_json(chosen)
    if wants_json(args):
        write_json(records, out)
    elif not records:
        out.write("No partition reassignments in progress.\n")
    else:
        write_table(records, _REASSIGNMENT_COLUMNS, out)
    return 0


_REASSIGNMENT_COLUMNS = columns(
    ("TOPIC", "topic"),
    ("PARTITION", "partition"),
    ("REPLICAS", "replicas"),
    ("ADDING", "adding_replicas"),
    ("REMOVING", "removing_replicas"),
)


def reassignments_json(
    moving: Mapping[TopicPartition, OngoingReassignment],
) -> list[dict[str, object]]:
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(moving[tp].replicas),
            "adding_replicas": list(moving[tp].adding),
            "removing_replicas": list(moving[tp].removing),
        }
        for tp in sorted(moving)
    ]


async def _elect(args: argparse.Namespace, out: TextIO) -> int:
    partitions: list[TopicPartition] | None
    if args.path_to_json_file:
        try:
            entries = json.loads(Path(args.path_to_json_file).read_text())["partitions"]
            partitions = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            return _fail(f"{args.path_to_json_file}: {e}")
    elif args.all_topic_partitions:
        partitions = None
    elif args.topic is not None and args.partition is not None:
        partitions = [TopicPartition(args.topic, args.partition)]
    elif args.topic is not None:
        partitions = None
    else:
        return _fail(
            "name the partitions: --topic [--partition], --all-topic-partitions or "
            "--path-to-json-file"
        )
    async with await PartitionAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        if partitions is None and args.topic is not None:
            cluster = await admin.describe_cluster([args.topic])
            partitions = [
                TopicPartition(t.name, p.partition)
                for t in cluster.topics
                if t.error is None
                for p in t.partitions
            ]
            if not partitions:
                return _fail(f"topic {args.topic!r} does not exist")
        results = await admin.elect_leaders(ELECTION_TYPES[args.election_type], partitions)
    elected = sorted(tp for tp, r in results.items() if r.error == ErrorCode.none)
    needless = sorted(tp for tp, r in results.items() if r.error == ErrorCode.election_not_needed)
    failed = {tp: r for tp, r in results.items() if tp not in elected and tp not in needless}
    if elected:
        out.write(
            f"Successfully completed leader election ({args.election_type.upper()}) for "
            f"partitions {', '.join(_names(elected))}\n"
        )
    if needless:
        out.write(f"Valid replica already elected for partitions {', '.join(_names(needless))}\n")
    return 0 if _report_errors("electing leaders of", failed) else 1


def _names(partitions: Iterable[TopicPartition]) -> list[str]:
    return [f"{tp.topic}-{tp.partition}" for tp in sorted(partitions)]


def _report_errors(doing: str, results: Mapping[TopicPartition, PartitionResult]) -> bool:
    failed = {tp: r for tp, r in results.items() if r.error != ErrorCode.none}
    if failed:
        print(f"odradek: error {doing} partition(s):", file=sys.stderr)
        for tp in sorted(failed):
            print(f"{tp.topic}-{tp.partition}: {failed[tp].describe()}", file=sys.stderr)
    return not failed
