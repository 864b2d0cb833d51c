"""Log compaction: how fast the cleaner compacts, and what it costs producers meanwhile.

Two measurements:

1. **Compaction speed** (storage only, no broker): a log of ``--dirty-mb`` MB of keyed records
   (``--keys`` distinct keys, ``--value-size`` byte values, 100 records a batch) is compacted in
   one pass, on this thread; the speed is MB of dirty log per second.  Once uncompressed, once
   with lz4-compressed batches (random values, so compression saves little).

2. **Produce throughput with and without the cleaner** (a broker in a child process,
   ``odradek serve``): one confluent-kafka producer (acks=1, linger.ms=5) writes
   ``--value-size`` byte records to a topic for ``--seconds`` while the cleaner is idle, then
   again while the cleaner compacts ``--dirty-mb`` MB of another, compacted topic (written
   beforehand, made cleanable by lowering its ``min.compaction.lag.ms``).  Reported: records/s,
   MB/s and delivery latency percentiles for both windows, and the pass's own speed from the
   broker's log.

    python benchmarks/compaction.py [--dirty-mb 200] [--seconds 5] [--value-size 100]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.clock import ManualClock
from odradek.protocol import compression
from odradek.protocol.record_batch import validate_batches
from odradek.protocol.records import encode_batch
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import LogCleaner
from odradek.testing import BrokerProcess

TIMEOUT_S = 120
BATCH_RECORDS = 100
_CLEANED = re.compile(r"cleaned (\S+) up to offset \d+: ([\d.]+) MB of dirty log at ([\d.]+) MB/s")


def keyed_batches(keys: int, value_size: int, codec: int, count: int) -> list[bytes]:
    """``count`` different batches whose keys cycle through ``keys`` keys."""
    return [
        encode_batch(
            [
                (
                    f"key-{(i * BATCH_RECORDS + j) % keys:010d}".encode(),
                    os.urandom(value_size),
                    (),
                    0,
                )
                for j in range(BATCH_RECORDS)
            ],
            compression=codec,
            now_ms=0,
        )
        for i in range(count)
    ]


def compaction_speed(dirty_mb: int, keys: int, value_size: int, codec: int) -> str:
    clock = ManualClock()
    config = LogConfig(
        segment_bytes=64 << 20, delete=False, compact=True, min_cleanable_dirty_ratio=0.0
    )
    with tempfile.TemporaryDirectory() as tmp:
        manager = LogManager([Path(tmp)], clock)
        manager.open(lambda topic: config)
        log = manager.create("speed", 0, config)
        batches = keyed_batches(keys, value_size, codec, 1000)
        written = i = 0
        while written < dirty_mb * 1_000_000:
            data = bytearray(batches[i % len(batches)])
            log.append(data, validate_batches(data, 1 << 30))
            written += len(data)
            i += 1
        log.flush()
        result = LogCleaner(manager, clock).clean_once()
        manager.close()
    assert result is not None
    name = compression.codec_name(codec)
    return (
        f"compaction  {name:<5} {result.dirty_bytes / 1e6:7.1f} MB dirty in {result.seconds:6.2f} s"
        f" = {result.dirty_mb_per_second:6.1f} MB/s  "
        f"({result.records_read / result.seconds:,.0f} records/s, "
        f"{result.records_read:,} -> {result.records_kept:,} records)"
    )


def create_topics(bootstrap: str, value_size: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic("produced", 1, 1),
        NewTopic(
            "compacted",
            1,
            1,
            config={
                "cleanup.policy": "compact",
                "segment.bytes": str(32 << 20),
                "min.cleanable.dirty.ratio": "0.01",
                "min.compaction.lag.ms": str(24 * 3600 * 1000),  # not yet cleanable
            },
        ),
    ]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT_S)


def fill_compacted(bootstrap: str, dirty_mb: int, keys: int, value_size: int) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
        }
    )
    values = [os.urandom(value_size) for _ in range(1000)]
    total = i = 0
    started = time.perf_counter()
    while total < dirty_mb * 1_000_000:
        try:
            producer.produce("compacted", values[i % 1000], key=f"key-{i % keys:010d}".encode())
        except BufferError:
            producer.poll(0.01)
            continue
        total += value_size + 14 + 20
        i += 1
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    return time.perf_counter() - started


def produce_for(bootstrap: str, seconds: float, value_size: int) -> tuple[int, float, list[float]]:
    """Records acknowledged in ``seconds`` of producing, the time taken, and their latencies."""
    latencies: list[float] = []
    failures = 0

    def delivered(err: KafkaError | None, message: Message) -> None:
        nonlocal failures
        if err is not None:
            failures += 1
            return
        latency = message.latency()
        if latency is not None:
            latencies.append(latency)

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = os.urandom(value_size)
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        for _ in range(1000):
            try:
                producer.produce("produced", value, on_delivery=delivered)
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0 and failures == 0
    return len(latencies), time.perf_counter() - started, latencies


def make_cleanable(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        "compacted",
        incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def describe_produce(
    what: str, count: int, seconds: float, latencies: list[float], size: int
) -> str:
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    rate, mb = count / seconds, count * size / seconds / 1e6
    return (
        f"produce {what:<17} {rate:>10,.0f} records/s {mb:7.1f} MB/s   "
        f"latency p50 {cuts[49] * 1000:6.1f} ms  p99 {cuts[98] * 1000:7.1f} ms"
    )


def with_and_without_cleaner(dirty_mb: int, keys: int, value_size: int, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), "-o", "log.cleaner.backoff.ms=100").start()
        try:
            create_topics(broker.bootstrap, value_size)
            fill_s = fill_compacted(broker.bootstrap, dirty_mb, keys, value_size)
            print(f"wrote {dirty_mb} MB to the compacted topic in {fill_s:.1f} s")
            time.sleep(1)
            count, took, latencies = produce_for(broker.bootstrap, seconds, value_size)
            print(describe_produce("(cleaner idle)", count, took, latencies, value_size))
            make_cleanable(broker.bootstrap)
            cleaning_from = time.perf_counter()
            count, took, latencies = produce_for(broker.bootstrap, seconds, value_size)
            produced_until = time.perf_counter()
            print(describe_produce("(cleaner working)", count, took, latencies, value_size))
            deadline = time.monotonic() + TIMEOUT_S
            found = None
            while found is None and time.monotonic() < deadline:
                found = next((m for line in broker.output if (m := _CLEANED.search(line))), None)
                time.sleep(0.1)
            if found is None:
                print("the cleaner did not finish its pass")
                return
            cleaned_s = float(found.group(2)) / float(found.group(3))
            overlap = min(1.0, cleaned_s / (produced_until - cleaning_from))
            print(
                f"cleaner pass (in the broker, beside the producer): {found.group(2)} MB dirty at "
                f"{found.group(3)} MB/s, {cleaned_s:.1f} s; it ran for {overlap:.0%} of the "
                "second produce window"
            )
        finally:
            broker.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dirty-mb", type=int, default=200, help="MB of log to compact")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys in it")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per record value")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of a produce window")
    parser.add_argument("--skip-broker", action="store_true", help="only the storage part")
    args = parser.parse_args()
    for codec in (compression.NONE, compression.LZ4):
        print(compaction_speed(args.dirty_mb, args.keys, args.value_size, codec), flush=True)
    if not args.skip_broker:
        with_and_without_cleaner(args.dirty_mb, args.keys, args.value_size, args.seconds)


if __name__ == "__main__":
    main()
