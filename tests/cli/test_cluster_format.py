"""What ``odradek cluster`` calls under-replicated, under min ISR and offline, and how it shows
them: value objects in, text out, no broker."""

from __future__ import annotations

import io

from odradek.cli.cluster import format_cluster
from odradek.client.admin import (
    BrokerNode,
    ClusterDescription,
    PartitionReplicas,
    TopicDescription,
)

from .support import table_after


def partition(
    index: int, leader: int | None, isr: tuple[int, ...], min_isr: int | None = 2
) -> PartitionReplicas:
    replicas = (1, 2, 3)
    live = {1, 2}
    offline = tuple(r for r in replicas if r not in live)
    return PartitionReplicas("t", index, leader, 4, replicas, isr, offline, min_isr)


def test_the_three_kinds_of_partitions_needing_attention() -> None:
    healthy = partition(0, 1, (1, 2, 3))
    under = partition(1, 1, (1, 2))
    below_min = partition(2, 2, (2,))
    offline = partition(3, None, (3,))
    no_config = partition(4, 1, (1,), min_isr=None)
    assert [p.is_under_replicated for p in (healthy, under, below_min, offline, no_config)] == [
        False,
        True,
        True,
        True,
        True,
    ]
    assert [p.is_under_min_isr for p in (healthy, under, below_min, offline, no_config)] == [
        False,
        False,
        True,
        True,  # no leader: acks=all writes fail as surely as below min ISR
        False,  # min.insync.replicas unknown: nothing to compare with
    ]
    assert [p.is_offline for p in (healthy, under, below_min, offline, no_config)] == [
        False,
        False,
        False,
        True,
        False,
    ]


def test_format_lists_brokers_not_live_and_each_section() -> None:
    cluster = ClusterDescription(
        "abc",
        2,
        (BrokerNode(1, "127.0.0.1", 9092, "r1"), BrokerNode(2, "127.0.0.1", 9093, None)),
        (
            TopicDescription(
                "t",
                None,
                False,
                (partition(0, 1, (1, 2, 3)), partition(1, 2, (2,)), partition(2, None, (3,))),
            ),
        ),
    )
    out = io.StringIO()
    format_cluster(cluster, out)
    text = out.getvalue()
    assert "Controller: broker 2 at 127.0.0.1:9093" in text
    assert table_after(text, "BROKER") == [
        {"BROKER": "1", "ADDRESS": "127.0.0.1:9092", "RACK": "r1", "STATUS": "live"},
        {"BROKER": "2", "ADDRESS": "127.0.0.1:9093", "RACK": "-", "STATUS": "controller"},
        {"BROKER": "3", "ADDRESS": "-", "RACK": "-", "STATUS": "not-live"},
    ]
    assert "3 partitions in 1 topic\n" in text
    under = table_after(text, "TOPIC", after="Under-replicated partitions: 2")
    assert [r["PARTITION"] for r in under] == ["1", "2"]
    assert under[0] == {
        "TOPIC": "t",
        "PARTITION": "1",
        "LEADER": "2",
        "REPLICAS": "1,2,3",
        "ISR": "2",
        "OFFLINE": "3",
        "MIN-ISR": "2",
    }
    below = table_after(text, "TOPIC", after="Under-min-ISR partitions: 2")
    assert [r["PARTITION"] for r in below] == ["1", "2"]
    offline = table_after(text, "TOPIC", after="Offline partitions: 1")
    assert [(r["PARTITION"], r["LEADER"]) for r in offline] == [("2", "none")]
    # Aligned: every row of a table starts its columns at the same place.
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("BROKER "))
    row = next(line for line in lines if line.startswith("3 "))
    assert header.index("STATUS") == row.index("not-live")
