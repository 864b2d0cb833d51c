"""What reading every record of a produced batch costs (the leader's validation, as Kafka's
LogValidator does it), per codec.

``micro``: one batch of ``--batch-records`` records of ``--record-size`` bytes (text-like values,
which compress about 3x), validated again and again in this process: the whole leader check
(:func:`odradek.storage.validator.validate_for_leader`) against what the leader did before it
read records (headers and CRC: :func:`odradek.protocol.record_batch.validate_batches`), and its
two parts alone, bounded decompression and the framing scan. The best of ``--repeats`` timings of
CPU time (this machine is shared: the least disturbed one is the cost), in ns per record.

``ceiling``: the produce ceiling per codec, before and after: the raw pipelined Produce load
(``odradek bench``'s ``raw`` scenario, :func:`odradek.bench.wire.raw_load`, sending the same
prebuilt batch) against a fresh broker process running this checkout's ``src`` ("after") and the
``src`` of a checkout without record validation ("before": ``--before-src DIR``, or
``--before-commit REV`` extracted with ``git archive``), alternating before and after in every
round, as the machine's load drifts (``--interpreted`` adds "after" with the scan forced to run as
Python, where it is compiled). Each run reports records/s and records per second of broker
CPU (user + system time of the broker process), the second less sensitive to other processes
taking the cores; then the median per codec and configuration.

``stall``: how long the broker's other clients wait while it validates a big compressed
produce. Per codec, a batch of ``--stall-records`` records without key or value (the most
records its bytes can hold: 1 M of them take 0.8 MB in zstd, 9 MB decompressed) is produced
``--rounds`` times to a topic whose ``max.message.bytes`` takes it,  to a broker on a thread of the
benchmark's process, whose event loop runs a task that sleeps 1 ms again and again: how late it
wakes at worst during each produce is the loop's stall, what every other connection waits. Each
configuration ("before", "after", as for ``ceiling``) runs in a process of its own.

    python benchmarks/validation.py micro
    python benchmarks/validation.py ceiling --before-commit b8fc6f2 --rounds 3 --duration 5
    python benchmarks/validation.py stall --before-src /tmp/before/src --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.bench.scenarios import cpu_seconds
from odradek.bench.wire import raw_load
from odradek.client.blocking import BlockingConnection
from odradek.protocol import compression
from odradek.protocol.record_batch import HEADER_SIZE, read_header, validate_batches
from odradek.protocol.records import (
    SCANNER_COMPILED,
    NewRecord,
    batch_around,
    check_records,
    encode_batch,
    zigzag_varint,
)
from odradek.storage.log import LogConfig
from odradek.storage.validator import decompressed_limit, validate_for_leader
from odradek.testing import BrokerProcess, running_broker

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
WORDS = [
    "order", "customer", "shipped", "pending", "amount", "currency", "EUR", "USD", "status",
    "warehouse", "item", "quantity", "price", "created", "updated", "region", "north", "south",
]  # fmt: skip


def text_batch(codec: str, records: int, size: int, seed: int = 7) -> bytes:
    """A batch of ``records`` values of ``size`` bytes of JSON-ish text (about 3x compressible)."""
    rng = random.Random(seed)
    values = []
    for i in range(records):
        words = " ".join(f'"{rng.choice(WORDS)}":{rng.randrange(10**6)}' for _ in range(size))
        values.append(f"{{{i} {words}".encode()[:size])
    now = int(time.time() * 1000)
    return encode_batch(
        [NewRecord(None, v, timestamp=now + i // 10) for i, v in enumerate(values)],
        now_ms=now,
        compression=compression.codec_id(codec),
    )


# -- micro -------------------------------------------------------------------------------------


def best_of(repeats: int, work: Callable[[], object], per_call: int) -> float:
    """The least CPU seconds one call of ``work`` took, over ``repeats`` timings of
    ``per_call`` calls (CPU time, not wall time: on a shared machine the wait for a core is not
    the code's)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        for _ in range(per_call):
            work()
        best = min(best, (time.process_time() - started) / per_call)
    return best


def micro(args: argparse.Namespace) -> None:
    n = args.batch_records
    config = LogConfig()
    limit = decompressed_limit(config)
    now = int(time.time() * 1000)
    print(
        f"{n} records of {args.record_size} B a batch; ns per record (best of {args.repeats}); "
        "before = headers and CRC only; the scan "
        + (
            "compiled (mypyc)"
            if SCANNER_COMPILED
            else "interpreted (record_scan not built, or ODRADEK_PURE_PYTHON=1)"
        )
    )
    print(
        f"{'codec':>7} {'bytes':>8} {'before':>8} {'after':>8} {'x':>6} {'inflate':>8} {'scan':>8}"
    )
    for codec in CODECS:
        data = bytearray(text_batch(codec, n, args.record_size))
        view = memoryview(data)
        header = read_header(data)
        payload = view[HEADER_SIZE:]

        def before(view: memoryview = view) -> object:
            return validate_batches(view, config.max_message_bytes)

        def after(view: memoryview = view) -> object:
            return validate_for_leader(view, config, now, "bench-0")

        def inflate(payload: memoryview = payload, codec_id: int = header.compression) -> object:
            if codec_id == compression.NONE:
                return bytes(payload)
            return compression.decompress_bounded(codec_id, payload, limit)

        if header.compression == compression.NONE:
            section = bytes(payload)
        else:
            inflated, size = compression.decompress_bounded(header.compression, payload, limit)
            section = bytes(inflated[:size])

        def scan(section: bytes = section) -> object:
            return check_records(section, 0, len(section), n)

        per_call = max(1, 20_000 // n)
        times = {
            name: best_of(args.repeats, work, per_call) * 1e9 / n
            for name, work in (
                ("before", before),
                ("after", after),
                ("inflate", inflate),
                ("scan", scan),
            )
        }
        print(
            f"{codec:>7} {len(data):>8} {times['before']:>8.0f} {times['after']:>8.0f} "
            f"{times['after'] / times['before']:>6.1f} {times['inflate']:>8.0f} "
            f"{times['scan']:>8.0f}",
            flush=True,
        )


# -- ceiling -----------------------------------------------------------------------------------


@dataclass
class Run:
    codec: str
    config: str
    records_per_s: float
    records_per_cpu_s: float


def start_broker(src: Path, pure_python: bool = False) -> BrokerProcess:
    """A broker process running the code in ``src`` (the per-record scan in pure Python when
    asked)."""
    env = {"PYTHONPATH": str(src)}
    if pure_python:
        env["ODRADEK_PURE_PYTHON"] = "1"
    directory = Path(tempfile.mkdtemp(prefix="validation-bench-"))
    return BrokerProcess(directory, env=env).start()


def stop_broker(broker: BrokerProcess) -> None:
    broker.terminate(30)
    shutil.rmtree(broker.data_dir, ignore_errors=True)


def measure(codec: str, config: str, src: Path, batch: bytes, args: argparse.Namespace) -> Run:
    broker = start_broker(src, pure_python=config == "after-py")
    assert broker.process is not None
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        topic = "raw"
        admin.create_topics([NewTopic(topic, args.connections, 1)])[topic].result(30)
        time.sleep(1)  # the topic's partitions open
        os.sync()
        cpu_before = cpu_seconds(broker.process.pid) or 0.0
        result = raw_load(
            broker.bootstrap,
            topic,
            record_size=args.record_size,
            batch_records=args.batch_records,
            connections=args.connections,
            window=args.window,
            duration_s=args.duration,
            batch=batch,
        )
        cpu = (cpu_seconds(broker.process.pid) or 0.0) - cpu_before
        if result.errors:
            raise RuntimeError(f"{codec} {config}: {result.first_error}")
        return Run(codec, config, result.records / result.seconds, result.records / cpu)
    finally:
        stop_broker(broker)


def before_src(args: argparse.Namespace) -> tuple[Path, Path | None]:
    """The "before" ``src`` and a temporary directory to remove afterwards, if one was made."""
    if args.before_src is not None:
        return args.before_src, None
    if args.before_commit is None:
        raise SystemExit("ceiling needs --before-src DIR or --before-commit REV")
    directory = Path(tempfile.mkdtemp(prefix="validation-before-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", args.before_commit, "src"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive, check=True)
    return directory / "src", directory


def ceiling(args: argparse.Namespace) -> None:
    before, made = before_src(args)
    configs = {"before": before, "after": SRC}
    if args.interpreted:
        configs["after-py"] = SRC
    runs: list[Run] = []
    try:
        for round_ in range(args.rounds):
            for codec in args.codecs.split(","):
                batch = text_batch(codec, args.batch_records, args.record_size)
                names = list(configs)
                names = names[round_ % len(names) :] + names[: round_ % len(names)]
                for name in names:
                    run = measure(codec, name, configs[name], batch, args)
                    runs.append(run)
                    print(
                        f"round {round_ + 1} {codec:>6} {name:>6}: "
                        f"{run.records_per_s:>10,.0f} records/s "
                        f"{run.records_per_cpu_s:>10,.0f} records/broker-CPU-s",
                        flush=True,
                    )
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
    print()
    print(f"{'codec':>7} {'config':>7} {'records/s':>22} {'records/broker-CPU-s':>24}")
    for codec in args.codecs.split(","):
        for name in configs:
            mine = [r for r in runs if r.codec == codec and r.config == name]
            rates = [r.records_per_s for r in mine]
            per_cpu = [r.records_per_cpu_s for r in mine]
            print(
                f"{codec:>7} {name:>7} {statistics.median(rates):>10,.0f} "
                f"({min(rates):,.0f}-{max(rates):,.0f}) {statistics.median(per_cpu):>10,.0f} "
                f"({min(per_cpu):,.0f}-{max(per_cpu):,.0f})"
            )


# -- stall -------------------------------------------------------------------------------------

_API_VERSIONS = {"client_software_name": "bench", "client_software_version": "1"}


def empty_records_batch(codec: str, count: int) -> bytes:
    """One batch of ``count`` records without key, value or headers, packed with ``codec``."""
    section = b"".join(
        zigzag_varint(5 + len(delta)) + b"\x00\x00" + delta + b"\x01\x00\x00"
        for delta in map(zigzag_varint, range(count))
    )
    now = int(time.time() * 1000)
    return batch_around(section, count, now, now, compression=compression.codec_id(codec))


@dataclass
class LoopLag:
    """The broker loop's lateness, as a task that sleeps 1 ms again and again sees it: each
    sleep's start and wake-up, in wall time and in the loop thread's CPU time (the work the loop
    did meanwhile without giving way, which the machine's load does not lengthen)."""

    stopped: bool = False
    ticks: list[tuple[float, float, float]] = field(default_factory=list)

    async def watch(self) -> None:
        while not self.stopped:
            started, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            self.ticks.append((started, time.perf_counter(), time.thread_time() - cpu))

    async def start(self) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self.watch())

    def worst(self, since: float, until: float) -> tuple[float, float]:
        """The worst wall lateness and loop CPU time (ms) of the sleeps that overlapped
        ``since`` to ``until``, once one that began after ``until`` has woken (the one that
        waited is among them)."""
        while not self.ticks or self.ticks[-1][0] <= until:
            time.sleep(0.001)
        overlapping = [t for t in self.ticks if t[1] > since and t[0] < until]
        wall = max(end - start - 0.001 for start, end, _ in overlapping)
        return wall * 1000, max(cpu for *_, cpu in overlapping) * 1000


def stall_one(args: argparse.Namespace) -> None:
    """In a process of its own (so that "before" and "after" each import their own code): a
    broker on a thread, the produces from this one; prints the loop's worst lag (ms) during each
    produce, as JSON."""
    batch = empty_records_batch(args.codec, args.stall_records)
    with running_broker() as broker:
        topic = "stall"
        with BlockingConnection.open(broker.bootstrap, negotiate=False, timeout_s=120) as producer:
            create = {
                "timeout_ms": 30_000,
                "validate_only": False,
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": "max.message.bytes", "value": str(64 << 20)}],
                    }
                ],
            }
            producer.receive(producer.send(19, create, version=5, raw=True))
            lag = LoopLag()
            broker.call(lag.start())
            # The floor: the worst lag of an idle second (the machine's own hiccups).
            since = time.perf_counter()
            time.sleep(1)
            idle = lag.worst(since, time.perf_counter())
            fields = {
                "acks": 1,
                "timeout": 60_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            }
            stalls = []
            for _ in range(args.rounds):
                time.sleep(0.3)  # the appends of the produce before are behind
                sent = time.perf_counter()
                producer.receive(producer.send(0, fields, version=9, raw=True))
                stalls.append(lag.worst(sent, time.perf_counter()))
            lag.stopped = True
    print(json.dumps([idle, *stalls]))


