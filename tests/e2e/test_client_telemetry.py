"""Client telemetry (KIP-714) with a real client: a client metrics subscription made with
IncrementalAlterConfigs on a CLIENT_METRICS resource, and a librdkafka producer's pushed metrics
appearing on the broker's /metrics under their names with underscores, labelled with its client
id; the subscription described and listed as Kafka's tools ask."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from odradek.protocol.errors import ErrorCode
from odradek.testing import RunningBroker, running_broker, wait_until
from tests.server.conftest import KafkaConnection, unique_topic

from .metrics_support import scrape

CLIENT_METRICS = 16
INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS, LIST_CONFIG_RESOURCES = 44, 32, 74


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with running_broker(tmp_path, metrics_listener="127.0.0.1:0") as running:
        yield running


def subscribe(bootstrap: str, name: str, **configs: str) -> None:
    with KafkaConnection(bootstrap) as connection:
        answer = connection.request(
            INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                {
                    "resource_type": CLIENT_METRICS,
                    "resource_name": name,
                    "configs": [
                        {"name": k.replace("_", "."), "config_operation": 0, "value": v}
                        for k, v in configs.items()
                    ],
                }
            ],
            validate_only=False,
        )
    assert [r.error_code for r in answer.responses] == [ErrorCode.none]


def test_a_producers_pushed_metrics_are_on_the_metrics_endpoint(broker: RunningBroker) -> None:
    assert broker.broker is not None and broker.broker.metrics is not None
    host, port = broker.broker.metrics.bound
    subscribe(
        broker.bootstrap,
        "producers",
        metrics="org.apache.kafka.producer.",
        interval_ms="1000",
        match="client_id=telemetry-.*",
    )
    topic = unique_topic("telemetry")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-app"})
    deadline = time.monotonic() + 30

    def pushed() -> bool:
        producer.produce(topic, b"v")
        producer.poll(0.1)
        text = scrape(f"{host}:{port}").text
        return 'client_id="telemetry-app"' in text and "org_apache_kafka_producer_" in text

    try:
        assert wait_until(pushed, 30, 0.5, "the producer's metrics on /metrics")
        text = scrape(f"{host}:{port}").text
        names = {line.split("{")[0] for line in text.splitlines() if line.startswith("org_")}
        assert names and all(n.startswith("org_apache_kafka_producer_") for n in names), names
        assert time.monotonic() < deadline
    finally:
        producer.flush(10)

    # The console's group page shows them beside a member with that client id.
    with urllib.request.urlopen(f"http://{host}:{port}/api/clients", timeout=10) as answer:
        clients = json.loads(answer.read())
    (app,) = [c for c in clients if c["client_id"] == "telemetry-app"]
    assert app["principal"] == "User:ANONYMOUS"
    shown = {m["name"] for m in app["metrics"]}
    assert names <= shown and all(n.startswith("org_apache_kafka_producer_") for n in shown)

    with KafkaConnection(broker.bootstrap) as connection:
        described = connection.request(
            DESCRIBE_CONFIGS,
            4,
            resources=[
                {
                    "resource_type": CLIENT_METRICS,
                    "resource_name": "producers",
                    "configuration_keys": None,
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        listed = connection.request(LIST_CONFIG_RESOURCES, 1, resource_types=[CLIENT_METRICS])
    (result,) = described.results
    assert {c.name: c.value for c in result.configs} == {
        "metrics": "org.apache.kafka.producer.",
        "interval.ms": "1000",
        "match": "client_id=telemetry-.*",
    }
    assert [r.resource_name for r in listed.config_resources] == ["producers"]
