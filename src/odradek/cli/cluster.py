"""``odradek cluster``: the brokers, the controller, and the partitions that need attention.

From one Metadata answer (through :class:`~odradek.client.admin.ClusterAdmin`): the live
brokers with their address and rack, the controller, and brokers that hold replicas but are not
live; then the partitions that are under-replicated (fewer in-sync replicas than replicas),
under min ISR (no leader, or fewer in-sync replicas than the topic's ``min.insync.replicas``:
acks=all writes fail) and offline (no live leader: neither reads nor writes), each as a table,
as ``kafka-topics.sh --describe --under-replicated-partitions`` (and its siblings) list them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, run_command
from odradek.cli.output import columns, output_option, wants_json, write_json, write_table
from odradek.client.admin import ClusterAdmin, ClusterDescription, PartitionReplicas

TIMEOUT_S = 30.0

# (title, JSON field, which partitions) in the order they are shown.
SECTIONS: tuple[tuple[str, str, Callable[[PartitionReplicas], bool]], ...] = (
    ("Under-replicated partitions", "under_replicated", lambda p: p.is_under_replicated),
    ("Under-min-ISR partitions", "under_min_isr", lambda p: p.is_under_min_isr),
    ("Offline partitions", "offline", lambda p: p.is_offline),
)
_BROKER_COLUMNS = columns(
    ("BROKER", "broker"), ("ADDRESS", "address"), ("RACK", "rack"), ("STATUS", "status")
)
_PARTITION_COLUMNS = columns(
    ("TOPIC", "topic"),
    ("PARTITION", "partition"),
    ("LEADER", "leader"),
    ("REPLICAS", "replicas"),
    ("ISR", "isr"),
    ("OFFLINE", "offline"),
    ("MIN-ISR", "min_isr"),
)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="brokers, controller, and under-replicated, under-min-ISR and offline partitions",
    )
    connection_options(cluster, DEFAULT_BOOTSTRAP, TIMEOUT_S)
    output_option(cluster)
    cluster.set_defaults(run=run_command(_describe))


async def _describe(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        cluster = await admin.describe_cluster()
    if wants_json(args):
        write_json(cluster_record(cluster), out)
    else:
        format_cluster(cluster, out)
    return 0


def partition_record(p: PartitionReplicas) -> dict[str, object]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "leader": p.leader,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "offline": list(p.offline),
        "min_isr": p.min_insync_replicas,
    }


def cluster_record(cluster: ClusterDescription) -> dict[str, Any]:
    """What ``odradek cluster`` shows, as its JSON object."""
    controller = cluster.controller_id
    brokers: list[dict[str, object]] = [
        {
            "broker": b.node_id,
            "address": b.address,
            "rack": b.rack,
            "status": "controller" if b.node_id == controller else "live",
        }
        for b in cluster.brokers
    ]
    live = {b.node_id for b in cluster.brokers}
    named = {r for p in cluster.partitions() for r in p.replicas}
    brokers += [
        {"broker": node_id, "address": None, "rack": None, "status": "not-live"}
        for node_id in sorted(named - live)
    ]
    partitions = cluster.partitions()
    record: dict[str, Any] = {
        "cluster_id": cluster.cluster_id,
        "controller": controller,
        "brokers": brokers,
        "partition_count": len(partitions),
        "topic_count": len(cluster.topics),
    }
    for _, field, selected in SECTIONS:
        record[field] = [partition_record(p) for p in partitions if selected(p)]
    return record


def format_cluster(cluster: ClusterDescription, out: TextIO) -> None:
    record = cluster_record(cluster)
    controller = record["controller"]
    out.write(f"Cluster: {record['cluster_id'] or '-'}\n")
    if controller is None:
        out.write("Controller: none (no broker is controller now)\n")
    else:
        broker = cluster.broker(controller)
        where = f" at {broker.address}" if broker is not None else ""
        out.write(f"Controller: broker {controller}{where}\n")
    out.write("\n")
    write_table(record["brokers"], _BROKER_COLUMNS, out)
    partitions, topics = record["partition_count"], record["topic_count"]
    out.write(
        f"\n{partitions} partition{'s' if partitions != 1 else ''} in {topics} "
        f"topic{'s' if topics != 1 else ''}\n"
    )
    for title, field, _ in SECTIONS:
        chosen = record[field]
        out.write(f"\n{title}: {len(chosen)}\n")
        if chosen:
            rows = [{**p, "leader": "none" if p["leader"] is None else p["leader"]} for p in chosen]
            write_table(rows, _PARTITION_COLUMNS, out)
