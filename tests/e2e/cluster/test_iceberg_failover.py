"""A topic's Iceberg table through a leader change: a three-broker cluster sharing one catalog,
an RF=3 key_value topic under acks=all load, its leader killed with kill -9 (so the new leader
takes over the translation from the table's offset, while the old leader's last commit may
still land) and started again. Every acknowledged record is then in the table exactly once."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from odradek.config import BrokerConfig
from odradek.iceberg.tables import committed_offsets, open_catalog
from odradek.testing import wait_until

from .failover_support import create_replicated_topic, started_cluster, wait_for_leader

TOPIC = "failing-over"


class Acks:
    def __init__(self) -> None:
        self.acked: set[int] = set()

    def __call__(self, err: KafkaError | None, message: Message) -> None:
        if err is None:
            offset = message.offset()
            assert offset is not None
            self.acked.add(offset)


def _produce(producer: Producer, acks: Acks, more: int) -> None:
    target = len(acks.acked) + more
    deadline = time.monotonic() + 90
    while len(acks.acked) < target:
        assert time.monotonic() < deadline, f"{len(acks.acked)} of {target} acknowledged"
        with contextlib.suppress(BufferError):  # a full queue: poll, then produce again
            producer.produce(TOPIC, value=b"v" * 50, on_delivery=acks)
        producer.poll(0.002)


def test_the_new_leader_goes_on_where_the_table_ends(tmp_path: Path) -> None:
    shared = tmp_path / "lake"
    catalog_settings = {
        "iceberg.catalog.uri": f"sqlite:///{shared}/catalog.db",
        "iceberg.warehouse": f"file://{shared}/warehouse",
    }
    catalog = open_catalog(BrokerConfig(catalog_settings).iceberg_catalog())

    def table_offset() -> int | None:
        try:
            return committed_offsets(catalog.load_table(("odradek", TOPIC))).get(0)
        except Exception:
            return None

    with started_cluster(tmp_path, settings=catalog_settings) as cluster:
        before = create_replicated_topic(
            cluster, TOPIC, 1, **{"iceberg.mode": "key_value", "iceberg.commit.interval.ms": "200"}
        )[0]
        producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
            }
        )
        acks = Acks()
        _produce(producer, acks, 2000)
        wait_until(lambda: (table_offset() or 0) > 0, what="a first commit")
        _produce(producer, acks, 1000)
        cluster.kill(before.leader)
        wait_for_leader(cluster, TOPIC, not_on=(before.leader,))
        _produce(producer, acks, 2000)
        cluster.start_broker(before.leader)
        wait_for_leader(cluster, TOPIC, isr_size=3)
        _produce(producer, acks, 1000)
        assert producer.flush(60) == 0

        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "hw"})
        end = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1]
        consumer.close()
        wait_until(lambda: table_offset() == end, timeout_s=60, what=f"the table at {end}")
        rows = catalog.load_table(("odradek", TOPIC)).scan().to_arrow()
        offsets = Counter(r["offset"] for r in rows.column("kafka").to_pylist())
        assert [o for o, n in offsets.items() if n > 1] == []
        assert acks.acked - set(offsets) == set()
        assert set(offsets) == set(range(end))
