"""The registry's figures on the broker's ``/metrics``, scraped from a real broker after real
clients used the registry and produced to a validated topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import RunningBroker, running_broker
from tests.e2e.metrics_support import scrape

from .conftest import registry_url

TIMEOUT_S = 30
PREFIX = "odradek_schema_registry_"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path, metrics_listener="127.0.0.1:0", schema_registry_listener="127.0.0.1:0"
    ) as running:
        yield running


def test_registry_figures_are_scraped(broker: RunningBroker) -> None:
    url = registry_url(broker)
    assert broker.broker is not None and broker.broker.metrics is not None
    address = "{}:{}".format(*broker.broker.metrics.bound)
    for subject, schema in (("a", '"int"'), ("b", '"long"'), ("a", '"int"')):
        answer = requests.post(
            f"{url}/subjects/{subject}/versions", json={"schema": schema}, timeout=TIMEOUT_S
        )
        assert answer.status_code == 200
    schema_id = answer.json()["id"]
    assert requests.get(f"{url}/schemas/ids/{schema_id}", timeout=TIMEOUT_S).status_code == 200
    assert requests.get(f"{url}/schemas/ids/4242", timeout=TIMEOUT_S).status_code == 404

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic("checked", 1, 1, config={"confluent.value.schema.validation": "true"})
    admin.create_topics([topic])["checked"].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "retries": 0})
    for _ in range(2):
        producer.produce("checked", b"no schema id")
        assert producer.flush(TIMEOUT_S) == 0

    got = scrape(address)
    assert got.value(PREFIX + "subjects") == 2
    assert got.value(PREFIX + "schemas") == 2
    assert got.value(PREFIX + "versions") == 2
    assert got.value(PREFIX + "registrations_total", result="new") == 2
    assert got.value(PREFIX + "registrations_total", result="existing") == 1
    assert got.value(PREFIX + "lookups_by_id_total", result="found") == 1
    assert got.value(PREFIX + "lookups_by_id_total", result="not_found") == 1
    endpoint = "/subjects/{subject}/versions"
    assert (
        got.value(PREFIX + "http_requests_total", method="POST", endpoint=endpoint, status="200")
        == 3
    )
    assert (
        got.value(
            PREFIX + "http_requests_total", method="GET", endpoint="/schemas/ids/{id}", status="404"
        )
        == 1
    )
    assert got.value(PREFIX + "validation_refusals_total", topic="checked") == 2
