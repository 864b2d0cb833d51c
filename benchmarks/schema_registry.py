"""The schema registry served by the broker (issue 24): lookups by id, registration latency, and
produce throughput on a topic that validates schema ids beside one that does not.

``lookups``: one broker process (``schema.registry.listener``) with ``--schemas`` Avro schemas
registered; for ``--seconds`` each, schemas fetched by id, round robin: confluent-kafka's
``SchemaRegistryClient`` reused (cached: after its first fetch of an id it answers from its own
cache, so this is the client's figure), a fresh ``SchemaRegistryClient`` per lookup (uncached: a
new HTTP connection and an empty cache each time), raw ``GET /schemas/ids/{id}`` on one
keep-alive connection (the broker's figure), the same from ``--threads`` threads, and a new
connection per GET. The registrations' own latency on that one broker comes with it.

``registration``: a three-broker cluster (ZooKeeper and three ``odradek serve`` processes, as
the cluster tests run them), ``--count`` schemas registered one after another through each
broker's registry in turn: latency p50/p90/p99/max, overall and by broker (a registration goes
through the broker asked, which writes to the leader of ``_schemas`` with acks=all and reads
the topic back up to its record).

``produce``: one broker process with the registry, two topics of ``--partitions`` partitions,
one with ``confluent.value.schema.validation=true``; the raw pipelined Produce load
(:func:`odradek.bench.wire.raw_load`, ``odradek bench``'s ``raw``) sends one prebuilt batch of
``--batch-records`` records whose values carry a registered schema id, to each topic in turn,
``--rounds`` times per codec (order alternating as the machine's load drifts). Reported: records/s
and records per second of broker CPU (user + system of the broker process: less sensitive to
other processes taking the cores), median and range.

``micro``: the leader's validation alone (:func:`odradek.storage.validator.validate_for_leader`)
in this process, ns per record, of a topic without schema validation and of one with it, per
codec: the best of ``--repeats`` CPU timings.

    python benchmarks/schema_registry.py lookups
    python benchmarks/schema_registry.py registration --count 300
    python benchmarks/schema_registry.py produce --rounds 3 --duration 5
    python benchmarks/schema_registry.py micro
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient

from odradek.bench.scenarios import cpu_seconds
from odradek.bench.wire import raw_load
from odradek.protocol import compression
from odradek.protocol.records import NewRecord, encode_batch
from odradek.registry.schemas import SchemaContent
from odradek.registry.state import SchemaIdUse
from odradek.storage.log import LogConfig
from odradek.storage.validator import validate_for_leader
from odradek.testing import BrokerProcess, RunningCluster, wait_until

TIMEOUT_S = 60
_REGISTRY_LINE = re.compile(r"schema registry on (https?://[^/\s]+)/")


def schema(i: int) -> str:
    fields = [{"name": "id", "type": "long"}, {"name": f"field_{i}", "type": "string"}]
    return json.dumps({"type": "record", "name": f"Record{i}", "fields": fields})


def register(url: str, subject: str, text: str, session: requests.Session | None = None) -> int:
    post = (session or requests).post
    answer = post(f"{url}/subjects/{subject}/versions", json={"schema": text}, timeout=TIMEOUT_S)
    answer.raise_for_status()
    schema_id = answer.json()["id"]
    assert isinstance(schema_id, int)
    return schema_id


def start_broker() -> tuple[BrokerProcess, str]:
    """A broker process serving the registry, and the registry's URL."""
    directory = Path(tempfile.mkdtemp(prefix="registry-bench-"))
    broker = BrokerProcess(directory, "-o", "schema.registry.listener=127.0.0.1:0").start()
    found = wait_until(
        lambda: _REGISTRY_LINE.search("".join(broker.output)), TIMEOUT_S, what="the registry"
    )
    return broker, found.group(1)


def stop_broker(broker: BrokerProcess) -> None:
    broker.terminate(30)
    shutil.rmtree(broker.data_dir, ignore_errors=True)


def percentiles(latencies_s: list[float]) -> str:
    ordered = sorted(latencies_s)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return (
        f"p50 {at(0.5):7.2f} ms  p90 {at(0.9):7.2f} ms  p99 {at(0.99):7.2f} ms  "
        f"max {ordered[-1] * 1000:7.2f} ms  ({len(ordered)} registrations)"
    )


# -- lookups -----------------------------------------------------------------------------------


