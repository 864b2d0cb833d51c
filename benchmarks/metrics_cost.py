"""What metrics cost the produce ceiling: the raw pipelined Produce load (``odradek bench``'s
``raw`` scenario, :func:`odradek.bench.wire.raw_load`) against a fresh broker process with
``metrics.listener`` unset (off) and set (on, ``/metrics`` scraped every ``--scrape-every``
seconds meanwhile), run after run in alternating order, since the machine's load drifts.

Optionally a third broker, ``--baseline-src DIR``, runs the code in DIR with metrics off: the
``src`` of a checkout from before the hooks, or this checkout's own ``src`` as an A/A control
(two identical configurations differ by this machine's noise, which a gap between off and on
must exceed to mean anything); with ``--baseline-metrics`` the baseline runs with metrics on,
which compares two versions of the hooks. Each run reports records/s and records per second of
broker CPU (the broker process's user + system time over the run), the second less sensitive to
other processes taking the cores. Prints each run, then the median and range per configuration.

    python benchmarks/metrics_cost.py --rounds 7 --duration 10
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.bench.scenarios import cpu_seconds
from odradek.bench.wire import raw_load
from odradek.testing import BrokerProcess

SRC = Path(__file__).resolve().parent.parent / "src"


@dataclass
class Run:
    config: str
    records_per_s: float
    records_per_cpu_s: float
    scrapes: int


def start_broker(src: Path, metrics: bool) -> tuple[BrokerProcess, str | None]:
    """A broker process running the code in ``src``, and its metrics address when it serves
    ``/metrics``."""
    args = ("-o", "metrics.listener=127.0.0.1:0") if metrics else ()
    directory = Path(tempfile.mkdtemp(prefix="metrics-cost-"))
    broker = BrokerProcess(directory, *args, env={"PYTHONPATH": str(src)}).start()
    found = [re.search(r"metrics on http://(\S+)/metrics", line) for line in broker.output]
    return broker, next((m.group(1) for m in found if m), None)


def _scrape(address: str, every_s: float, stop: threading.Event, count: list[int]) -> None:
    while not stop.wait(every_s):
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
            response.read()
        count[0] += 1


def measure(config: str, src: Path, args: argparse.Namespace) -> Run:
    metrics = config == "on" or (config == "baseline" and args.baseline_metrics)
    broker, metrics_address = start_broker(src, metrics=metrics)
    assert broker.process is not None
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = "raw"
        admin.create_topics([NewTopic(topic, args.connections, 1)])[topic].result(30)
        time.sleep(1)  # the topic's partitions open
        os.sync()
        stop = threading.Event()
        scrapes = [0]
        scraper = None
        if metrics_address is not None:
            scraper = threading.Thread(
                target=_scrape, args=(metrics_address, args.scrape_every, stop, scrapes)
            )
            scraper.start()
        cpu_before = cpu_seconds(broker.process.pid) or 0.0
        result = raw_load(
            broker.bootstrap,
            topic,
            record_size=args.record_size,
            batch_records=args.batch_records,
            connections=args.connections,
            window=args.window,
            duration_s=args.duration,
        )
        cpu = (cpu_seconds(broker.process.pid) or 0.0) - cpu_before
        stop.set()
        if scraper is not None:
            scraper.join()
        if result.errors:
            raise RuntimeError(result.first_error)
        return Run(config, result.records / result.seconds, result.records / cpu, scrapes[0])
    finally:
        broker.terminate(30)
        shutil.rmtree(broker.data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--scrape-every", type=float, default=1.0)
    parser.add_argument("--baseline-src", type=Path)
    parser.add_argument(
        "--baseline-metrics",
        action="store_true",
        help="run the baseline with metrics on too: the cost of a change to the hooks",
    )
    args = parser.parse_args()
    configs = {"off": SRC, "on": SRC}
    if args.baseline_src is not None:
        configs["baseline"] = args.baseline_src
    names = list(configs)
    runs: list[Run] = []
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        for name in order:
            run = measure(name, configs[name], args)
            runs.append(run)
            print(
                f"round {round_ + 1} {name:>6}: {run.records_per_s:>10,.0f} records/s "
                f"{run.records_per_cpu_s:>10,.0f} records/broker-CPU-s  scrapes {run.scrapes}",
                flush=True,
            )
    print()
    for name in names:
        mine = [r for r in runs if r.config == name]
        rates = [r.records_per_s for r in mine]
        per_cpu = [r.records_per_cpu_s for r in mine]
        print(
            f"{name:>6}: records/s median {statistics.median(rates):,.0f} "
            f"(range {min(rates):,.0f}-{max(rates):,.0f}); per broker CPU-s median "
            f"{statistics.median(per_cpu):,.0f} (range {min(per_cpu):,.0f}-{max(per_cpu):,.0f})"
        )


if __name__ == "__main__":
    main()
