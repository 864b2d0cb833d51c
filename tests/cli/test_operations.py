"""The command line's changes, each against a real broker and checked with another client:
``topics create|alter|delete``, ``configs describe|alter``, ``produce`` / ``consume``,
``records delete``, ``groups reset-offsets|delete``, and the warning for a mistyped setting."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.testing import BrokerProcess, RunningBroker, running_broker

from .support import odradek, table_after


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with running_broker(
        offsets_topic_num_partitions="2", group_initial_rebalance_delay_ms="0"
    ) as b:
        yield b


def server(broker: RunningBroker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def topic_partitions(broker: RunningBroker, topic: str) -> int | None:
    # All topics: asking for one by name would create it (auto.create.topics.enable).
    found = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    described = found.topics.get(topic)
    return None if described is None or described.error else len(described.partitions)


def test_topics_create_alter_delete(broker: RunningBroker) -> None:
    created = odradek(
        "topics", "create", "ops-topic", "--partitions", "2", "--config", "retention.ms=3600000",
        *server(broker),
    )  # fmt: skip
    assert "Created topic ops-topic." in created.stdout
    assert topic_partitions(broker, "ops-topic") == 2
    again = odradek("topics", "create", "ops-topic", *server(broker), check=False)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr.upper()
    odradek("topics", "alter", "ops-topic", "--partitions", "5", *server(broker))
    assert topic_partitions(broker, "ops-topic") == 5
    odradek("topics", "delete", "ops-topic", *server(broker))
    assert topic_partitions(broker, "ops-topic") is None


def test_configs_describe_and_alter(broker: RunningBroker) -> None:
    odradek("topics", "create", "ops-configs", *server(broker))
    odradek(
        "configs", "alter", "--entity-type", "topics", "--entity-name", "ops-configs",
        "--add-config", "retention.ms=120000,cleanup.policy=compact", *server(broker),
    )  # fmt: skip
    resource = ConfigResource("topic", "ops-configs")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = admin.describe_configs([resource])[resource].result(10)
    assert (configs["retention.ms"].value, configs["cleanup.policy"].value) == ("120000", "compact")

    shown = odradek(
        "configs", "describe", "--entity-type", "topics", "--entity-name", "ops-configs",
        *server(broker),
    ).stdout  # fmt: skip
    rows = {r["NAME"]: r for r in table_after(shown, "NAME")}
    assert rows["retention.ms"]["VALUE"] == "120000"
    assert rows["retention.ms"]["SOURCE"] == "DYNAMIC_TOPIC_CONFIG"
    assert "segment.bytes" not in rows  # a default, shown with --all
    everything = json.loads(
        odradek(
            "configs", "describe", "--entity-type", "topics", "--entity-name", "ops-configs",
            "--all", "--output", "json", *server(broker),
        ).stdout
    )  # fmt: skip
    assert {"name": "segment.bytes", "source": "DEFAULT_CONFIG"}.items() <= next(
        c for c in everything if c["name"] == "segment.bytes"
    ).items()

    odradek(
        "configs", "alter", "--entity-type", "topics", "--entity-name", "ops-configs",
        "--delete-config", "retention.ms", *server(broker),
    )  # fmt: skip
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "604800000"
    bad = odradek(
        "configs", "alter", "--entity-type", "topics", "--entity-name", "ops-configs",
        "--add-config", "retention.ms=soon", *server(broker), check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr.upper()


def test_produce_then_consume_with_keys_headers_and_formats(broker: RunningBroker) -> None:
    odradek("topics", "create", "ops-records", "--partitions", "3", *server(broker))
    lines = "".join(f"k{i % 4}:value {i}\n" for i in range(40))
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "odradek", "produce", "ops-records", "--key-separator", ":",
         "--header", "origin=cli", *server(broker)],
        input=lines, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "40 records written" in done.stderr

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "ops-check",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["ops-records"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 40 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(message)
    consumer.close()
    assert sorted(m.value().decode() for m in got) == sorted(f"value {i}" for i in range(40))
    # Keyed alike, partitioned alike (Kafka's murmur2), headers on every record.
    partition_of = {}
    for m in got:
        assert partition_of.setdefault(m.key(), m.partition()) == m.partition()
        assert m.headers() == [("origin", b"cli")]

    printed = odradek(
        "consume", "ops-records", "--from-beginning", "--format", "%p %o %k %s|%h\\n",
        *server(broker),
    ).stdout.splitlines()  # fmt: skip
    assert len(printed) == 40
    assert all(line.endswith("|origin=cli") for line in printed)
    assert sorted(line.split(" ", 3)[3].split("|")[0] for line in printed) == sorted(
        f"value {i}" for i in range(40)
    )
    limited = odradek(
        "consume", "ops-records", "--partition", "0", "--offset", "1", "--count", "2", "--json",
        *server(broker),
    ).stdout.splitlines()  # fmt: skip
    assert [json.loads(x)["offset"] for x in limited] == [1, 2]
    assert odradek("consume", "ops-records", *server(broker)).stdout == ""  # from the end


def test_records_delete_moves_the_log_start(broker: RunningBroker) -> None:
    odradek("topics", "create", "ops-delete", "--partitions", "1", *server(broker))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("ops-delete", value=b"%d" % i)
    producer.flush(10)
    out = odradek(
        "records", "delete", "--topic", "ops-delete", "--partition", "0", "--before", "6",
        *server(broker),
    ).stdout  # fmt: skip
    assert "log start offset is now 6" in out
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ops-delete"})
    low, high = consumer.get_watermark_offsets(TopicPartition("ops-delete", 0), timeout=10)
    consumer.close()
    assert (low, high) == (6, 10)


def test_groups_reset_offsets_and_delete(broker: RunningBroker) -> None:
    odradek("topics", "create", "ops-groups", "--partitions", "2", *server(broker))
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        producer.produce("ops-groups", value=b"%d" % i, partition=i % 2)
    producer.flush(10)
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "ops-group",
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe(["ops-groups"])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()

    def committed() -> dict[int, int]:
        checker = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ops-group"})
        try:
            tps = checker.committed([TopicPartition("ops-groups", p) for p in (0, 1)], timeout=10)
            return {tp.partition: tp.offset for tp in tps}
        finally:
            checker.close()

    assert committed() == {0: 10, 1: 10}
    dry = odradek(
        "groups", "reset-offsets", "--group", "ops-group", "--topic", "ops-groups",
        "--to-earliest", *server(broker),
    ).stdout  # fmt: skip
    assert [r["NEW-OFFSET"] for r in table_after(dry, "GROUP")] == ["0", "0"]
    assert committed() == {0: 10, 1: 10}  # a dry run changes nothing
    odradek(
        "groups", "reset-offsets", "--group", "ops-group", "--topic", "ops-groups:1",
        "--shift-by", "-3", "--execute", *server(broker),
    )  # fmt: skip
    assert committed() == {0: 10, 1: 7}
    odradek(
        "groups", "reset-offsets", "--group", "ops-group", "--all-topics", "--to-offset", "99",
        "--execute", *server(broker),
    )  # fmt: skip
    assert committed() == {0: 10, 1: 10}  # beyond the end: the end, as Kafka's tool
    odradek(
        "groups", "reset-offsets", "--group", "ops-group", "--topic", "ops-groups",
        "--to-datetime", "2000-01-01T00:00:00", "--execute", *server(broker),
    )  # fmt: skip
    assert committed() == {0: 0, 1: 0}
    deleted = odradek("groups", "delete", "ops-group", *server(broker)).stdout
    assert "Deleted group 'ops-group'." in deleted
    assert committed() == {0: -1001, 1: -1001}  # OFFSET_INVALID: nothing committed


def test_a_mistyped_setting_is_named_with_the_closest_known_one(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, "-o", "log.retention.hourz=5").start()
    try:
        output = "".join(broker.output)
        assert "unknown setting 'log.retention.hourz' is ignored" in output
        assert "did you mean 'log.retention.hours'?" in output
    finally:
        assert broker.terminate() == 0
    bad = odradek(
        "serve", "--data-dir", str(tmp_path), "-o", "log.retention.hours=soon", check=False
    )
    assert bad.returncode == 2 and "log.retention.hours" in bad.stderr
