"""A Kafka Connect worker (connect-runtime 4.3, as in connect-pom.xml) in distributed mode
against one broker: its config, offset and status topics on odradek, a FileStreamSource (file →
topic) and a FileStreamSink (topic → file) created through its REST API, lines moving end to
end, and a worker restart (SIGTERM, started again) after which more lines move.

Connect is at-least-once for these connectors: after a crash a source re-sends what it read
since its last flushed offset and a sink re-writes what it got since its last committed offset.
A SIGTERM is a clean stop, in which the worker flushes the source's offsets and commits the
sink's, so here every line must arrive exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.testing import RunningBroker, free_port, wait_until

from .support import connect_classpath, java_command

WORKER = "org.apache.kafka.connect.cli.ConnectDistributed"
INTERNAL_TOPICS = {
    "config.storage.topic": "connect-configs",
    "offset.storage.topic": "connect-offsets",
    "status.storage.topic": "connect-status",
}


class Worker:
    """A ConnectDistributed process and its REST API."""

    def __init__(self, properties: Path, log: Path, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        with log.open("a") as out:
            self.process = subprocess.Popen(
                java_command(WORKER, str(properties), cp=connect_classpath()),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        wait_until(self._ready, timeout_s=60, interval_s=0.5, what="the Connect REST API")

    def _ready(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()[-5000:]
        try:
            self.rest("GET", "/connectors")
            return True
        except (OSError, urllib.error.HTTPError):  # not listening yet, or still joining
            return False

    def rest(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def running(self, connector: str) -> bool:
        try:
            status = self.rest("GET", f"/connectors/{connector}/status")
        except urllib.error.HTTPError:  # 404 until the connector's config is read back
            return False
        states = [status["connector"]["state"], *(t["state"] for t in status["tasks"])]
        assert "FAILED" not in states, status
        return len(states) == 2 and set(states) == {"RUNNING"}

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def worker_config(broker: RunningBroker, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    port = free_port()
    properties = tmp_path / "worker.properties"
    settings = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": "odradek-connect",
        **INTERNAL_TOPICS,
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        "status.storage.partitions": "2",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "listeners": f"http://127.0.0.1:{port}",
        # The connectors are on the classpath with ServiceLoader manifests: no scan of every jar.
        "plugin.discovery": "service_load",
        # Source offsets and sink commits every second rather than every minute: the test
        # waits for lines, not for the flush timer.
        "offset.flush.interval.ms": "1000",
        # A worker that comes back gets its connectors at once, not after a grace period.
        "scheduled.rebalance.max.delay.ms": "0",
    }
    properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    yield properties, port


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def topic_values(bootstrap: str, topic: str) -> list[str]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "connect-check", "enable.partition.eof": True}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values = []
        while True:
            message = consumer.poll(10)
            assert message is not None, f"no end of {topic} after {len(values)} records"
            if message.error():
                return values
            values.append(message.value().decode())
    finally:
        consumer.close()


def test_file_source_and_sink_through_a_restart(
    broker: RunningBroker, tmp_path: Path, worker_config: tuple[Path, int]
) -> None:
    properties, port = worker_config
    source_file, sink_file, topic = tmp_path / "in.txt", tmp_path / "out.txt", "connect-lines"
    first = [f"line {i} before the restart" for i in range(40)]
    source_file.write_text("".join(f"{line}\n" for line in first))

    worker = Worker(properties, tmp_path / "worker.log", port)
    try:
        info = worker.rest("GET", "/")
        cluster_id = (
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).cluster_id
        )
        assert info["kafka_cluster_id"] == cluster_id
        worker.rest(
            "POST",
            "/connectors",
            {
                "name": "lines-in",
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                    "tasks.max": "1",
                    "file": str(source_file),
                    "topic": topic,
                },
            },
        )
        worker.rest(
            "POST",
            "/connectors",
            {
                "name": "lines-out",
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                    "tasks.max": "1",
                    "file": str(sink_file),
                    "topics": topic,
                },
            },
        )
        assert sorted(worker.rest("GET", "/connectors")) == ["lines-in", "lines-out"]
        wait_until(lambda: lines_of(sink_file) == first, timeout_s=60, interval_s=0.5)
        assert worker.running("lines-in") and worker.running("lines-out")
        # SIGTERM: the JVM runs Connect's shutdown hook and exits as killed by the signal.
        assert worker.stop() in (0, 128 + signal.SIGTERM)
    finally:
        worker.kill()

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for name in INTERNAL_TOPICS.values():
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        assert admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value == (
            "compact"
        )
        partitions = admin.list_topics(name, timeout=10).topics[name].partitions
        assert all(len(p.replicas) == 1 for p in partitions.values())

    # Written while no worker runs: the restarted source must resume at its stored offset.
    second = [f"line {i} after the restart" for i in range(25)]
    with source_file.open("a") as out:
        out.write("".join(f"{line}\n" for line in second))
    worker = Worker(properties, tmp_path / "worker.log", port)
    try:
        # No connector is created again: both come back from the config topic.
        wait_until(
            lambda: worker.running("lines-in") and worker.running("lines-out"),
            timeout_s=60,
            interval_s=0.5,
        )
        wait_until(
            lambda: len(lines_of(sink_file)) >= len(first + second), timeout_s=60, interval_s=0.5
        )
        assert lines_of(sink_file) == first + second  # none lost, none written twice
        assert worker.stop() in (0, 128 + signal.SIGTERM)
    finally:
        worker.kill()
    assert topic_values(broker.bootstrap, topic) == first + second
