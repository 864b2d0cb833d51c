"""Kafka's own command-line tools (kafka-tools and kafka_2.13 4.x, run through the main classes
their ``bin/`` scripts call) against one broker; what they did is checked with confluent-kafka."""

from __future__ import annotations

import re

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from .support import (
    CONFIGS_TOOL,
    CONSOLE_CONSUMER,
    CONSOLE_PRODUCER,
    CONSUMER_GROUPS_TOOL,
    CONSUMER_PERF_TEST,
    PRODUCER_PERF_TEST,
    TOPICS_TOOL,
    TRANSACTIONS_TOOL,
    consume,
    create_topic,
    produce,
    run_java,
)


def test_kafka_topics_create_list_describe(bootstrap):
    topic = "tools-topics"
    out = run_java(
        TOPICS_TOOL,
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "4",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=86400000",
    )
    assert f"Created topic {topic}." in out
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 4

    listed = run_java(TOPICS_TOOL, "--bootstrap-server", bootstrap, "--list").splitlines()
    assert topic in listed

    described = run_java(
        TOPICS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--topic", topic
    )
    header, *partitions = described.strip().splitlines()
    assert re.search(rf"Topic: {topic}\s.*PartitionCount: 4\s+ReplicationFactor: 1", header)
    assert "retention.ms=86400000" in header
    assert [
        re.search(r"Partition: (\d+)\s+Leader: (\d+)", line).groups() for line in partitions
    ] == [(str(p), str(metadata.controller_id)) for p in range(4)]


def test_console_producer_and_consumer_lines_round_trip(bootstrap):
    topic = "tools-console"
    lines = [f"line {i} of the console producer" for i in range(25)]
    run_java(
        CONSOLE_PRODUCER,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        stdin="".join(f"{line}\n" for line in lines),
    )
    out = run_java(
        CONSOLE_CONSUMER,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(len(lines)),
        "--timeout-ms",
        "20000",
    )
    assert out.splitlines() == lines  # auto-created with one partition: in order


def consumer_groups(bootstrap: str, *args: str) -> list[list[str]]:
    """kafka-consumer-groups' table rows (after its header line), split on whitespace."""
    out = run_java(CONSUMER_GROUPS_TOOL, "--bootstrap-server", bootstrap, *args)
    rows = [line.split() for line in out.splitlines() if line.strip()]
    return [row for row in rows if row and row[0] not in ("GROUP", "Consumer")]


def test_kafka_consumer_groups_describe_and_reset_to_earliest(bootstrap):
    topic, group = "tools-groups", "tools-groups-group"
    run_java(
        CONSOLE_PRODUCER,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        stdin="".join(f"{i}\n" for i in range(10)),
    )
    run_java(
        CONSOLE_CONSUMER,
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
        "--max-messages",
        "10",
        "--timeout-ms",
        "20000",
    )
    listed = run_java(CONSUMER_GROUPS_TOOL, "--bootstrap-server", bootstrap, "--list")
    assert group in listed.split()

    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    described = consumer_groups(bootstrap, "--describe", "--group", group)
    assert [row[:6] for row in described] == [[group, topic, "0", "10", "10", "0"]]

    reset = consumer_groups(
        bootstrap,
        "--reset-offsets",
        "--to-earliest",
        "--execute",
        "--group",
        group,
        "--topic",
        topic,
    )
    assert reset == [[group, topic, "0", "0"]]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed.offset == 0
    finally:
        consumer.close()
    described = consumer_groups(bootstrap, "--describe", "--group", group)
    assert [row[:6] for row in described] == [[group, topic, "0", "0", "10", "10"]]


def test_kafka_configs_describe_and_alter_a_topic(bootstrap):
    topic = "tools-configs"
    run_java(
        TOPICS_TOOL,
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--config",
        "retention.ms=86400000",
    )
    entity = ("--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", topic)

    described = run_java(CONFIGS_TOOL, *entity, "--describe")
    assert re.search(r"^\s*retention\.ms=86400000 .*DYNAMIC_TOPIC_CONFIG", described, re.M)

    altered = run_java(
        CONFIGS_TOOL, *entity, "--alter", "--add-config", "retention.ms=1000,cleanup.policy=compact"
    )
    assert "Completed updating config" in altered
    run_java(CONFIGS_TOOL, *entity, "--alter", "--delete-config", "retention.ms")
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000"  # back to log.retention.ms's default
    assert configs["retention.ms"].is_default

    described = run_java(CONFIGS_TOOL, *entity, "--describe")
    dynamic = re.findall(r"^\s*([a-z.]+)=(\S+) sensitive", described, re.M)
    assert dynamic == [("cleanup.policy", "compact")]


