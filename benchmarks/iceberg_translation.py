"""Topics as Iceberg tables (``iceberg.mode``): how fast a broker translates, and what it costs
the produce path.

1. Translation rate: a fresh broker process, a topic of ``--partitions`` partitions loaded with
   ``--records`` records (``odradek bench``'s raw pipelined Produce, keyed 100-byte values, or
   Avro values with a Confluent prefix from the broker's registry) while its mode is disabled;
   then the mode is set (the backfill path, the same reads and commits as a live topic) and the
   time and broker CPU until the table's committed offsets reach the log end are measured.
   Prints rows/s and rows per CPU-second of the broker and its translation worker process
   together (translation is their only work meanwhile: rows/s per core).
2. Produce ceiling: the raw pipelined Produce load for ``--duration`` seconds against a topic
   with the mode disabled and with key_value (commit interval 60 s, the default), alternating,
   ``--rounds`` times. Prints records/s and records per CPU-second (broker and worker) for each.

3. Lag under a steady load: confluent-kafka produces ``--rate`` records/s for ``--duration``
   seconds to a key_value topic (commit interval ``--lag-interval-ms``); ``/metrics`` is read
   every second; prints the largest and median translation lag in records and seconds.

    python benchmarks/iceberg_translation.py --records 300000 --rounds 2 --duration 8
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

import fastavro
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from odradek.bench.scenarios import cpu_seconds
from odradek.bench.wire import raw_load
from odradek.config import BrokerConfig
from odradek.iceberg.tables import committed_offsets, open_catalog
from odradek.protocol.records import NewRecord, encode_batch
from odradek.testing import BrokerProcess

AVRO = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
BATCH_RECORDS = 1000


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its descendants (the broker and its translation worker)."""
    total = cpu_seconds(pid) or 0.0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        total += sum(tree_cpu_seconds(int(child)) for child in children)
    return total


def start(directory: Path) -> BrokerProcess:
    return BrokerProcess(directory, "-o", "schema.registry.listener=127.0.0.1:0").start()


def key_value_batch() -> bytes:
    now = int(time.time() * 1000)
    records = [NewRecord(f"key-{i % 100}".encode(), bytes(100), ()) for i in range(BATCH_RECORDS)]
    return encode_batch(records, now_ms=now)


def avro_batch(schema_id: int) -> bytes:
    now = int(time.time() * 1000)
    parsed = fastavro.parse_schema(AVRO)
    records = []
    for i in range(BATCH_RECORDS):
        out = io.BytesIO()
        out.write(struct.pack(">bI", 0, schema_id))
        row = {"id": i, "user": f"user-{i % 50}", "amount": i / 7, "ok": i % 2 == 0, "at": now}
        fastavro.schemaless_writer(out, parsed, row)
        records.append(NewRecord(None, out.getvalue()))
    return encode_batch(records, now_ms=now)


