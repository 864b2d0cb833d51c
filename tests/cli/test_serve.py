"""``odradek serve`` in a cluster that it cannot join: one clear log line, exit status 1, and no
ZooKeeper session left behind by the failed start."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.cluster.metadata.membership import DuplicateBrokerIdError
from odradek.config import BrokerConfig
from odradek.server.broker import Broker
from odradek.testing import (
    ZooKeeperServer,
    free_port,
    running_broker,
    wait_until,
    zookeeper_four_letter_word,
)

from .support import odradek


def serve(data_dir: Path, *overrides: str) -> tuple[int, str]:
    args = [arg for override in overrides for arg in ("-o", override)]
    done = odradek(
        "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *args, check=False
    )
    return done.returncode, done.stdout + done.stderr


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if " ERROR " in line]


def zookeeper_connections(zookeeper: ZooKeeperServer) -> int:
    """Client connections ZooKeeper holds now (its ``cons`` command lists one per line),
    this one excepted."""
    answer = zookeeper_four_letter_word("127.0.0.1", zookeeper.port, "cons")
    return sum(1 for line in answer.splitlines() if line.strip().startswith("/")) - 1


def test_a_broker_id_already_registered_exits_1_with_one_clear_line(
    tmp_path: Path, zookeeper_connect: str
) -> None:
    with running_broker(tmp_path / "first", zookeeper_connect=zookeeper_connect, broker_id="7"):
        status, output = serve(
            tmp_path / "second", f"zookeeper.connect={zookeeper_connect}", "broker.id=7"
        )
    assert status == 1, output
    assert "Traceback" not in output and "listening on" not in output, output
    [line] = error_lines(output)
    assert "broker 7 cannot start" in line
    assert "broker.id 7 is already registered" in line
    assert "give each broker its own broker.id" in line


def test_an_unreachable_zookeeper_exits_1_with_one_clear_line(tmp_path: Path) -> None:
    closed = free_port()  # nothing listens there
    status, output = serve(
        tmp_path / "data",
        f"zookeeper.connect=127.0.0.1:{closed}/odradek",
        "zookeeper.connection.timeout.ms=1000",
        "broker.id=1",
    )
    assert status == 1, output
    assert "Traceback" not in output and "listening on" not in output, output
    [line] = error_lines(output)
    assert f"could not connect to ZooKeeper at 127.0.0.1:{closed} within 1000 ms" in line
    assert "start ZooKeeper, or set zookeeper.connect" in line


def test_a_failed_start_closes_its_zookeeper_session(
    tmp_path: Path, zookeeper: ZooKeeperServer, zookeeper_connect: str
) -> None:
    with running_broker(tmp_path / "first", zookeeper_connect=zookeeper_connect, broker_id="7"):
        before = zookeeper_connections(zookeeper)
        config = BrokerConfig(
            {
                "log.dirs": str(tmp_path / "second"),
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "zookeeper.connect": zookeeper_connect,
                "broker.id": "7",
            }
        )
        with pytest.raises(DuplicateBrokerIdError):
            asyncio.run(Broker(config).start())
        # This process goes on (as a test's does): the failed broker's session must not.
        wait_until(
            lambda: zookeeper_connections(zookeeper) == before,
            timeout_s=10,
            what="the failed broker's ZooKeeper connection closed",
        )
