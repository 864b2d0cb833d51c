"""Log compaction: how fast the cleaner compacts, and what it costs producers meanwhile.

Two measurements:

1. **Compaction speed** (storage only, no broker): a log of ``--dirty-mb`` MB of keyed records
   (``--keys`` distinct keys, ``--value-size`` byte values, 100 records a batch) is compacted in
   one pass, on this thread; the speed is MB of dirty log per second.  Once uncompressed, once
   with lz4-compressed batches (random values, so compression saves little).

2. **Produce throughput with and without the cleaner** (a broker in a child process,
   ``odradek serve``): ``--rounds`` times, one confluent-kafka producer (acks=1, linger.ms=5)
   writes ``--value-size`` byte records to a topic for ``--seconds`` while the cleaner is idle,
   then again while the cleaner compacts another topic of ``--dirty-mb / --rounds`` MB (written
   beforehand, made cleanable by lowering its ``min.compaction.lag.ms``).  Reported: the median
   records/s and MB/s, and delivery latency percentiles, of each kind of window, and each pass's
   own speed from the broker's log.  ``--broker-option`` configures the broker, e.g. a cleaner
   throttle: ``--broker-option log.cleaner.io.max.bytes.per.second=5000000``.

    python benchmarks/compaction.py [--dirty-mb 200] [--seconds 5] [--value-size 100] [--rounds 3]
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
        segment_bytes=16 << 20, delete=False, compact=True, min_cleanable_dirty_ratio=0.0
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


def create_topics(bootstrap: str, rounds: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic("produced", 1, 1)] + [
        NewTopic(
            f"compacted-{i}",
            1,
            1,
            config={
                "cleanup.policy": "compact",
                "segment.bytes": str(16 << 20),
                "min.cleanable.dirty.ratio": "0.01",
                "min.compaction.lag.ms": str(24 * 3600 * 1000),  # not cleanable yet
            },
        )
        for i in range(rounds)
    ]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT_S)


def fill_compacted(bootstrap: str, topic: str, dirty_mb: int, keys: int, value_size: int) -> None:
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
    while total < dirty_mb * 1_000_000:
        try:
            producer.produce(topic, values[i % 1000], key=f"key-{i % keys:010d}".encode())
        except BufferError:
            producer.poll(0.01)
            continue
        total += value_size + 14 + 20
        i += 1
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0


def produce_for(bootstrap: str, seconds: float, value_size: int) -> tuple[float, list[float]]:
    """Records per second acknowledged over ``seconds`` of producing, and their latencies."""
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
            "queue.buffering.max.messages": 200_000,
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
    return len(latencies) / (time.perf_counter() - started), latencies


def make_cleanable(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT_S)


def describe_produce(what: str, rates: list[float], latencies: list[float], size: int) -> str:
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    rate = statistics.median(rates)
    return (
        f"produce {what:<17} {rate:>10,.0f} records/s {rate * size / 1e6:6.1f} MB/s "
        f"(median of {len(rates)})  latency p50 {cuts[49] * 1000:6.1f} ms  "
        f"p99 {cuts[98] * 1000:7.1f} ms"
    )


def with_and_without_cleaner(
    dirty_mb: int,
    keys: int,
    value_size: int,
    seconds: float,
    rounds: int,
    broker_options: list[str],
) -> None:
    """Rounds of: a produce window with the cleaner idle, then one while it compacts a topic."""
    with tempfile.TemporaryDirectory() as tmp:
        options = ["-o", "log.cleaner.backoff.ms=100"]
        for option in broker_options:
            options += ["-o", option]
        broker = BrokerProcess(Path(tmp), *options).start()
        try:
            create_topics(broker.bootstrap, rounds)
            for i in range(rounds):
                fill_compacted(broker.bootstrap, f"compacted-{i}", dirty_mb, keys, value_size)
            idle: tuple[list[float], list[float]] = ([], [])
            working: tuple[list[float], list[float]] = ([], [])
            passes: list[tuple[float, float, float]] = []
            for i in range(rounds):
                time.sleep(1)
                rate, latencies = produce_for(broker.bootstrap, seconds, value_size)
                idle[0].append(rate)
                idle[1].extend(latencies)
                make_cleanable(broker.bootstrap, f"compacted-{i}")
                cleaning_from = time.perf_counter()
                rate, latencies = produce_for(broker.bootstrap, seconds, value_size)
                window = time.perf_counter() - cleaning_from
                working[0].append(rate)
                working[1].extend(latencies)
                deadline = time.monotonic() + TIMEOUT_S
                while len(found := _passes(broker.output)) <= i:
                    assert time.monotonic() < deadline, "the cleaner did not finish its pass"
                    time.sleep(0.1)
                mb, speed = found[i]
                passes.append((mb, speed, min(1.0, mb / speed / window)))
            print(describe_produce("(cleaner idle)", *idle, value_size))
            print(describe_produce("(cleaner working)", *working, value_size))
            for mb, speed, overlap in passes:
                print(
                    f"cleaner pass in the broker, beside the producer: {mb:.1f} MB dirty at "
                    f"{speed:.1f} MB/s; it ran for {overlap:.0%} of its produce window"
                )
        finally:
            broker.terminate()


def _passes(output: list[str]) -> list[tuple[float, float]]:
    return [
        (float(m.group(2)), float(m.group(3)))
        for line in list(output)
        if (m := _CLEANED.search(line))
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dirty-mb", type=int, default=200, help="MB of log to compact")
    parser.add_argument("--keys", type=int, default=100_000, help="distinct keys in it")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per record value")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of a produce window")
    parser.add_argument("--rounds", type=int, default=3, help="idle/working window pairs")
    parser.add_argument(
        "--broker-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config, e.g. log.cleaner.io.max.bytes.per.second=5000000",
    )
    parser.add_argument("--skip-broker", action="store_true", help="only the storage part")
    args = parser.parse_args()
    for codec in (compression.NONE, compression.LZ4):
        print(compaction_speed(args.dirty_mb, args.keys, args.value_size, codec), flush=True)
    if not args.skip_broker:
        with_and_without_cleaner(
            args.dirty_mb // args.rounds,
            args.keys,
            args.value_size,
            args.seconds,
            args.rounds,
            args.broker_option,
        )


if __name__ == "__main__":
    main()
