"""LinkedIn's Burrow 1.2.1 (Debian's ``burrow`` package) monitoring a real odradek broker.

Burrow reads the committed offsets of every group from ``__consumer_offsets`` itself (a sarama
partition consumer from the oldest offset, decoding Kafka's offset commit records), asks each
partition's end offset with ListOffsets v0 every ``offset-refresh`` seconds, and keeps ZooKeeper
for its own use (a real one here, the suite's ``zookeeper`` fixture, under a root of this test).
Its ``kafka-version`` picks the request versions: 0.8.2 fetches ``__consumer_offsets`` with
Fetch v0 (message format v0), 0.10.0 with Fetch v2 (v1), 2.0.0 with Fetch v4 (RecordBatch v2).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from odradek.testing import ZooKeeperServer, free_port, wait_until

BURROW = shutil.which("Burrow")
pytestmark = pytest.mark.skipif(BURROW is None, reason="Burrow is not installed (setup.sh --test)")
CLUSTER = "odradek"
TIMEOUT_S = 60


class RunningBurrow:
    """Burrow as a child process with a config of its own; :meth:`get` asks its HTTP API."""

    def __init__(self, directory: Path, bootstrap: str, zookeeper: str, kafka_version: str):
        self.directory = directory
        self.port = free_port()
        (directory / "burrow.toml").write_text(
            f"""
[general]
pidfile="{directory}/burrow.pid"

[zookeeper]
servers=["{zookeeper}"]
timeout=6
root-path="/burrow-{uuid.uuid4().hex[:12]}"

[client-profile.test]
client-id="burrow-test"
kafka-version="{kafka_version}"

[cluster.{CLUSTER}]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="test"
topic-refresh=1
offset-refresh=1

[consumer.{CLUSTER}]
class-name="kafka"
cluster="{CLUSTER}"
servers=["{bootstrap}"]
client-profile="test"

# the lag endpoint answers from a cache: keep it short, so a new commit shows soon
[evaluator.default]
class-name="caching"
expire-cache=1

[httpserver.default]
address="127.0.0.1:{self.port}"

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
"""
        )
        self.log = directory / "burrow.out"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [str(BURROW), "-config-dir", str(directory)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=directory,
            )

    def get(self, path: str) -> dict[str, Any] | None:
        """The JSON answer of ``/v3/kafka/<cluster>/<path>``, or None while Burrow has none."""
        assert self.process.poll() is None, f"Burrow exited:\n{self.output()}"
        url = f"http://127.0.0.1:{self.port}/v3/kafka/{CLUSTER}/{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                body: dict[str, Any] = json.load(answer)
        except (urllib.error.URLError, ConnectionError):  # not listening yet, or 404 (no data)
            return None
        return None if body.get("error") else body

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        # Burrow logs its clean stop at once on SIGTERM, but its process lingers for seconds
        # more (its clients' timers); nothing of it is needed once it has stopped.
        self.process.terminate()
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def burrow_for(tmp_path: Path, bootstrap: str, zookeeper: ZooKeeperServer) -> Iterator[Any]:
    started: list[RunningBurrow] = []

    def start(kafka_version: str) -> RunningBurrow:
        started.append(RunningBurrow(tmp_path, bootstrap, zookeeper.connect, kafka_version))
        return started[-1]

    yield start
    for burrow in started:
        burrow.stop()


def commit(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
    finally:
        consumer.close()


def lag_by_partition(burrow: RunningBurrow, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition → (committed offset, current lag) as Burrow's lag endpoint reports them."""
    answer = burrow.get(f"consumer/{group}/lag")
    if answer is None:
        return {}
    return {
        p["partition"]: (p["end"]["offset"], p["current_lag"])
        for p in answer["status"]["partitions"]
        if p["topic"] == topic and p["end"] is not None
    }


@pytest.mark.parametrize("kafka_version", ["0.8.2", "0.10.0", "2.0.0"])
def test_burrow_reports_the_lag_of_a_group(
    bootstrap, make_topic, topic_name, burrow_for, kafka_version
):
    topic = make_topic(topic_name, partitions=3)
    group = f"{topic_name}-group"
    ends = {0: 10, 1: 15, 2: 20}
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for partition, end in ends.items():
        for i in range(end):
            producer.send(topic, value=b"value %d" % i, partition=partition)
    producer.flush(TIMEOUT_S)
    producer.close()
    committed = {0: 3, 1: 15, 2: 8}
    commit(bootstrap, group, {TopicPartition(topic, p): o for p, o in committed.items()})

    burrow = burrow_for(kafka_version)
    try:
        offsets = wait_until(
            lambda: burrow.get(f"topic/{topic}"), TIMEOUT_S, 0.2, "Burrow's end offsets"
        )
        assert offsets["offsets"] == [ends[p] for p in range(3)]
        want = {p: (committed[p], ends[p] - committed[p]) for p in ends}
        wait_until(lambda: lag_by_partition(burrow, group, topic) == want, TIMEOUT_S, 0.2, "lag")

        # a later commit is read from the tail of __consumer_offsets
        commit(bootstrap, group, {TopicPartition(topic, 0): 10})
        want[0] = (10, 0)
        wait_until(
            lambda: lag_by_partition(burrow, group, topic) == want, TIMEOUT_S, 0.2, "new lag"
        )
    except AssertionError as e:
        raise AssertionError(f"{e}\nBurrow's log:\n{burrow.output()}") from e
