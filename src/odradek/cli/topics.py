"""``odradek topics list | describe TOPIC``: topics and their partitions' logs, from a broker.

``describe`` shows per partition the log start and end offsets (ListOffsets earliest and latest,
the range a consumer can read), the bytes the partition's segments take on disk
(DescribeLogDirs, which Kafka's protocol reports per partition) and the number of segments.

Kafka's protocol has no segment count.  The log dir DescribeLogDirs names is an absolute path
on the broker's host; when this command runs where that path is readable (the broker's own
machine, the usual case for a CLI), the count is exact: the segment files of the partition's
directory, counted.  Otherwise it is an estimate, shown as ``~N``: the size divided by the
topic's ``segment.bytes``, rounded up (a lower bound for logs that roll by size; logs rolled
by time or compacted can have more).

The requests go over the project's blocking client (:mod:`odradek.client.blocking`), to the broker
given and to the brokers its metadata names.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options
from odradek.client.blocking import BlockingConnection
from odradek.client.core import ClientError
from odradek.protocol.errors import ErrorCode

TIMEOUT_S = 30.0

METADATA, LIST_OFFSETS, DESCRIBE_CONFIGS, DESCRIBE_LOG_DIRS = 3, 2, 32, 35
# The newest version of each API this client speaks; the broker's ApiVersions may lower it.
_OUR_MAX = {METADATA: 12, LIST_OFFSETS: 8, DESCRIBE_CONFIGS: 4, DESCRIBE_LOG_DIRS: 4}
_EARLIEST, _LATEST = -2, -1
_TOPIC_RESOURCE = 2
_SHOWN_CONFIGS = ("cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes")
_SEGMENT_FILE = re.compile(r"^\d{20}\.log$")


class CommandError(Exception):
    """Something to tell the user, then exit with status 1."""


class _Broker:
    """One blocking connection to a broker, with the API versions both sides speak."""

    def __init__(self, address: str, timeout: float) -> None:
        _, _, port = address.rpartition(":")
        if not port.isdigit():
            raise CommandError(f"{address!r} is not HOST:PORT")
        self.address = address
        try:
            self._connection = BlockingConnection.open(
                address,
                client_id="odradek-cli",
                timeout_s=timeout,
                client_versions={key: (0, highest) for key, highest in _OUR_MAX.items()},
            )
        except ClientError as e:
            raise CommandError(f"cannot reach the broker at {address}: {e}") from e

    def request(self, api_key: int, **fields: Any) -> Any:
        try:
            version = self._connection.version_for(api_key)
        except ClientError as e:
            raise CommandError(f"the broker at {self.address} does not serve API {api_key}") from e
        try:
            return self._connection.request(api_key, fields, version=version)
        except ClientError as e:
            raise CommandError(f"the broker at {self.address} failed: {e}") from e

    def close(self) -> None:
        self._connection.close()


class _Cluster:
    """The bootstrap broker, and connections to the others as they are needed."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        self.timeout = timeout
        self.bootstrap = _Broker(bootstrap, timeout)
        self._by_id: dict[int, _Broker] = {}
        self.addresses: dict[int, str] = {}

    def metadata(self, topics: list[str] | None) -> Any:
        response = self.bootstrap.request(
            METADATA,
            topics=None if topics is None else [{"name": t} for t in topics],
            allow_auto_topic_creation=False,
        )
        self.addresses = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in response.brokers}
        return response

    def broker(self, node_id: int) -> _Broker:
        if node_id not in self._by_id:
            address = self.addresses.get(node_id)
            self._by_id[node_id] = (
                self.bootstrap
                if address is None or address == self.bootstrap.address
                else _Broker(address, self.timeout)
            )
        return self._by_id[node_id]

    def close(self) -> None:
        for broker in {id(b): b for b in [self.bootstrap, *self._by_id.values()]}.values():
            broker.close()


def _error(code: Any) -> str | None:
    value = int(code)
    if value == 0:
        return None
    try:
        return ErrorCode(value).name
    except ValueError:
        return f"error {value}"


def _list(args: argparse.Namespace, out: TextIO) -> int:
    cluster = _Cluster(args.bootstrap_server, args.timeout)
    try:
        metadata = cluster.metadata(None)
        for name in sorted(str(t.name) for t in metadata.topics if int(t.error_code) == 0):
            print(name, file=out)
    finally:
        cluster.close()
    return 0


def _offsets(cluster: _Cluster, topic: str, leaders: dict[int, int]) -> dict[int, list[int]]:
    """partition → [log start, log end], asking each partition's leader."""
    found: dict[int, list[int]] = {p: [-1, -1] for p in leaders}
    by_leader: dict[int, list[int]] = {}
    for partition, leader in leaders.items():
        by_leader.setdefault(leader, []).append(partition)
    for leader, partitions in by_leader.items():
        for slot, timestamp in enumerate((_EARLIEST, _LATEST)):
            response = cluster.broker(leader).request(
                LIST_OFFSETS,
                replica_id=-1,
                isolation_level=0,
                topics=[
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "timestamp": timestamp} for p in partitions
                        ],
                    }
                ],
            )
            for t in response.topics:
                for p in t.partitions:
                    if int(p.error_code) == 0:
                        found[int(p.partition_index)][slot] = int(p.offset)
    return found


