"""One broker per module (two partitions per topic), a data client per test, a fresh topic."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from odradek.client.data import DataClient
from odradek.testing import RunningBroker, running_broker


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
