"""What following costs a cluster with many partitions: three brokers, one topic of
``--partitions`` partitions at RF=3 (each broker leads a third and follows the rest), a paced
librdkafka producer writing ``--rate`` records/s with acks=all to partition 0 for ``--duration``
seconds while the other partitions stay idle.

Each follower fetches every partition it follows from a leader in each fetch; with incremental
fetch sessions (KIP-227) only what moved is named and answered. Prints, per run: the brokers'
CPU (user + system of the three processes, in cores, and each broker's), the follower fetches
per second the leaders served (their request metrics), and the producer's acks=all latency
p50/p99.

``--pythonpath DIR`` runs the brokers from another checkout's ``src`` (a commit before a change),
alternating with this one round by round, so that both are measured in the same conditions.
Numbers are printed, never asserted.

    python benchmarks/follower_fetch_cost.py [--partitions 900] [--rate 5000] [--duration 10]
        [--rounds 2] [--pythonpath /path/to/other/src]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from odradek.bench.cluster import topic_config
from odradek.bench.scenarios import cpu_seconds
from odradek.bench.wire import topic_state
from odradek.bench.workers import PacedProduceResult, paced_producer_worker, run_workers
from odradek.testing import RunningCluster, wait_until

_REQUESTS = "kafka_network_requestmetrics_requests_total"


def follower_fetches(address: str) -> float:
    """FetchFollower requests this broker has served (its metrics, since it started)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == _REQUESTS.removesuffix("_total"):
            return sum(
                s.value
                for s in family.samples
                if s.labels.get("request") == "FetchFollower" and s.name.endswith("_total")
            )
    return 0.0


def metrics_address(output: list[str]) -> str | None:
    for line in output:
        if "metrics on http://" in line:
            return line.split("metrics on http://", 1)[1].split("/metrics", 1)[0]
    return None


def one_run(partitions: int, rate: int, duration: float, pythonpath: str | None) -> str:
    directory = Path(tempfile.mkdtemp(prefix="follower-fetch-cost-"))
    saved = os.environ.get("PYTHONPATH")
    if pythonpath is not None:
        os.environ["PYTHONPATH"] = pythonpath
    running = RunningCluster(directory, 3, settings={"metrics.listener": "127.0.0.1:0"})
    try:
        running.start()
        addresses = [
            wait_until(lambda b=b: metrics_address(b.output), 30, 0.1, "a metrics address")
            for b in running.brokers.values()
        ]
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic("many", partitions, 3, config=topic_config(3))])[
            "many"
        ].result(120)

        def ready() -> bool:
            state = topic_state(running.brokers[1].bootstrap, "many")
            return (
                state is not None
                and len(state.partitions) == partitions
                and all(p.leader >= 0 and len(p.isr) == 3 for p in state.partitions.values())
            )

        wait_until(ready, 180, 0.5, "every partition led and in sync")
        time.sleep(2)  # the followers settle into their long polls
        pids = [b.process.pid for b in running.brokers.values() if b.process is not None]
        cpu_before = [cpu_seconds(pid) or 0.0 for pid in pids]
        fetches_before = sum(follower_fetches(a) for a in addresses)
        (result,) = run_workers(
            [
                (
                    paced_producer_worker,
                    {
                        "bootstrap": running.bootstrap,
                        "topic": "many",
                        "rate": rate,
                        "duration_s": duration,
                        "record_size": 100,
                        "acks": -1,
                    },
                )
            ],
            duration + 120,
        )
        assert isinstance(result, PacedProduceResult)
        seconds = result.seconds
        cpu = [
            ((cpu_seconds(pid) or 0.0) - before) / seconds
            for pid, before in zip(pids, cpu_before, strict=True)
        ]
        fetches = (sum(follower_fetches(a) for a in addresses) - fetches_before) / seconds
        latency = result.ack_latency
        p50 = f"{latency.p50:.1f}" if latency is not None else "-"
        p99 = f"{latency.p99:.1f}" if latency is not None else "-"
        each = "/".join(f"{c:.2f}" for c in cpu)
        return (
            f"{result.achieved_rate:>8,.0f} rec/s  brokers {sum(cpu):.2f} cores ({each})  "
            f"{fetches:>6,.0f} follower fetches/s  acks=all p50 {p50} ms p99 {p99} ms"
        )
    finally:
        running.stop()
        shutil.rmtree(directory, ignore_errors=True)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=900)
    parser.add_argument("--rate", type=int, default=5000, help="records/s to partition 0")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pythonpath", help="run the brokers from this src too, alternating")
    args = parser.parse_args()
    builds = [("this", None)] + ([("other", args.pythonpath)] if args.pythonpath else [])
    print(f"{args.partitions} partitions, RF=3, {args.rate:,} records/s to partition 0")
    for _ in range(args.rounds):
        for name, path in builds:
            line = one_run(args.partitions, args.rate, args.duration, path)
            print(f"{name:<6} {line}", flush=True)


if __name__ == "__main__":
    main()