def test_kafka_configs_sets_describes_and_deletes_client_quotas(bootstrap):
    user = ("--bootstrap-server", bootstrap, "--entity-type", "users", "--entity-name", "quoted")
    altered = run_java(
        CONFIGS_TOOL,
        *user,
        "--alter",
        "--add-config",
        "producer_byte_rate=1024,consumer_byte_rate=2048",
    )
    assert "Completed updating config" in altered
    described = run_java(CONFIGS_TOOL, *user, "--describe")
    assert "producer_byte_rate=1024.0" in described
    assert "consumer_byte_rate=2048.0" in described

    clients = ("--bootstrap-server", bootstrap, "--entity-type", "clients", "--entity-default")
    run_java(CONFIGS_TOOL, *clients, "--alter", "--add-config", "request_percentage=50")
    assert "request_percentage=50.0" in run_java(CONFIGS_TOOL, *clients, "--describe")

    run_java(CONFIGS_TOOL, *user, "--alter", "--delete-config", "producer_byte_rate")
    described = run_java(CONFIGS_TOOL, *user, "--describe")
    assert "producer_byte_rate" not in described
    assert "consumer_byte_rate=2048.0" in described


def test_kafka_transactions_list_describe_and_abort(bootstrap):
    topic, tid = "tools-transactions", "tools-txn"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"open")
    producer.flush(30)

    def tool(*args: str) -> list[list[str]]:
        out = run_java(TRANSACTIONS_TOOL, "--bootstrap-server", bootstrap, *args)
        return [line.split() for line in out.strip().splitlines()]

    header, *rows = tool("list")
    assert header[:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert [tid, "Ongoing"] in [[r[0], r[3]] for r in rows]
    header, row = tool("describe", "--transactional-id", tid)
    assert dict(zip(header, row, strict=False))["TransactionState"] == "Ongoing"
    assert f"{topic}-0" in row[-1]
    header, producer_row = tool("describe-producers", "--topic", topic, "--partition", "0")
    described = dict(zip(header, producer_row, strict=True))
    assert described["CurrentTransactionStartOffset"] == "0"

    # The hanging-transaction remedy: the ABORT marker written into the partition directly.
    tool("abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tools-txn",
            "isolation.level": "read_committed",
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 2)  # the record and the marker, and nothing unstable
    finally:
        consumer.close()
    header, producer_row = tool("describe-producers", "--topic", topic, "--partition", "0")
    assert dict(zip(header, producer_row, strict=True))["CurrentTransactionStartOffset"] == "None"


def test_kafka_consumer_groups_reset_to_offset_of_one_partition(bootstrap):
    topic, group = "tools-reset-offset", "tools-reset-offset-group"
    create_topic(bootstrap, topic, 2)
    produced = produce(bootstrap, topic, 20, "reset", 5)
    ends = {p: 1 + max(o for q, o in produced.acked.values() if q == p) for p in (0, 1)}
    assert sum(ends.values()) == 20 and min(ends.values()) > 4
    assert len(consume(bootstrap, topic, group, 20).records) == 20  # commits the ends

    reset = consumer_groups(
        bootstrap, "--reset-offsets", "--to-offset", "4", "--execute", "--group", group,
        "--topic", f"{topic}:0",
    )  # fmt: skip
    assert reset == [[group, topic, "0", "4"]]
    # The group's next consumer reads partition 0 from offset 4 and nothing of partition 1.
    again = consume(bootstrap, topic, group, ends[0] - 4)
    assert sorted((r.partition, r.offset) for r in again.records) == [
        (0, o) for o in range(4, ends[0])
    ]
    assert again.committed == {(topic, 0): ends[0]}  # JavaConsumer commits what it read


def test_producer_and_consumer_perf_tests(bootstrap):
    topic, count = "tools-perf", 20_000
    create_topic(bootstrap, topic, 3)
    out = run_java(
        PRODUCER_PERF_TEST,
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count),
        "--throughput", "-1", "--payload-monotonic", "--producer-props", "acks=all",
    )  # fmt: skip
    # the summary: "20000 records sent, 51020.4 records/sec (...), ... ms avg latency, ..."
    assert re.search(rf"^{count} records sent, [\d.]+ records/sec", out, re.M), out
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "tools-perf-check",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        values: list[bytes] = []
        while len(values) < count:
            batch = consumer.consume(5000, timeout=10)
            assert batch, f"{len(values)} of {count} records read back"
            values.extend(m.value() for m in batch if not m.error())
    finally:
        consumer.close()
    assert sorted(int(v) for v in values) == list(range(count))  # --payload-monotonic: 0..N-1

    out = run_java(
        CONSUMER_PERF_TEST,
        "--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count),
        "--group", "tools-perf-group", "--timeout", "20000",
    )  # fmt: skip
    header, row = (line.split(", ") for line in out.strip().splitlines()[-2:])
    stats = dict(zip(header, row, strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == count, out
    assert float(stats["data.consumed.in.MB"]) > 0