def set_mode(bootstrap: str, topic: str, mode: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry("iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET),
        ConfigEntry(
            "iceberg.commit.interval.ms", "1000", incremental_operation=AlterConfigOpType.SET
        ),
    ]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def translation_rate(mode: str, args: argparse.Namespace) -> tuple[float, float]:
    directory = Path(tempfile.mkdtemp(prefix="iceberg-bench-"))
    broker = start(directory)
    assert broker.process is not None
    try:
        topic = "events"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
        time.sleep(1)  # the partitions open
        if mode == "key_value":
            batch = key_value_batch()
        else:
            url = next(
                m.group(1)
                for line in broker.output
                if (m := re.search(r"schema registry on (http://[^/\s]+)/", line))
            )
            registry = SchemaRegistryClient({"url": url})
            schema_id = registry.register_schema(f"{topic}-value", Schema(json.dumps(AVRO), "AVRO"))
            batch = avro_batch(schema_id)
        loaded = raw_load(
            broker.bootstrap,
            topic,
            record_size=100,
            batch_records=BATCH_RECORDS,
            connections=args.partitions,
            window=8,
            total_records=args.records,
            batch=batch,
        )
        total = loaded.records
        catalog = open_catalog(BrokerConfig({"log.dirs": str(directory)}).iceberg_catalog())
        cpu_before = tree_cpu_seconds(broker.process.pid)
        began = time.monotonic()
        set_mode(broker.bootstrap, topic, mode)
        while True:
            time.sleep(0.5)
            try:
                table = catalog.load_table(("odradek", topic))
            except Exception:
                continue
            if sum(committed_offsets(table).values()) >= total:
                break
        seconds = time.monotonic() - began
        cpu = (tree_cpu_seconds(broker.process.pid)) - cpu_before
        return total / seconds, total / cpu
    finally:
        broker.terminate(60)
        shutil.rmtree(directory, ignore_errors=True)


def produce_ceiling(mode: str, args: argparse.Namespace) -> tuple[float, float]:
    directory = Path(tempfile.mkdtemp(prefix="iceberg-bench-"))
    broker = start(directory)
    assert broker.process is not None
    try:
        topic = "raw"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {} if mode == "disabled" else {"iceberg.mode": mode}
        admin.create_topics([NewTopic(topic, args.partitions, 1, config=configs)])[topic].result(30)
        time.sleep(1.5)  # the partitions open, the translators start
        cpu_before = tree_cpu_seconds(broker.process.pid)
        result = raw_load(
            broker.bootstrap,
            topic,
            record_size=100,
            batch_records=BATCH_RECORDS,
            connections=args.partitions,
            window=16,
            duration_s=args.duration,
            batch=key_value_batch(),
        )
        cpu = (tree_cpu_seconds(broker.process.pid)) - cpu_before
        if result.errors:
            raise RuntimeError(result.first_error)
        return result.records / result.seconds, result.records / cpu
    finally:
        broker.terminate(60)
        shutil.rmtree(directory, ignore_errors=True)


def steady_lag(args: argparse.Namespace) -> None:
    import urllib.request

    from confluent_kafka import Producer
    from prometheus_client.parser import text_string_to_metric_families

    from odradek.testing import free_port

    directory = Path(tempfile.mkdtemp(prefix="iceberg-bench-"))
    metrics = f"127.0.0.1:{free_port()}"
    broker = BrokerProcess(directory, "-o", f"metrics.listener={metrics}").start()
    try:
        topic = "steady"
        configs = {
            "iceberg.mode": "key_value",
            "iceberg.commit.interval.ms": str(args.lag_interval_ms),
        }
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, args.partitions, 1, config=configs)])[topic].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        value = bytes(100)
        records, seconds = [], []
        began = time.monotonic()
        sent = 0
        next_sample = began + 1
        while (now := time.monotonic()) - began < args.duration:
            due = int((now - began) * args.rate)
            while sent < due:
                try:
                    producer.produce(topic, key=str(sent % 100).encode(), value=value)
                    sent += 1
                except BufferError:
                    producer.poll(0.001)
            producer.poll(0)
            if now >= next_sample:
                next_sample += 1
                with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as answer:
                    text = answer.read().decode()
                lag_records = lag_seconds = 0.0
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name == "odradek_iceberg_translation_lag_records":
                            lag_records += sample.value
                        elif sample.name == "odradek_iceberg_translation_lag_seconds":
                            lag_seconds = max(lag_seconds, sample.value)
                records.append(lag_records)
                seconds.append(lag_seconds)
            time.sleep(0.001)
        producer.flush(30)
        rate = sent / (time.monotonic() - began)
        print(
            f"steady {rate:,.0f} records/s, commit interval {args.lag_interval_ms} ms: lag "
            f"records max {max(records):,.0f} median {statistics.median(records):,.0f}; "
            f"lag seconds max {max(seconds):.1f} median {statistics.median(seconds):.1f}"
        )
        # Files: one data file per commit of a partition per hour of timestamps it covers, so
        # at the default interval (60 s) about 60 per partition per hour.
        catalog = open_catalog(BrokerConfig({"log.dirs": str(directory)}).iceberg_catalog())
        table = catalog.load_table(("odradek", topic))
        files = len(table.inspect.files())
        commits = len(table.metadata.snapshots)
        per_commit = files / max(commits, 1)
        print(
            f"data files {files} in {commits} commits ({per_commit:.2f} per commit): at the "
            f"default 60 s interval about {60 * per_commit:.0f} data files per partition per hour"
        )
    finally:
        broker.terminate(60)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--skip-ceiling", action="store_true")
    parser.add_argument("--rate", type=int, default=50_000)
    parser.add_argument("--lag-interval-ms", type=int, default=1000)
    parser.add_argument("--only-lag", action="store_true")
    args = parser.parse_args()
    if args.only_lag:
        steady_lag(args)
        return
    for mode in ("key_value", "value_schema_id_prefix"):
        rate, per_cpu = translation_rate(mode, args)
        print(
            f"translation {mode:>22}: {rate:>9,.0f} rows/s  {per_cpu:>9,.0f} rows/CPU-s",
            flush=True,
        )
    steady_lag(args)
    if args.skip_ceiling:
        return
    runs: dict[str, list[tuple[float, float]]] = {"disabled": [], "key_value": []}
    for round_ in range(args.rounds):
        order = ["disabled", "key_value"] if round_ % 2 == 0 else ["key_value", "disabled"]
        for mode in order:
            run = produce_ceiling(mode, args)
            runs[mode].append(run)
            print(
                f"round {round_ + 1} produce, mode {mode:>9}: {run[0]:>10,.0f} records/s "
                f"{run[1]:>10,.0f} records/CPU-s",
                flush=True,
            )
    for mode, measured in runs.items():
        rates = [r for r, _ in measured]
        print(
            f"produce ceiling, mode {mode:>9}: median {statistics.median(rates):,.0f} records/s "
            f"(range {min(rates):,.0f}-{max(rates):,.0f})"
        )


if __name__ == "__main__":
    main()
