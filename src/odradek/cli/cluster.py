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
from typing import TextIO

from odradek.cli.options import DEFAULT_BOOTSTRAP, connection_options, print_table, run_command
from odradek.cli.topics import brokers_text, leader_text
from odradek.client.admin import ClusterAdmin, ClusterDescription, PartitionReplicas

TIMEOUT_S = 30.0

# (title, which partitions) in the order they are shown.
SECTIONS: tuple[tuple[str, Callable[[PartitionReplicas], bool]], ...] = (
    ("Under-replicated partitions", lambda p: p.is_under_replicated),
    ("Under-min-ISR partitions", lambda p: p.is_under_min_isr),
    ("Offline partitions", lambda p: p.is_offline),
)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="brokers, controller, and under-replicated, under-min-ISR and offline partitions",
    )
    connection_options(cluster, DEFAULT_BOOTSTRAP, TIMEOUT_S)
    cluster.set_defaults(run=run_command(_describe))


async def _describe(args: argparse.Namespace, out: TextIO) -> int:
    async with await ClusterAdmin.connect(args.bootstrap_server, timeout_s=args.timeout) as admin:
        cluster = await admin.describe_cluster()
    format_cluster(cluster, out)
    return 0


def format_cluster(cluster: ClusterDescription, out: TextIO) -> None:
    controller = cluster.controller_id
    out.write(f"Cluster: {cluster.cluster_id or '-'}\n")
    if controller is None:
        out.write("Controller: none (no broker is controller now)\n")
    else:
        broker = cluster.broker(controller)
        where = f" at {broker.address}" if broker is not None else ""
        out.write(f"Controller: broker {controller}{where}\n")
    out.write("\n")
    rows: list[tuple[str, ...]] = [("BROKER", "ADDRESS", "RACK", "STATUS")]
    for b in cluster.brokers:
        status = "controller" if b.node_id == controller else "live"
        rows.append((str(b.node_id), b.address, b.rack or "-", status))
    live = {b.node_id for b in cluster.brokers}
    named = {r for p in cluster.partitions() for r in p.replicas}
    for node_id in sorted(named - live):
        rows.append((str(node_id), "-", "-", "not-live"))
    print_table(rows, out)
    partitions = cluster.partitions()
    topics = len(cluster.topics)
    out.write(
        f"\n{len(partitions)} partition{'s' if len(partitions) != 1 else ''} in {topics} "
        f"topic{'s' if topics != 1 else ''}\n"
    )
    for title, selected in SECTIONS:
        chosen = [p for p in partitions if selected(p)]
        out.write(f"\n{title}: {len(chosen)}\n")
        if chosen:
            _partitions_table(chosen, out)


def _partitions_table(partitions: list[PartitionReplicas], out: TextIO) -> None:
    rows: list[tuple[str, ...]] = [
        ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "MIN-ISR")
    ]
    for p in partitions:
        rows.append(
            (
                p.topic,
                str(p.partition),
                leader_text(p),
                brokers_text(p.replicas),
                brokers_text(p.isr),
                brokers_text(p.offline),
                "-" if p.min_insync_replicas is None else str(p.min_insync_replicas),
            )
        )
    print_table(rows, out)
