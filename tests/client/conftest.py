"""One broker per module (two partitions per topic), a data client per test, a fresh topic; and
the request fields the connection tests send."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client.data import DataClient
from odradek.protocol.records import NewRecord, encode_batch
from odradek.testing import RunningBroker, running_broker

METADATA_FIELDS = {"topics": None, "allow_auto_topic_creation": False}


def produce_fields(topic: str, value: bytes = b"v", acks: int = 1) -> dict[str, Any]:
    """Produce fields: one record of ``value`` for partition 0 of ``topic``."""
    batch = encode_batch([NewRecord(None, value)], now_ms=1_700_000_000_000)
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("client"), num_partitions="2") as running:
        yield running


@pytest.fixture
def client(broker: RunningBroker) -> Iterator[DataClient]:
    with DataClient(broker.bootstrap) as c:
        yield c


@pytest.fixture
def topic(client: DataClient) -> str:
    name = f"data-{uuid.uuid4().hex[:10]}"
    client.describe([name], auto_create=True)
    return name