def rate(seconds: float, work: Callable[[int], object], threads: int = 1) -> float:
    """Calls of ``work(i)`` per second over ``seconds``, from ``threads`` threads."""
    counts = [0] * threads
    deadline = time.monotonic() + seconds

    def run(slot: int) -> None:
        i = slot
        while time.monotonic() < deadline:
            work(i)
            i += threads
            counts[slot] += 1

    started = time.monotonic()
    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(counts) / (time.monotonic() - started)


def lookups(args: argparse.Namespace) -> None:
    broker, url = start_broker()
    assert broker.process is not None
    try:
        with requests.Session() as session:
            latencies = []
            ids = []
            for i in range(args.schemas):
                started = time.perf_counter()
                ids.append(register(url, f"subject-{i}", schema(i), session))
                latencies.append(time.perf_counter() - started)
        print(f"registration, one broker: {percentiles(latencies)}")
        cached = SchemaRegistryClient({"url": url})
        for schema_id in ids:
            cached.get_schema(schema_id)
        local = threading.local()

        def keep_alive(i: int) -> None:
            if not hasattr(local, "session"):
                local.session = requests.Session()
            answer = local.session.get(f"{url}/schemas/ids/{ids[i % len(ids)]}", timeout=10)
            assert answer.status_code == 200

        def fresh_client(i: int) -> None:
            SchemaRegistryClient({"url": url}).get_schema(ids[i % len(ids)])

        def new_connection(i: int) -> None:
            answer = requests.get(f"{url}/schemas/ids/{ids[i % len(ids)]}", timeout=10)
            assert answer.status_code == 200

        runs: list[tuple[str, Callable[[int], object], int]] = [
            ("SchemaRegistryClient, cached", lambda i: cached.get_schema(ids[i % len(ids)]), 1),
            ("SchemaRegistryClient, a fresh one each (uncached)", fresh_client, 1),
            ("GET /schemas/ids/{id}, keep-alive", keep_alive, 1),
            (
                f"GET /schemas/ids/{{id}}, keep-alive, {args.threads} threads",
                keep_alive,
                args.threads,
            ),
            ("GET /schemas/ids/{id}, a new connection each", new_connection, 1),
        ]
        print(f"lookups by id over {len(ids)} ids, {args.seconds:.0f} s each:")
        for name, work, threads in runs:
            cpu_before = cpu_seconds(broker.process.pid) or 0.0
            per_s = rate(args.seconds, work, threads)
            cpu = (cpu_seconds(broker.process.pid) or 0.0) - cpu_before
            print(
                f"  {name:<52} {per_s:>10,.0f} lookups/s   broker CPU {cpu / args.seconds:4.2f}",
                flush=True,
            )
    finally:
        stop_broker(broker)


# -- registration in a cluster -----------------------------------------------------------------


