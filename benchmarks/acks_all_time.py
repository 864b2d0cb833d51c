"""Where an acks=all Produce spends its time: the request metrics of a three-broker cluster.

Three ``odradek serve`` brokers over one ZooKeeper (:class:`odradek.testing.RunningCluster`),
each with ``metrics.listener`` set. Per record size, librdkafka produces to a fresh topic of
``--partitions`` partitions (``produce_batch``, linger.ms=5, as ``odradek bench``'s
cluster-produce) for ``--duration`` seconds, once with RF=1 acks=1 and once with RF=3 acks=all
(min.insync.replicas=2). Each broker's ``/metrics`` is read before and after the run, and the
difference of its request histograms (Kafka's RequestMetrics split: queue, local, remote,
send, total) summed over the brokers gives the mean of each part per request:

- **Produce**: queue (waiting behind the earlier requests of its connection), local (decode,
  validate, append), remote (the wait for the followers: acks=all), send (handing the response
  to the socket);
- **Fetch**: the followers' fetches (``FetchFollower``): remote is the long-poll wait for an
  append, local the read, send the handing over of the records.

With it, the run's records/s, records per Produce request, follower fetches per second and the
brokers' CPU (user + system of the three processes over the run, in cores). Numbers are printed,
never asserted; metrics on costs a few percent of the produce ceiling
(``benchmarks/metrics_cost.py``).

    python benchmarks/acks_all_time.py [--sizes 100,1024] [--duration 10] [--partitions 6]
        [--rf1 | --no-rf1] [-o KEY=VALUE ...]   (broker settings, e.g. replica.fetch.max.bytes)
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from odradek.bench.cluster import topic_config
from odradek.bench.scenarios import cpu_seconds, settle_page_cache
from odradek.bench.wire import topic_state
from odradek.bench.workers import ProduceResult, produce_worker, run_workers
from odradek.testing import RunningCluster, wait_until

PARTS = ("queue", "local", "remote", "send", "total")
_FAMILY = {
    "queue": "requestqueuetime",
    "local": "localtime",
    "remote": "remotetime",
    "send": "responsesendtime",
    "total": "totaltime",
}
REQUESTS = ("Produce", "FetchFollower")
PREFIX = "kafka_network_requestmetrics_"


@dataclass
class Times:
    """Sums (seconds) and counts of one request type's time parts, over the brokers."""

    count: float
    sums: dict[str, float]

    def minus(self, other: Times) -> Times:
        return Times(
            self.count - other.count, {k: v - other.sums.get(k, 0.0) for k, v in self.sums.items()}
        )

    def mean_ms(self, part: str) -> float:
        return 1000 * self.sums[part] / self.count if self.count else float("nan")


