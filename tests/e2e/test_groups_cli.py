"""``odradek groups list | describe`` against a broker with a live group."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.testing import BrokerProcess

from .groups_support import (
    HEARTBEAT_MS,
    SESSION_MS,
    close_all,
    group_broker_process,
    produce_everywhere,
    split_among,
    wait_until,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # A broker process of its own: the confluent-kafka consumers here must not share its GIL.
    process = group_broker_process(tmp_path_factory.mktemp("groups-cli"))
    yield process
    process.terminate()


def odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "groups", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def rows(output: str, header: str) -> list[list[str]]:
    """The rows of the table whose header starts with ``header``."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    table = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        table.append(line.split())
    return table


def test_list_and_describe_a_group(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 4)
    group = f"cli-{topic}"
    produce_everywhere(bootstrap, topic, 5, partitions=4)
    consumers = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": f"cli-{i}",
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                **({"group.instance.id": "fixed"} if i == 0 else {}),
            }
        )
        for i in range(2)
    ]
    for c in consumers:
        c.subscribe([topic])
    wait_until(
        split_among(bootstrap, group, 2, topic, partitions=4),
        what="2 members",
        tick=lambda: [c.poll(0.02) for c in consumers],
    )
    # Commit 2 of partition 0 and 5 (all) of partition 1, whoever owns them.
    consumers[0].commit(
        offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 5)], asynchronous=False
    )

    listed = odradek("--bootstrap-server", bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    assert [group, "classic", "Stable", "consumer"] in rows(listed.stdout, "GROUP")

    described = odradek("describe", group, "--bootstrap-server", bootstrap)
    assert described.returncode == 0, described.stderr
    out = described.stdout
    assert f"Consumer group '{group}': Stable, protocol consumer/range, 2 members" in out
    table = {int(r[2]): r for r in rows(out, "GROUP")}
    assert sorted(table) == [0, 1, 2, 3]
    assert table[0][3:6] == ["2", "5", "3"]  # committed, end, lag
    assert table[1][3:6] == ["5", "5", "0"]
    assert table[2][3:6] == ["-", "5", "-"]
    assert {r[8] for r in table.values()} == {"cli-0", "cli-1"}
    assert all(r[7] == "/127.0.0.1" for r in table.values())
    members = {r[3]: r for r in rows(out, "CONSUMER-ID")}
    assert set(members) == {"cli-0", "cli-1"}
    assert members["cli-0"][1] == "fixed" and members["cli-1"][1] == "-"
    assert members["cli-0"][4] == members["cli-1"][4] == "2"
    close_all(consumers)


def test_describe_an_unknown_group_and_an_unreachable_broker(bootstrap: str) -> None:
    missing = odradek("describe", "no-such-group", "--bootstrap-server", bootstrap)
    assert missing.returncode == 2
    assert "Consumer group 'no-such-group' does not exist." in missing.stdout
    down = odradek("--bootstrap-server", "127.0.0.1:1", "--timeout", "2", "list")
    assert down.returncode == 1
    assert "cannot connect" in down.stderr
