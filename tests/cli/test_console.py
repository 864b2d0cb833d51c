"""``odradek console`` as users run it: a process serving the console for a cluster it reaches
at ``--bootstrap``, with the same page and API as the broker's own console."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from odradek.testing import RunningBroker

from .support import odradek


def test_console_serves_a_cluster(tmp_path: Path) -> None:
    broker = RunningBroker(tmp_path / "data").start()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek",
            "console",
            "--bootstrap",
            broker.bootstrap,
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        found = re.search(r"http://([^/\s]+)/", line)
        assert found, line
        base = f"http://{found.group(1)}"
        with urllib.request.urlopen(base + "/api/cluster", timeout=30) as response:
            cluster = json.loads(response.read())
        assert cluster["bootstrap"] == broker.bootstrap
        assert [b["id"] for b in cluster["brokers"]] == [1]
        with urllib.request.urlopen(base + "/", timeout=30) as response:
            assert b"odradek console" in response.read()
    finally:
        process.terminate()
        assert process.wait(30) == 0
        broker.stop()


def test_console_refuses_a_bad_client_config(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=CARRIER_PIGEON\n")
    done = odradek("console", "--command-config", str(config), check=False)
    assert done.returncode == 2
    assert "security.protocol 'CARRIER_PIGEON'" in done.stderr


def test_console_shows_a_schema_registry(tmp_path: Path) -> None:
    broker = RunningBroker(tmp_path / "data", {"schema.registry.listener": "127.0.0.1:0"}).start()
    assert broker.broker is not None and broker.broker.schema_registry is not None
    url = f"http://127.0.0.1:{broker.broker.schema_registry.bound[1]}"
    SchemaRegistryClient({"url": url}).register_schema("s-value", Schema('"string"', "AVRO"))
    command = [sys.executable, "-m", "odradek", "console", "--bootstrap", broker.bootstrap]
    process = subprocess.Popen(
        [*command, "--listen", "127.0.0.1:0", "--schema-registry", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        found = re.search(r"http://([^/\s]+)/", process.stdout.readline())
        assert found
        with urllib.request.urlopen(f"http://{found.group(1)}/api/schemas", timeout=30) as answer:
            registry = json.loads(answer.read())
        assert [(s["subject"], s["versions"]) for s in registry["subjects"]] == [("s-value", [1])]
    finally:
        process.terminate()
        assert process.wait(30) == 0
        broker.stop()


def test_console_refuses_a_registry_that_is_not_a_url() -> None:
    done = odradek("console", "--schema-registry", "registry:8081", check=False)
    assert done.returncode == 2
    assert "is not an http:// or https:// URL" in done.stderr