def scrape(address: str) -> dict[str, Times]:
    """One broker's request times per request type (cumulative since it started)."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as response:
        text = response.read().decode()
    found = {name: Times(0.0, dict.fromkeys(PARTS, 0.0)) for name in REQUESTS}
    for family in text_string_to_metric_families(text):
        for part, stem in _FAMILY.items():
            if family.name != f"{PREFIX}{stem}_seconds":
                continue
            for sample in family.samples:
                request = sample.labels.get("request")
                if request not in found:
                    continue
                if sample.name.endswith("_sum"):
                    found[request].sums[part] += sample.value
                elif sample.name.endswith("_count") and part == "total":
                    found[request].count += sample.value
    return found


def scrape_all(addresses: list[str]) -> dict[str, Times]:
    total = {name: Times(0.0, dict.fromkeys(PARTS, 0.0)) for name in REQUESTS}
    for address in addresses:
        for name, times in scrape(address).items():
            total[name].count += times.count
            for part in PARTS:
                total[name].sums[part] += times.sums[part]
    return total


def metrics_address(output: list[str]) -> str:
    for line in output:
        found = re.search(r"metrics on https?://(\S+)/metrics", line)
        if found:
            return found.group(1)
    raise RuntimeError("the broker did not say where it serves /metrics")


@contextlib.contextmanager
def cluster(settings: dict[str, str]) -> Iterator[tuple[RunningCluster, list[str]]]:
    directory = Path(tempfile.mkdtemp(prefix="acks-all-time-"))
    running = RunningCluster(directory, 3, settings={**settings, "metrics.listener": "127.0.0.1:0"})
    try:
        running.start()
        addresses = [
            wait_until(lambda b=b: _maybe_address(b.output), 30, 0.1, "a metrics address")
            for b in running.brokers.values()
        ]
        yield running, addresses
    finally:
        running.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _maybe_address(output: list[str]) -> str | None:
    with contextlib.suppress(RuntimeError):
        return metrics_address(output)
    return None


def new_topic(running: RunningCluster, name: str, partitions: int, replicas: int) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    topic = NewTopic(name, partitions, replicas, config=topic_config(replicas))
    admin.create_topics([topic])[name].result(60)

    def ready() -> bool:
        state = topic_state(running.brokers[1].bootstrap, name)
        return (
            state is not None
            and len(state.partitions) == partitions
            and all(p.leader >= 0 and len(p.isr) == replicas for p in state.partitions.values())
        )

    wait_until(ready, 60, 0.1, f"{name}: every partition led and in sync")


def run_one(
    running: RunningCluster,
    addresses: list[str],
    size: int,
    replicas: int,
    args: argparse.Namespace,
) -> None:
    acks = -1 if replicas > 1 else 1
    topic = f"acks-{replicas}-{size}-{int(time.time() * 1000)}"
    new_topic(running, topic, args.partitions, replicas)
    # Let the fresh leaders take their partitions on before the clock starts.
    time.sleep(1)
    settle_page_cache()
    pids = [b.process.pid for b in running.brokers.values() if b.process is not None]
    before = scrape_all(addresses)
    cpu_before = sum(cpu_seconds(pid) or 0.0 for pid in pids)
    (result,) = run_workers(
        [
            (
                produce_worker,
                {
                    "bootstrap": running.bootstrap,
                    "topic": topic,
                    "records": args.records,
                    "record_size": size,
                    "duration_s": args.duration,
                    "acks": acks,
                    "api": "batch",
                },
            )
        ],
        args.duration + 120,
    )
    assert isinstance(result, ProduceResult)
    cpu = sum(cpu_seconds(pid) or 0.0 for pid in pids) - cpu_before
    after = scrape_all(addresses)
    produce = after["Produce"].minus(before["Produce"])
    fetch = after["FetchFollower"].minus(before["FetchFollower"])
    seconds = result.seconds
    config = f"RF={replicas} acks={'all' if acks == -1 else 1}"
    print(
        f"{size:>5} B {config:<13} {result.sent / seconds:>10,.0f} rec/s  "
        f"{result.sent / max(produce.count, 1):>7,.0f} rec/Produce  "
        f"{fetch.count / seconds:>7,.0f} follower fetches/s  brokers {cpu / seconds:.2f} cores"
    )
    for name, times in (("Produce", produce), ("Fetch", fetch)):
        if not times.count:
            continue
        parts = "  ".join(f"{part} {times.mean_ms(part):7.2f}" for part in PARTS)
        print(f"{'':8}{name:<8} ms/request: {parts}   ({times.count:,.0f} requests)")
    if result.first_error:
        print(f"{'':8}first error: {result.first_error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1024", help="record sizes (bytes)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--records", type=int, default=3_000_000, help="at most, per run")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument(
        "--rf1", action=argparse.BooleanOptionalAction, default=True, help="the RF=1 runs too"
    )
    parser.add_argument(
        "-o", dest="settings", action="append", default=[], help="a broker setting KEY=VALUE"
    )
    args = parser.parse_args()
    settings = dict(o.split("=", 1) for o in args.settings)
    with cluster(settings) as (running, addresses):
        for size in (int(s) for s in args.sizes.split(",")):
            for replicas in (1, 3) if args.rf1 else (3,):
                run_one(running, addresses, size, replicas, args)


if __name__ == "__main__":
    main()
