"""The admin client against a three-broker cluster: requests that only one broker can answer
go to that broker, whichever broker the client bootstrapped from."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.client.admin import BROKER_RESOURCE, ClusterAdmin
from odradek.testing import RunningCluster


def test_a_brokers_configs_are_asked_of_that_broker(tmp_path: Path) -> None:
    with RunningCluster(tmp_path) as cluster:
        # Broker 1 alone: it describes only its own configs.
        first = cluster.brokers[1].bootstrap

        async def describe() -> dict[int, str | None]:
            async with await ClusterAdmin.connect(first, timeout_s=30) as admin:
                found = {}
                for broker in (1, 2, 3):
                    configs = await admin.config_entries(BROKER_RESOURCE, str(broker))
                    (broker_id,) = [c.value for c in configs if c.name == "broker.id"]
                    found[broker] = broker_id
                return found

        assert asyncio.run(describe()) == {1: "1", 2: "2", 3: "3"}
