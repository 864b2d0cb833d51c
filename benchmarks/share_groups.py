"""Share groups (KIP-932) beside a consumer group: how fast 1, 2 and 4 confluent-kafka
``ShareConsumer``s drain a topic that a classic consumer group reads at the same time, and how
long a RELEASEd record takes to come back.

For each consumer count a fresh share group (``share.auto.offset.reset=earliest``) and a fresh
consumer group read the same pre-filled 4-partition topic; the share consumers run one per
thread (librdkafka does the work outside the GIL) and acknowledge implicitly. Reported: records/s
of the share group (from its first poll to its last record), records/s of the consumer group
beside it, and the broker's CPU per share record (its user + system time over the run divided
by the records both groups read). Redelivery latency: one consumer RELEASEs a record and polls
again; the time from the release to the record's second delivery, median and worst of
``--releases`` tries.

    python benchmarks/share_groups.py --records 50000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.bench.scenarios import cpu_seconds
from odradek.testing import BrokerProcess

PARTITIONS = 4
TIMEOUT_S = 300


def earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    if not records:
        return
    payload = b"x" * size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


def share_worker(
    bootstrap: str,
    group: str,
    topic: str,
    counts: list[int],
    index: int,
    total: int,
    done: threading.Event,
    last: list[float],
) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([topic])
    try:
        while not done.is_set():
            got = [m for m in consumer.poll(0.2) if m.error() is None]
            if got:
                counts[index] += len(got)
                last[0] = time.monotonic()
                if sum(counts) >= total:
                    done.set()
    finally:
        consumer.close()


def group_worker(bootstrap: str, topic: str, total: int, result: list[float]) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"classic-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    seen = 0
    start = time.monotonic()
    deadline = start + TIMEOUT_S
    while seen < total and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.consume(1000, 0.2) if m.error() is None)
    result.append(seen / (time.monotonic() - start))
    consumer.close()


def throughput(broker: BrokerProcess, topic: str, consumers: int, total: int) -> str:
    bootstrap = broker.bootstrap
    group = f"share-{uuid.uuid4().hex[:8]}"
    earliest(bootstrap, group)
    assert broker.process is not None
    cpu_before = cpu_seconds(broker.process.pid) or 0.0
    counts = [0] * consumers
    done = threading.Event()
    last = [0.0]
    classic: list[float] = []
    threads = [
        threading.Thread(
            target=share_worker,
            args=(bootstrap, group, topic, counts, i, total, done, last),
        )
        for i in range(consumers)
    ]
    threads.append(threading.Thread(target=group_worker, args=(bootstrap, topic, total, classic)))
    start = time.monotonic()
    for thread in threads:
        thread.start()
    done.wait(TIMEOUT_S)
    done.set()
    for thread in threads:
        thread.join(TIMEOUT_S)
    cpu = (cpu_seconds(broker.process.pid) or 0.0) - cpu_before
    share_rate = sum(counts) / max(last[0] - start, 1e-9)
    classic_rate = classic[0] if classic else 0.0
    per_record_us = cpu / max(sum(counts) + total, 1) * 1e6
    return (
        f"{consumers} share consumer(s): {share_rate:,.0f} records/s "
        f"(split {counts}); consumer group beside it: {classic_rate:,.0f} records/s; "
        f"broker CPU {per_record_us:.1f} us per record read"
    )


def redelivery(broker: BrokerProcess, tries: int) -> str:
    """Each try: a new record is delivered, RELEASEd, and polled for until it comes back."""
    bootstrap = broker.bootstrap
    topic = f"release-{uuid.uuid4().hex[:8]}"
    fill(bootstrap, topic, 0, 10)
    group = f"share-{uuid.uuid4().hex[:8]}"
    earliest(bootstrap, group)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap})
    latencies: list[float] = []
    deadline = time.monotonic() + TIMEOUT_S
    for _ in range(tries):
        producer.produce(topic, b"r", partition=0)
        producer.flush(30)
        released_at: float | None = None
        while time.monotonic() < deadline:
            got = [m for m in consumer.poll(0.5) if m.error() is None]
            for message in got:
                if message.delivery_count() == 1:
                    consumer.acknowledge(message, AcknowledgeType.RELEASE)
                    released_at = time.monotonic()
                else:
                    assert released_at is not None
                    latencies.append(time.monotonic() - released_at)
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            if got and got[-1].delivery_count() > 1:
                break
    consumer.close()
    ms = sorted(x * 1000 for x in latencies)
    if not ms:
        return "redelivery after RELEASE: no redelivery seen"
    return (
        f"redelivery after RELEASE ({len(ms)} tries): median {statistics.median(ms):.1f} ms, "
        f"worst {ms[-1]:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per record")
    parser.add_argument("--releases", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-share-bench-") as data:
        broker = BrokerProcess(
            Path(data),
            "-o",
            "group.initial.rebalance.delay.ms=0",
            "-o",
            "group.share.delivery.count.limit=10",
        ).start()
        try:
            topic = f"share-bench-{uuid.uuid4().hex[:8]}"
            fill(broker.bootstrap, topic, args.records, args.size)
            print(f"{args.records} records of {args.size} bytes, {PARTITIONS} partitions")
            for consumers in (1, 2, 4):
                print(throughput(broker, topic, consumers, args.records), flush=True)
            print(redelivery(broker, args.releases))
        finally:
            broker.terminate()


if __name__ == "__main__":
    main()
