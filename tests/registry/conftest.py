from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker, running_broker


@pytest.fixture
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """A broker serving the schema registry on a free port (see :func:`registry_url`)."""
    with running_broker(
        tmp_path_factory.mktemp("odradek"), schema_registry_listener="127.0.0.1:0"
    ) as broker:
        yield broker


def registry_url(broker: RunningBroker) -> str:
    assert broker.broker is not None and broker.broker.schema_registry is not None
    host, port = broker.broker.schema_registry.bound
    return f"http://{host}:{port}"
