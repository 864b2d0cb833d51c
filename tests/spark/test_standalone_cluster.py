"""Spark beyond one process: the click-stream example (examples/clickstream) on a Spark
standalone cluster — a master and two workers started from the installed PySpark's
``spark-class``, executors in JVMs of their own with their own Python workers — reading from and
writing to a three-broker odradek cluster on ZooKeeper; its counts are checked against the
clicks sent, in the topic and in Parquet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningCluster, free_port, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "clickstream"
START_MS = 1_714_564_800_000  # a minute boundary, as run_embedded.py


@pytest.fixture(scope="module")
def spark_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The master's URL and the directory of the workers' work dirs."""
    home = Path(pyspark.__file__).parent
    directory = tmp_path_factory.mktemp("spark-standalone")
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    port, ui = free_port(), free_port()
    spark_class = str(home / "bin" / "spark-class")
    processes = []
    logs = []

    def start(name: str, *args: str) -> None:
        log = (directory / f"{name}.log").open("w")
        logs.append(log)
        processes.append(
            subprocess.Popen([spark_class, *args], stdout=log, stderr=subprocess.STDOUT, env=env)
        )

    start(
        "master", "org.apache.spark.deploy.master.Master",
        "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui),
    )  # fmt: skip
    for i in range(2):
        start(
            f"worker-{i}", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
            "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
            "--webui-port", str(free_port()), "--work-dir", str(directory / f"work-{i}"),
        )  # fmt: skip

    def alive_workers() -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as answer:
                state = json.load(answer)
        except (OSError, ValueError):  # not listening yet, or a page that is not JSON yet
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    try:
        wait_until(lambda: alive_workers() == 2, timeout_s=90, what="two Spark workers")
        yield f"spark://127.0.0.1:{port}", directory
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.partition.eof": True}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values, at_end = [], set()
        while len(at_end) < partitions:
            message = consumer.poll(10)
            assert message is not None, "the topic was not read to its end"
            if message.error():
                at_end.add(message.partition())
                continue
            values.append(message.value())
        return values
    finally:
        consumer.close()


def test_clickstream_on_a_standalone_cluster_and_three_brokers(
    spark_master: tuple[str, Path], odradek_cluster: RunningCluster, tmp_path: Path
) -> None:
    master, spark_dir = spark_master
    sys.path.insert(0, str(EXAMPLE))
    try:
        import producer  # examples/clickstream/producer.py
        from run_embedded import expected_counts
    finally:
        sys.path.remove(str(EXAMPLE))
    bootstrap = odradek_cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in ("clicks", "pageviews"):
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    sent = producer.random_clicks(600, START_MS, seconds=300)
    closing = producer.Click("u000", "/", START_MS + 8 * 60_000)  # moves the watermark on
    producer.send(bootstrap, [*sent, closing])

    out = tmp_path / "out"
    driver = subprocess.run(
        [
            sys.executable, str(EXAMPLE / "pageviews.py"), "--bootstrap", bootstrap,
            "--out", str(out), "--available-now", "--master", master,
        ],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    assert driver.returncode == 0, driver.stderr[-5000:]

    expected = expected_counts(sent)
    from_topic: Counter[tuple[str, str]] = Counter()
    for value in read_topic(bootstrap, "pageviews", 3):
        item = json.loads(value)
        from_topic[(item["minute"], item["page"])] += item["views"]
    assert from_topic == expected
    table = pq.read_table(out / "parquet").to_pylist()
    from_parquet = Counter(
        {(row["minute"].strftime("%Y-%m-%dT%H:%MZ"), row["page"]): row["views"] for row in table}
    )
    assert from_parquet == expected
    # The work ran in executors the workers started, not in the driver.
    executors = [d for i in range(2) for d in (spark_dir / f"work-{i}").glob("app-*/*")]
    assert len(executors) >= 2, "the executors did not run on both standalone workers"
