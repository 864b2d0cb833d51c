"""A quick throughput check: produce and consume N records with confluent-kafka.

Not a test and not a careful benchmark — a number to notice regressions by. It starts an
in-process broker in a temporary directory unless ``--bootstrap`` names a running one, then for
each record size produces ``--count`` records (linger.ms=5, batch.size 1 MB, acks=1) to a fresh
one-partition topic and reads them back from offset 0 with an assigned consumer.

    python benchmarks/quick.py [--count 200000] [--sizes 100,1024] [--bootstrap host:port]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import uuid
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import running_broker

TIMEOUT_S = 60


@contextlib.contextmanager
def bootstrap_address(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    with running_broker() as broker:
        yield broker.bootstrap


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, count: int, size: int) -> float:
    """Seconds to produce ``count`` records of ``size`` bytes, all acknowledged."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    value = os.urandom(size)
    failures = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal failures
        if err is not None:
            failures += 1

    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    remaining = producer.flush(TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"{remaining} records undelivered, {failures} failed")
    return elapsed


def consume(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to read ``count`` records back from offset 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "quick-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * 1024 * 1024,
            "max.partition.fetch.bytes": 10 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    received = 0
    started = time.perf_counter()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while received < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {received} of {count} records read back")
            for message in consumer.consume(10_000, timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                received += 1
        return time.perf_counter() - started
    finally:
        consumer.close()


def report(what: str, count: int, size: int, seconds: float) -> None:
    print(
        f"{what:<8} {count:>9} x {size:>5} B  {seconds:7.2f} s  "
        f"{count / seconds:>11,.0f} records/s  {count * size / seconds / 1e6:8.1f} MB/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000, help="records per size")
    parser.add_argument("--sizes", default="100,1024", help="record value sizes in bytes")
    parser.add_argument("--bootstrap", help="a running broker (default: start one in-process)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with bootstrap_address(args.bootstrap) as bootstrap:
        print(f"broker {bootstrap}, {args.count} records per size")
        for size in sizes:
            topic = f"bench-{size}-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic)
            report("produce", args.count, size, produce(bootstrap, topic, args.count, size))
            report("consume", args.count, size, consume(bootstrap, topic, args.count))


if __name__ == "__main__":
    main()
