"""What transactions cost: a transactional producer committing every ``--commit-ms`` (100) against
a plain idempotent producer, and read_committed consumers against read_uncommitted ones, on a
fresh broker process (``odradek serve``), run after run in alternating order since the machine's
load drifts.

Producers are confluent-kafka (librdkafka) ``produce()`` loops of ``--record-size`` records to a
6-partition topic for ``--duration`` seconds, linger.ms=5; the rate counts records acknowledged
(delivery reports) and the broker's CPU (user + system from /proc) per record. Consumers read a
topic the transactional producer wrote (markers every ``--commit-ms``) from offset 0 with
assign(), counting records without a Python loop per record. Prints each run and the medians.

    python benchmarks/transactions.py --rounds 3 --duration 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.bench.scenarios import cpu_seconds
from odradek.testing import BrokerProcess

PARTITIONS = 6


def cpu_s(broker: BrokerProcess) -> float:
    assert broker.process is not None
    seconds = cpu_seconds(broker.process.pid)
    assert seconds is not None, "the broker process is gone"
    return seconds


def produce(
    bootstrap: str, topic: str, transactional: bool, args: argparse.Namespace
) -> tuple[int, float]:
    """Records acknowledged and the seconds it took."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "enable.idempotence": True,
        "queue.buffering.max.messages": 500_000,
    }
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(config)
    acked = [0]

    def delivered(error: object, _message: object) -> None:
        if error is None:
            acked[0] += 1

    value = b"x" * args.record_size
    if transactional:
        producer.init_transactions(30)
    start = time.monotonic()
    end = start + args.duration
    while time.monotonic() < end:
        if transactional:
            producer.begin_transaction()
        window_end = min(end, time.monotonic() + args.commit_ms / 1000)
        while time.monotonic() < window_end:
            for _ in range(1000):
                try:
                    producer.produce(topic, value, on_delivery=delivered)
                except BufferError:
                    producer.poll(0.01)
                    break
            producer.poll(0)
        if transactional:
            producer.commit_transaction(30)  # flushes
    producer.flush(60)
    return acked[0], time.monotonic() - start


def consume(bootstrap: str, topic: str, isolation: str, expected: int) -> tuple[int, float]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    count = 0
    start = time.monotonic()
    deadline = start + 120
    while count < expected and time.monotonic() < deadline:
        count += len(consumer.consume(10_000, timeout=1))
    seconds = time.monotonic() - start
    consumer.close()
    return count, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--commit-ms", type=int, default=100)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="txn-bench-") as directory:
        broker = BrokerProcess(Path(directory)).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            rates: dict[str, list[float]] = {}
            cpus: dict[str, list[float]] = {}
            topics = []
            for round_ in range(args.rounds):
                order = ["idempotent", "transactional"]
                if round_ % 2:
                    order.reverse()
                for kind in order:
                    topic = f"{kind}-{round_}"
                    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
                    time.sleep(0.5)
                    os.sync()
                    before = cpu_s(broker)
                    records, seconds = produce(
                        broker.bootstrap, topic, kind == "transactional", args
                    )
                    cpu = cpu_s(broker) - before
                    rates.setdefault(kind, []).append(records / seconds)
                    cpus.setdefault(kind, []).append(cpu / records * 1e6)
                    print(
                        f"produce {kind:13s} {records / seconds:10,.0f} rec/s  "
                        f"{cpu / records * 1e6:6.2f} broker CPU-s per million",
                        flush=True,
                    )
                    if kind == "transactional":
                        topics.append((topic, records))
            for kind in ("idempotent", "transactional"):
                print(
                    f"median produce {kind:13s} {statistics.median(rates[kind]):10,.0f} rec/s  "
                    f"{statistics.median(cpus[kind]):6.2f} CPU-s/M"
                )
            ratio = statistics.median(rates["transactional"]) / statistics.median(
                rates["idempotent"]
            )
            print(f"transactional / idempotent = {ratio:.2f} (target >= 0.80)")

            reads: dict[str, list[float]] = {}
            for round_ in range(args.rounds):
                topic, records = topics[round_ % len(topics)]
                order = ["read_uncommitted", "read_committed"]
                if round_ % 2:
                    order.reverse()
                for isolation in order:
                    count, seconds = consume(broker.bootstrap, topic, isolation, records)
                    reads.setdefault(isolation, []).append(count / seconds)
                    print(f"consume {isolation:16s} {count / seconds:10,.0f} rec/s ({count})")
            for isolation in ("read_uncommitted", "read_committed"):
                print(
                    f"median consume {isolation:16s} {statistics.median(reads[isolation]):10,.0f}"
                )
            ratio = statistics.median(reads["read_committed"]) / statistics.median(
                reads["read_uncommitted"]
            )
            print(f"read_committed / read_uncommitted = {ratio:.2f} (target >= 0.90)")
        finally:
            broker.terminate()


if __name__ == "__main__":
    main()