def _configs(cluster: _Cluster, topic: str) -> dict[str, str]:
    response = cluster.bootstrap.request(
        DESCRIBE_CONFIGS,
        resources=[
            {"resource_type": _TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": None}
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    configs: dict[str, str] = {}
    for result in response.results:
        if int(result.error_code) == 0:
            configs.update({str(c.name): str(c.value) for c in result.configs})
    return configs


def _log_dirs(cluster: _Cluster, topic: str, leaders: dict[int, int]) -> dict[int, tuple[int, str]]:
    """partition → (bytes on disk, its log dir), from each broker holding a replica."""
    found: dict[int, tuple[int, str]] = {}
    for node_id in sorted(set(leaders.values())):
        response = cluster.broker(node_id).request(
            DESCRIBE_LOG_DIRS, topics=[{"topic": topic, "partitions": sorted(leaders)}]
        )
        for result in response.results:
            for t in result.topics:
                if str(t.name) != topic:
                    continue
                for p in t.partitions:
                    found[int(p.partition_index)] = (int(p.partition_size), str(result.log_dir))
    return found


def segment_count(log_dir: str, topic: str, partition: int) -> int | None:
    """The segments of a partition counted in its directory, if that is readable here."""
    directory = Path(log_dir) / f"{topic}-{partition}"
    try:
        return sum(1 for name in _names(directory) if _SEGMENT_FILE.match(name))
    except OSError:
        return None


def _names(directory: Path) -> Iterable[str]:
    return [entry.name for entry in directory.iterdir()]


def _describe(args: argparse.Namespace, out: TextIO) -> int:
    cluster = _Cluster(args.bootstrap_server, args.timeout)
    try:
        status = 0
        for topic in args.topic:
            status = max(status, _describe_topic(cluster, topic, out))
        return status
    finally:
        cluster.close()


def _describe_topic(cluster: _Cluster, topic: str, out: TextIO) -> int:
    metadata = cluster.metadata([topic])
    [described] = [t for t in metadata.topics if str(t.name) == topic]
    problem = _error(described.error_code)
    if problem is not None:
        print(f"odradek: topic {topic!r}: {problem}", file=sys.stderr)
        return 1
    leaders = {int(p.partition_index): int(p.leader_id) for p in described.partitions}
    replication = max((len(p.replica_nodes) for p in described.partitions), default=0)
    configs = _configs(cluster, topic)
    offsets = _offsets(cluster, topic, leaders)
    sizes = _log_dirs(cluster, topic, leaders)
    shown = ",".join(f"{k}={configs[k]}" for k in _SHOWN_CONFIGS if k in configs)
    print(
        f"Topic: {topic}\tPartitionCount: {len(leaders)}\tReplicationFactor: {replication}\t"
        f"Configs: {shown}",
        file=out,
    )
    rows = [("PARTITION", "LEADER", "LOG-START", "LOG-END", "SEGMENTS", "SIZE-BYTES", "LOG-DIR")]
    estimated = False
    segment_bytes = int(configs.get("segment.bytes", "0") or 0)
    for partition in sorted(leaders):
        start, end = offsets[partition]
        size, log_dir = sizes.get(partition, (-1, ""))
        count = segment_count(log_dir, topic, partition) if log_dir else None
        if count is not None:
            segments = str(count)
        elif size >= 0 and segment_bytes > 0:
            segments = f"~{max(1, math.ceil(size / segment_bytes))}"
            estimated = True
        else:
            segments = "?"
        rows.append(
            (
                str(partition),
                str(leaders[partition]),
                str(start),
                str(end),
                segments,
                str(size) if size >= 0 else "?",
                log_dir or "?",
            )
        )
    _table(rows, out)
    if estimated:
        print(
            "~: estimated from the size and segment.bytes; the broker's log dir is not "
            "readable here to count segment files",
            file=out,
        )
    return 0


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(), file=out
        )


def _run(function: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            result: int = function(args, sys.stdout)
            return result
        except CommandError as e:
            print(f"odradek: {e}", file=sys.stderr)
            return 1

    return run


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = commands.add_parser("topics", help="list topics, describe their partitions' logs")
    connection_options(topics, DEFAULT_BOOTSTRAP, TIMEOUT_S)
    actions = topics.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="the names of all topics")
    listing.set_defaults(run=_run(_list))
    describe = actions.add_parser(
        "describe", help="per partition: log start and end offsets, segments, size on disk"
    )
    describe.add_argument("topic", nargs="+", help="topic name(s)")
    describe.set_defaults(run=_run(_describe))
    for action in (listing, describe):
        # Also accepted after the action, as kafka-topics users write it.
        connection_options(action, argparse.SUPPRESS, argparse.SUPPRESS)
