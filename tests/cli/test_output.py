"""``--output json`` of every client verb, parsed and checked against a real broker (with an
authorizer, the CLI's User:ANONYMOUS a super user, so that ``acls`` works too). The verbs run
in this process through :func:`odradek.cli.main.main`, their standard output captured."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cli.main import main
from odradek.testing import RunningBroker, running_broker

TOPIC = "json-topic"


@pytest.fixture(scope="module")
def broker() -> Iterator[RunningBroker]:
    with running_broker(
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        super_users="User:ANONYMOUS",
        offsets_topic_num_partitions="1",
        transaction_state_log_num_partitions="1",
        group_initial_rebalance_delay_ms="0",
    ) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        yield running


def run_json(
    capsys: pytest.CaptureFixture[str], broker: RunningBroker, *args: str, status: int = 0
) -> Any:
    capsys.readouterr()
    assert main([*args, "--bootstrap-server", broker.bootstrap, "--output", "json"]) == status
    return json.loads(capsys.readouterr().out)


def test_topics(capsys: pytest.CaptureFixture[str], broker: RunningBroker) -> None:
    created = run_json(capsys, broker, "topics", "create", "json-made", "--partitions", "3")
    assert created == {"topic": "json-made", "created": True}
    listed = run_json(capsys, broker, "topics", "list")
    assert {"topic": "json-made", "partition_count": 3, "replication_factor": 1} in listed
    altered = run_json(capsys, broker, "topics", "alter", "json-made", "--partitions", "4")
    assert altered == {"topic": "json-made", "partition_count": 4}

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(5):
        producer.produce("json-made", value=b"x%d" % i, partition=1)
    producer.flush(10)
    (described,) = run_json(capsys, broker, "topics", "describe", "json-made")
    assert (described["topic"], described["partition_count"]) == ("json-made", 4)
    assert described["replication_factor"] == 1
    by_index = {p["partition"]: p for p in described["partitions"]}
    assert sorted(by_index) == [0, 1, 2, 3]
    one = by_index[1]
    assert (one["leader"], one["replicas"], one["isr"], one["offline"]) == (1, [1], [1], [])
    assert (one["log_start_offset"], one["log_end_offset"]) == (0, 5)
    assert one["segments"] == 1 and one["segments_estimated"] is False
    assert one["size_bytes"] > 0 and one["size_from"] == 1 and one["log_dir"]

    deleted = run_json(capsys, broker, "topics", "delete", "json-made")
    assert deleted == {"topics": ["json-made"], "deleted": True}


def test_cluster(capsys: pytest.CaptureFixture[str], broker: RunningBroker) -> None:
    cluster = run_json(capsys, broker, "cluster")
    assert cluster["controller"] == 1
    assert cluster["brokers"] == [
        {"broker": 1, "address": broker.bootstrap, "rack": None, "status": "controller"}
    ]
    assert cluster["partition_count"] >= 2 and cluster["topic_count"] >= 1
    assert cluster["under_replicated"] == cluster["under_min_isr"] == cluster["offline"] == []


def test_configs(capsys: pytest.CaptureFixture[str], broker: RunningBroker) -> None:
    altered = run_json(
        capsys, broker, "configs", "alter", "--entity-type", "topics", "--entity-name", TOPIC,
        "--add-config", "retention.ms=120000",
    )  # fmt: skip
    assert altered["set"] == {"retention.ms": "120000"} and altered["deleted"] == []
    described = run_json(
        capsys, broker, "configs", "describe", "--entity-type", "topics", "--entity-name", TOPIC
    )
    assert described == [
        {
            "name": "retention.ms",
            "value": "120000",
            "default": "604800000",
            "source": "DYNAMIC_TOPIC_CONFIG",
            "read_only": False,
        }
    ]
    everything = run_json(
        capsys, broker, "configs", "describe", "--entity-type", "topics", "--entity-name", TOPIC,
        "--all",
    )  # fmt: skip
    by_name = {e["name"]: e for e in everything}
    assert by_name["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    assert by_name["segment.bytes"]["default"] == by_name["segment.bytes"]["value"]
    assert by_name["retention.ms"]["default"] == "604800000"
    brokers = run_json(
        capsys, broker, "configs", "describe", "--entity-type", "brokers", "--entity-name", "1",
        "--all",
    )  # fmt: skip
    by_name = {e["name"]: e for e in brokers}
    # Set by the test harness (a static config), with Kafka's default beside it.
    assert by_name["authorizer.class.name"]["source"] == "STATIC_BROKER_CONFIG"
    assert by_name["num.partitions"]["default"] == "1"


def test_configs_describe_all_table_has_the_default_column(
    capsys: pytest.CaptureFixture[str], broker: RunningBroker
) -> None:
    capsys.readouterr()
    args = ["configs", "describe", "--entity-type", "topics", "--entity-name", TOPIC, "--all"]
    assert main([*args, "--bootstrap-server", broker.bootstrap]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "VALUE", "DEFAULT", "SOURCE", "READ-ONLY"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["cleanup.policy"] == ["cleanup.policy", "delete", "delete", "DEFAULT_CONFIG", "no"]


def _consume_and_commit(broker: RunningBroker, group: str) -> None:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": group,
         "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )  # fmt: skip
    consumer.subscribe([TOPIC])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 6 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()


def test_produce_consume_records_and_groups(
    capsys: pytest.CaptureFixture[str], broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("k1:a\nk2:b\nk3:c\nk4:d\nk5:e\nk6:f\n"))
    produced = run_json(capsys, broker, "produce", TOPIC, "--key-separator", ":")
    assert produced == {"topic": TOPIC, "records": 6}

    capsys.readouterr()
    args = ["consume", TOPIC, "--from-beginning", "--output", "json"]
    assert main([*args, "--bootstrap-server", broker.bootstrap]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted((r["key"], r["value"]) for r in records) == [
        ("k1", "a"), ("k2", "b"), ("k3", "c"), ("k4", "d"), ("k5", "e"), ("k6", "f")
    ]  # fmt: skip
    assert {"topic", "partition", "offset", "timestamp", "key", "value", "headers"} == set(
        records[0]
    )

    _consume_and_commit(broker, "json-group")
    listed = run_json(capsys, broker, "groups", "list")
    assert {
        "group": "json-group",
        "type": "classic",
        "state": "Empty",
        "protocol_type": "consumer",
    } in listed
    (group,) = run_json(capsys, broker, "groups", "describe", "json-group")
    assert (group["group"], group["exists"], group["state"]) == ("json-group", True, "Empty")
    assert group["members"] == []
    offsets = {o["partition"]: o for o in group["offsets"]}
    assert sum(o["current_offset"] for o in offsets.values()) == 6
    assert all(o["lag"] == 0 and o["member_id"] is None for o in offsets.values())

    capsys.readouterr()
    dry_run = ["groups", "reset-offsets", "--group", "json-group", "--all-topics", "--to-latest"]
    assert main([*dry_run, "--bootstrap-server", broker.bootstrap]) == 0
    shown = capsys.readouterr()
    assert "(dry run: --execute commits these offsets)" in shown.out
    # Progress goes to stderr, one line per step when it is not a terminal.
    steps = [line for line in shown.err.splitlines() if line.startswith("reset-offsets ")]
    assert steps == ["reset-offsets json-group: 0/2 new offsets of 2 partitions"]
    reset = run_json(
        capsys, broker, "groups", "reset-offsets", "--group", "json-group", "--topic", TOPIC,
        "--to-earliest", "--execute", "--quiet",
    )  # fmt: skip
    assert reset["group"] == "json-group" and reset["executed"] is True
    assert reset["offsets"] == [
        {"group": "json-group", "topic": TOPIC, "partition": p, "offset": 0} for p in (0, 1)
    ]
    (group,) = run_json(capsys, broker, "groups", "describe", "json-group")
    assert sorted(o["lag"] for o in group["offsets"]) == sorted(
        o["log_end_offset"] for o in group["offsets"]
    )

    deleted = run_json(capsys, broker, "groups", "delete", "json-group", "nope", status=2)
    assert deleted == [
        {"group": "json-group", "deleted": True, "error": None},
        {"group": "nope", "deleted": False, "error": "GROUP_ID_NOT_FOUND"},
    ]

    moved = run_json(
        capsys, broker, "records", "delete", "--topic", TOPIC, "--partition", "0", "--before", "-1"
    )
    assert moved["topic"] == TOPIC and moved["partition"] == 0
    assert moved["log_start_offset"] == offsets[0]["log_end_offset"]


def test_acls(capsys: pytest.CaptureFixture[str], broker: RunningBroker) -> None:
    added = run_json(
        capsys, broker, "acls", "add", "--allow-principal", "User:json", "--operation", "Read",
        "--topic", "json-acl",
    )  # fmt: skip
    binding = {
        "resource_type": "TOPIC",
        "resource_name": "json-acl",
        "pattern_type": "LITERAL",
        "principal": "User:json",
        "host": "*",
        "operation": "READ",
        "permission": "ALLOW",
    }
    assert added == [binding]
    assert run_json(capsys, broker, "acls", "list", "--topic", "json-acl") == [binding]
    removed = run_json(
        capsys, broker, "acls", "remove", "--allow-principal", "User:json", "--operation", "Read",
        "--topic", "json-acl",
    )  # fmt: skip
    assert removed == [binding]
    assert run_json(capsys, broker, "acls", "list", "--topic", "json-acl") == []


def test_users(capsys: pytest.CaptureFixture[str], broker: RunningBroker) -> None:
    added = run_json(
        capsys, broker, "users", "add", "--user", "json-user", "--password", "secret",
        "--mechanism", "SCRAM-SHA-256", "--iterations", "4096",
    )  # fmt: skip
    assert added == {"user": "json-user", "changed": True, "errors": []}
    listed = run_json(capsys, broker, "users", "list", "--user", "json-user")
    assert listed == [{"user": "json-user", "mechanism": "SCRAM-SHA-256", "iterations": 4096}]
    deleted = run_json(capsys, broker, "users", "delete", "--user", "json-user")
    assert deleted == {"user": "json-user", "changed": True, "errors": []}
    assert run_json(capsys, broker, "users", "list", "--user", "json-user") == []


def test_transactions(capsys: pytest.CaptureFixture[str], broker: RunningBroker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "json-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(TOPIC, value=b"t", partition=1)
    producer.flush(30)

    listed = run_json(capsys, broker, "transactions", "list")
    (mine,) = [t for t in listed if t["transactional_id"] == "json-txn"]
    assert (mine["coordinator"], mine["state"]) == (1, "Ongoing")
    described = run_json(
        capsys, broker, "transactions", "describe", "--transactional-id", "json-txn"
    )
    assert described["state"] == "Ongoing" and described["producer_id"] == mine["producer_id"]
    assert described["partitions"] == [{"topic": TOPIC, "partition": 1}]
    assert described["start_ms"] is not None and described["duration_ms"] >= 0
    producers = run_json(
        capsys, broker, "transactions", "describe-producers", "--topic", TOPIC, "--partition", "1"
    )
    (open_one,) = [p for p in producers if p["producer_id"] == mine["producer_id"]]
    start = open_one["current_transaction_start_offset"]
    assert isinstance(start, int)
    aborted = run_json(
        capsys, broker, "transactions", "abort", "--topic", TOPIC, "--partition", "1",
        "--start-offset", str(start),
    )  # fmt: skip
    assert aborted["aborted"] is True and aborted["producer_id"] == mine["producer_id"]
    missing = run_json(
        capsys, broker, "transactions", "describe", "--transactional-id", "nope", status=2
    )
    assert missing is None
