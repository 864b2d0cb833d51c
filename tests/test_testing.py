"""The test harness itself: a cluster that fails to start leaves nothing running."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.testing import RunningCluster, zookeeper_four_letter_word


def test_a_cluster_whose_brokers_cannot_start_stops_its_zookeeper(tmp_path: Path) -> None:
    cluster = RunningCluster(tmp_path, 1, settings={"log.segment.bytes": "lots"})
    with pytest.raises(RuntimeError, match="broker exited before listening"):
        cluster.start()
    zookeeper = cluster.zookeeper
    assert zookeeper.process is None
    assert zookeeper_four_letter_word(zookeeper.host, zookeeper.port, "ruok") == ""
