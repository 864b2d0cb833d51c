"""One broker for each Java test module (each test makes its own topics and groups), started
with no initial rebalance delay so that a Java consumer joining a group starts at once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.testing import RunningBroker, running_broker

from .support import classpath


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    classpath()  # skip (or fail under CI) before starting anything when Java is missing
    with running_broker(
        tmp_path_factory.mktemp("java"), group_initial_rebalance_delay_ms="0"
    ) as running:
        yield running


@pytest.fixture
def bootstrap(broker: RunningBroker) -> str:
    return broker.bootstrap
