"""``odradek topics list | describe | create | delete | alter``: topics, their partitions'
replicas and logs, and the changes ``kafka-topics.sh`` makes (CreateTopics, DeleteTopics,
CreatePartitions; configs are ``odradek configs``).

``describe`` shows per partition its replication as the broker asked answers Metadata (the
leader, ``none`` when no live broker leads it; the replicas; the in-sync replicas; the replicas
on brokers that are not live), the log start and end offsets (ListOffsets earliest and latest,
from the leader: the range a consumer can read), and the bytes the partition's segments take on
disk with the number of segments.

Sizes come from DescribeLogDirs, which a broker answers only for the replicas it hosts: they are
asked of the leader, or, for a partition without a live leader, of a live replica, and the
``FROM`` column names the broker whose figures they are.

Kafka's protocol has no segment count.  The log dir DescribeLogDirs names is an absolute path
on the broker's host; when this command runs where that path is readable (the broker's own
machine, the usual case for a CLI), the count is exact: the segment files of the partition's
directory, counted.  Otherwise it is an estimate, shown as ``~N``: the size divided by the
topic's ``segment.bytes``, rounded up (a lower bound for logs that roll by size; logs rolled
by time or compacted can have more).

The requests go through :class:`~odradek.client.admin.ClusterAdmin`.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import (
    columns,
    output_option,
    wants_json,
    write_json,
    write_result,
    write_table,
)
from odradek.client.admin import (
    ClusterAdmin,
    ClusterDescription,
    LogDirUsage,
    PartitionReplicas,
    TopicDescription,
)
from odradek.client.core import ClientError

TIMEOUT_S = 30.0

_SHOWN_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes")
_SEGMENT_FILE = re.compile(r"^\d{20}\.log$")


def segment_count(log_dir: str, topic: str, partition: int) -> int | None:
    """The segments of a partition counted in its directory, if that is readable here."""
    directory = Path(log_dir) / f"{topic}-{partition}"
    try:
        return sum(1 for name in _names(directory) if _SEGMENT_FILE.match(name))
    except OSError:
        return None


def _names(directory: Path) -> Iterable[str]:
    return [entry.name for entry in directory.iterdir()]


def size_source(partition: PartitionReplicas, live: set[int]) -> int | None:
    """The broker whose replica's size is shown: the leader, else a live in-sync replica, else
    any live replica."""
    if partition.leader is not None and partition.leader in live:
        return partition.leader
    for candidates in (partition.isr, partition.replicas):
        for broker in candidates:
            if broker in live:
                return broker
    return None


async def _sizes(
    admin: ClusterAdmin, cluster: ClusterDescription, topic: TopicDescription
) -> dict[int, LogDirUsage]:
    live = {b.node_id for b in cluster.brokers}
    by_broker: dict[int, list[int]] = {}
    for p in topic.partitions:
        source = size_source(p, live)
        if source is not None:
            by_broker.setdefault(source, []).append(p.partition)
    found: dict[int, LogDirUsage] = {}
    for broker_id, partitions in sorted(by_broker.items()):
        broker = cluster.broker(broker_id)
        assert broker is not None
        try:
            found.update(await admin.log_dirs(broker, topic.name, partitions))
        except ClientError:
            continue  # a broker that just died: its figures are shown as unknown
    return found


async def _describe_topics(args: argparse.Namespace, out: TextIO) -> int:
    described: list[dict[str, object]] = []
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        cluster = await admin.describe_cluster(args.topic)
        by_name = {t.name: t for t in cluster.topics}
        status = 0
        for name in args.topic:
            topic = by_name.get(name)
            if topic is None or topic.error is not None:
                problem = topic.error if topic is not None else "not in the broker's answer"
                print(f"odradek: topic {name!r}: {problem}", file=sys.stderr)
                status = 1
                continue
            configs = (await admin.topic_configs([name])).get(name, {})
            offsets = await admin.log_offsets((name, p.partition) for p in topic.partitions)
            sizes = await _sizes(admin, cluster, topic)
            described.append(topic_record(topic, configs, offsets, sizes))
    if wants_json(args):
        write_json(described, out)
        return status
    for i, record in enumerate(described):
        if i:
            out.write("\n")
        format_topic(record, out)
    return status


def topic_record(
    topic: TopicDescription,
    configs: dict[str, str],
    offsets: dict[tuple[str, int], tuple[int, int]],
    sizes: dict[int, LogDirUsage],
) -> dict[str, object]:
    """What ``topics describe`` shows of one topic (the JSON object; the table is drawn from
    it). ``segments`` is None when unknown; ``segments_estimated`` says it is an estimate."""
    segment_bytes = int(configs.get("segment.bytes", "0") or 0)
    partitions = []
    for p in topic.partitions:
        start, end = offsets.get((topic.name, p.partition), (None, None))
        usage = sizes.get(p.partition)
        count = segment_count(usage.log_dir, topic.name, p.partition) if usage else None
        estimated = False
        if count is None and usage is not None and segment_bytes > 0:
            count = max(1, math.ceil(usage.size_bytes / segment_bytes))
            estimated = True
        partitions.append(
            {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offline": list(p.offline),
                "log_start_offset": start,
                "log_end_offset": end,
                "segments": count,
                "segments_estimated": estimated,
                "size_bytes": None if usage is None else usage.size_bytes,
                "size_from": None if usage is None else usage.broker_id,
                "log_dir": None if usage is None else usage.log_dir,
            }
        )
    return {
        "topic": topic.name,
        "partition_count": len(topic.partitions),
        "replication_factor": topic.replication_factor,
        "configs": {k: configs[k] for k in _SHOWN_CONFIGS if k in configs},
        "partitions": partitions,
    }


_DESCRIBE_COLUMNS = columns(
    ("PARTITION", "partition"),
    ("LEADER", "leader"),
    ("REPLICAS", "replicas"),
    ("ISR", "isr"),
    ("OFFLINE", "offline"),
    ("LOG-START", "log_start_offset"),
    ("LOG-END", "log_end_offset"),
    ("SEGMENTS", "segments"),
    ("SIZE-BYTES", "size_bytes"),
    ("FROM", "size_from"),
    ("LOG-DIR", "log_dir"),
)


def format_topic(record: Mapping[str, Any], out: TextIO) -> None:
    """One topic of ``topics describe`` for people: a summary line, then a row per partition
    (unknown figures as ``?``, estimated segment counts as ``~N``)."""
    shown = ",".join(f"{k}={v}" for k, v in record["configs"].items())
    out.write(
        f"Topic: {record['topic']}\tPartitionCount: {record['partition_count']}\t"
        f"ReplicationFactor: {record['replication_factor']}\tConfigs: {shown}\n"
    )
    rows: list[dict[str, object]] = []
    for p in record["partitions"]:
        row = {k: "?" if v is None else v for k, v in p.items()}
        row["leader"] = "none" if p["leader"] is None else p["leader"]
        if p["segments_estimated"]:
            row["segments"] = f"~{p['segments']}"
        rows.append(row)
    write_table(rows, _DESCRIBE_COLUMNS, out)
    out.write(
        "LOG-START and LOG-END are the leader's; SEGMENTS, SIZE-BYTES and LOG-DIR are those of "
        "the replica on broker FROM (the leader, when it is live)\n"
    )
    if any(p["segments_estimated"] for p in record["partitions"]):
        out.write(
            "~: estimated from the size and segment.bytes; the broker's log dir is not "
            "readable here to count segment files\n"
        )


async def _list_topics(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        cluster = await admin.describe_cluster()
    listed = [
        {
            "topic": topic.name,
            "partition_count": len(topic.partitions),
            "replication_factor": topic.replication_factor,
        }
        for topic in cluster.topics
        if topic.error is None
    ]
    if wants_json(args):
        write_json(listed, out)
    else:
        for topic in listed:
            out.write(f"{topic['topic']}\n")
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = commands.add_parser(
        "topics", help="list topics, describe their partitions' replicas and logs"
    )
    connection_options(topics, DEFAULT_BOOTSTRAP, TIMEOUT_S)
    actions = topics.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the names of all topics")
    listing.set_defaults(run=run_command(_list_topics))
    describe = actions.add_parser(
        "describe",
        help="per partition: leader, replicas, ISR, log start and end offsets, segments, size",
    )
    describe.add_argument("topic", nargs="+", help="topic name(s)")
    describe.set_defaults(run=run_command(_describe_topics))
    create = actions.add_parser("create", help="a new topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=-1, help="default: num.partitions")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="default: default.replication.factor"
    )
    create.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config"
    )
    create.set_defaults(run=run_command(_create_topic))
    delete = actions.add_parser("delete", help="delete topics and their data")
    delete.add_argument("topic", nargs="+")
    delete.set_defaults(run=run_command(_delete_topics))
    alter = actions.add_parser("alter", help="add partitions to a topic")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=int, required=True, help="the new partition count")
    alter.set_defaults(run=run_command(_alter_topic))
    for action in (listing, describe, create, delete, alter):
        # Also accepted after the action, as kafka-topics users write it.
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)
        output_option(action)


def key_values(items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` items (also comma-separated, as Kafka's tools take them) as a dict."""
    found: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise ClientError(f"{part!r} is not KEY=VALUE")
            found[key.strip()] = value.strip()
    return found


async def _create_topic(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        await admin.create_topic(
            args.topic, args.partitions, args.replication_factor, key_values(args.config)
        )
    result = {"topic": args.topic, "created": True}
    write_result(args, result, f"Created topic {args.topic}.", out)
    return 0


async def _delete_topics(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        await admin.delete_topics(args.topic)
    result = {"topics": args.topic, "deleted": True}
    write_result(args, result, f"Deleted topic(s) {', '.join(args.topic)}.", out)
    return 0


async def _alter_topic(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        await admin.create_partitions(args.topic, args.partitions)
    result = {"topic": args.topic, "partition_count": args.partitions}
    write_result(args, result, f"Topic {args.topic} now has {args.partitions} partitions.", out)
    return 0