def registration(args: argparse.Namespace) -> None:
    directory = Path(tempfile.mkdtemp(prefix="registry-cluster-bench-"))
    try:
        settings = {"schema.registry.listener": "127.0.0.1:0"}
        with RunningCluster(directory, settings=settings) as cluster:
            urls = {
                b: wait_until(
                    lambda b=b: _REGISTRY_LINE.search(cluster.output(b)),
                    TIMEOUT_S,
                    what=f"broker {b}'s registry",
                ).group(1)
                for b in cluster.brokers
            }
            # The first registration creates _schemas (RF=3) and elects its leader.
            register(urls[1], "warm-up", schema(10**6))
            by_broker: dict[int, list[float]] = {b: [] for b in urls}
            sessions = {b: requests.Session() for b in urls}
            for i in range(args.count):
                b = sorted(urls)[i % len(urls)]
                started = time.perf_counter()
                register(urls[b], f"subject-{i}", schema(i), sessions[b])
                by_broker[b].append(time.perf_counter() - started)
            everything = [s for latencies in by_broker.values() for s in latencies]
            print(f"registration, three brokers: {percentiles(everything)}")
            for b, latencies in sorted(by_broker.items()):
                print(f"  through broker {b}: {percentiles(latencies)}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- produce: validated beside unvalidated -----------------------------------------------------


def wire_batch(codec: str, schema_id: int, records: int, size: int) -> bytes:
    prefix = b"\x00" + schema_id.to_bytes(4, "big")
    now = int(time.time() * 1000)
    values = [prefix + f"{i:08d}".encode().ljust(size - len(prefix), b"x") for i in range(records)]
    return encode_batch(
        [NewRecord(None, v, timestamp=now) for v in values],
        now_ms=now,
        compression=compression.codec_id(codec),
    )


def produce(args: argparse.Namespace) -> None:
    broker, url = start_broker()
    assert broker.process is not None
    topics = {"unvalidated": "plain", "validated": "checked"}
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        schema_id = register(url, "checked-value", schema(0))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        futures = admin.create_topics(
            [
                NewTopic("plain", args.partitions, 1),
                NewTopic(
                    "checked",
                    args.partitions,
                    1,
                    config={"confluent.value.schema.validation": "true"},
                ),
            ]
        )
        for future in futures.values():
            future.result(TIMEOUT_S)
        for round_ in range(args.rounds):
            for codec in args.codecs.split(","):
                batch = wire_batch(codec, schema_id, args.batch_records, args.record_size)
                order = list(topics) if round_ % 2 == 0 else list(reversed(topics))
                for kind in order:
                    cpu_before = cpu_seconds(broker.process.pid) or 0.0
                    result = raw_load(
                        broker.bootstrap,
                        topics[kind],
                        record_size=args.record_size,
                        batch_records=args.batch_records,
                        connections=args.connections,
                        window=args.window,
                        duration_s=args.duration,
                        batch=batch,
                    )
                    cpu = (cpu_seconds(broker.process.pid) or 0.0) - cpu_before
                    if result.errors:
                        raise RuntimeError(f"{codec} {kind}: {result.first_error}")
                    per_s, per_cpu = result.records / result.seconds, result.records / cpu
                    results.setdefault((codec, kind), []).append((per_s, per_cpu))
                    print(
                        f"round {round_ + 1} {codec:>6} {kind:>11}: {per_s:>10,.0f} records/s "
                        f"{per_cpu:>10,.0f} records/broker-CPU-s",
                        flush=True,
                    )
    finally:
        stop_broker(broker)
    print()
    print(
        f"{args.batch_records} records of {args.record_size} B a batch, "
        f"{args.connections} connections x {args.window} in flight, {args.duration:.0f} s a run"
    )
    print(f"{'codec':>7} {'topic':>11} {'records/s':>24} {'records/broker-CPU-s':>26}")
    for (codec, kind), runs in results.items():
        rates = [r for r, _ in runs]
        per_cpu = [c for _, c in runs]
        print(
            f"{codec:>7} {kind:>11} {statistics.median(rates):>10,.0f} "
            f"({min(rates):,.0f}-{max(rates):,.0f}) {statistics.median(per_cpu):>10,.0f} "
            f"({min(per_cpu):,.0f}-{max(per_cpu):,.0f})"
        )


# -- micro -------------------------------------------------------------------------------------


def micro(args: argparse.Namespace) -> None:
    n = args.batch_records
    now = int(time.time() * 1000)
    # Id 1 registered under the subject the topic's TopicNameStrategy gives (bench-value).
    known = {1: SchemaIdUse(frozenset({"bench-value"}), SchemaContent("AVRO", '"double"'))}
    plain, checked = LogConfig(), LogConfig(value_schema_validation=True)
    print(f"{n} records of {args.record_size} B a batch; ns per record (best of {args.repeats})")
    print(f"{'codec':>7} {'unvalidated':>12} {'validated':>10} {'extra':>8}")
    for codec in args.codecs.split(","):
        view = memoryview(bytearray(wire_batch(codec, 1, n, args.record_size)))
        per_call = max(1, 20_000 // n)
        figures = []
        for config in (plain, checked):
            best = float("inf")
            for _ in range(args.repeats):
                started = time.process_time()
                for _ in range(per_call):
                    validate_for_leader(view, config, now, "bench-0", known)
                best = min(best, (time.process_time() - started) / per_call)
            figures.append(best * 1e9 / n)
        print(
            f"{codec:>7} {figures[0]:>12.0f} {figures[1]:>10.0f} {figures[1] - figures[0]:>8.0f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["lookups", "registration", "produce", "micro"])
    parser.add_argument("--schemas", type=int, default=100, help="lookups: schemas registered")
    parser.add_argument("--seconds", type=float, default=5.0, help="lookups: seconds a run")
    parser.add_argument("--threads", type=int, default=4, help="lookups: threads of GETs")
    parser.add_argument("--count", type=int, default=150, help="registration: schemas")
    parser.add_argument("--codecs", default="none,zstd", help="produce, micro")
    parser.add_argument("--rounds", type=int, default=3, help="produce: runs per topic")
    parser.add_argument("--duration", type=float, default=5.0, help="produce: seconds a run")
    parser.add_argument("--partitions", type=int, default=4, help="produce: of each topic")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument(
        "--repeats", type=int, default=15, help="micro: timings to take the best of"
    )
    args = parser.parse_args()
    {"lookups": lookups, "registration": registration, "produce": produce, "micro": micro}[
        args.what
    ](args)


if __name__ == "__main__":
    main()