def stall(args: argparse.Namespace) -> None:
    before, made = before_src(args)
    configs = {"before": before, "after": SRC}
    print(
        f"a batch of {args.stall_records:,} empty records a produce, {args.rounds} produces; "
        "the broker loop's worst lag during each (ms): wall (the machine's load adds to it; "
        "idle: the worst in an idle second) and the loop thread's CPU time without giving way"
    )
    print(
        f"{'codec':>7} {'bytes':>9} {'config':>7} {'idle':>6} {'wall':>7} {'max':>7} "
        f"{'cpu':>7} {'max':>7}  each (wall/cpu)"
    )
    try:
        for codec in args.codecs.split(","):
            size = len(empty_records_batch(codec, args.stall_records))
            for name, src in configs.items():
                command = [sys.executable, __file__, "stall-one", "--codec", codec]
                command += ["--rounds", str(args.rounds)]
                command += ["--stall-records", str(args.stall_records)]
                out = subprocess.run(
                    command,
                    env={**os.environ, "PYTHONPATH": str(src)},
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                (idle, _), *stalls = json.loads(out.strip().splitlines()[-1])
                walls = [wall for wall, _ in stalls]
                cpus = [cpu for _, cpu in stalls]
                print(
                    f"{codec:>7} {size:>9,} {name:>7} {idle:>6.1f} "
                    f"{statistics.median(walls):>7.1f} {max(walls):>7.1f} "
                    f"{statistics.median(cpus):>7.1f} {max(cpus):>7.1f}  "
                    + " ".join(f"{wall:.0f}/{cpu:.0f}" for wall, cpu in stalls),
                    flush=True,
                )
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["micro", "ceiling", "stall", "stall-one"])
    parser.add_argument("--codec", default="zstd", help="stall-one: the big batch's codec")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument(
        "--repeats", type=int, default=15, help="micro: timings to take the best of"
    )
    parser.add_argument("--codecs", default=",".join(CODECS), help="ceiling: codecs to load with")
    parser.add_argument("--rounds", type=int, default=3, help="ceiling: before/after pairs")
    parser.add_argument("--duration", type=float, default=5.0, help="ceiling: seconds a run")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument(
        "--stall-records", type=int, default=1_000_000, help="stall: records of the big batch"
    )
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--before-src", type=Path, help="ceiling: src without record validation")
    parser.add_argument("--before-commit", help="ceiling: a commit whose src is 'before'")
    parser.add_argument(
        "--interpreted",
        action="store_true",
        help="ceiling: a third configuration, 'after-py', with the scan forced to Python "
        "(ODRADEK_PURE_PYTHON=1), where record_scan is compiled",
    )
    args = parser.parse_args()
    if args.what == "micro":
        micro(args)
    elif args.what == "stall":
        stall(args)
    elif args.what == "stall-one":
        stall_one(args)
    else:
        ceiling(args)


if __name__ == "__main__":
    main()
