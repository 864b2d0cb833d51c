"""Kafka's Java AdminClient (kafka-clients 4.x) against one broker: JavaAdmin runs its scenario
once per module and prints what it saw; each test checks part of it, several against what
another client (confluent-kafka) reads from the broker."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from .support import facts, run_java

TOPIC, GROUP = "java-admin", "java-admin-group"


@pytest.fixture(scope="module")
def seen(broker) -> dict[str, list[list[str]]]:
    return facts(run_java("JavaAdmin", broker.bootstrap, TOPIC, GROUP))


@pytest.fixture(scope="module")
def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_the_scenario_ran_to_its_end(seen):
    assert seen["done"] == [[]]


def test_describe_cluster(seen, admin, broker):
    metadata = admin.list_topics(timeout=10)
    assert seen["cluster.id"] == [[metadata.cluster_id]]
    assert seen["cluster.controller"] == [[str(metadata.controller_id)]]
    nodes = [f"{b.id}@{b.host}:{b.port}" for b in metadata.brokers.values()]
    assert seen["cluster.nodes"] == [nodes] == [[f"{metadata.controller_id}@{broker.bootstrap}"]]


def test_create_list_describe_and_delete_topics(seen, admin):
    assert seen["listed"] == [["true", "true"]]
    node = seen["cluster.nodes"][0][0]
    assert seen["partition"] == [
        [str(p), "leader", node.split("@")[0], "replicas", node, "isr", node] for p in range(3)
    ]
    assert seen["deleted.listed"] == [["false", "true"]]
    topics = admin.list_topics(timeout=10).topics
    assert TOPIC in topics and f"{TOPIC}-doomed" not in topics
    assert len(topics[TOPIC].partitions) == 3


def test_describe_and_alter_configs(seen, admin):
    assert seen["config.before"] == [
        ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"],
        ["max.message.bytes", "1048588", "DEFAULT_CONFIG"],
        ["cleanup.policy", "delete", "DEFAULT_CONFIG"],
    ]
    assert seen["config.after"] == [
        ["retention.ms", "7200000", "DYNAMIC_TOPIC_CONFIG"],
        ["max.message.bytes", "65536", "DYNAMIC_TOPIC_CONFIG"],
        ["cleanup.policy", "delete", "DEFAULT_CONFIG"],
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "7200000"
    assert configs["max.message.bytes"].value == "65536"


def test_list_offsets_and_delete_records(seen, broker):
    # ten records with timestamps 1000000..1000009 in partition 0; offset,timestamp per spec
    assert seen["offsets.before"] == [
        ["at_1000005", "5", "1000005"],
        ["earliest", "0", "-1"],
        ["latest", "10", "-1"],
        ["max_timestamp", "9", "1000009"],
    ]
    assert seen["deleted.low_watermark"] == [["4"]]
    assert seen["offsets.after"] == [
        ["at_1000005", "5", "1000005"],
        ["earliest", "4", "-1"],
        ["latest", "10", "-1"],
        ["max_timestamp", "9", "1000009"],
    ]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "java-admin-check"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10) == (4, 10)
    finally:
        consumer.close()


def test_list_and_describe_consumer_groups(seen, broker):
    assert seen["consumed"] == [["6"]]  # what is left of partition 0 after the deletion
    assert [GROUP, "Classic", "consumer"] in seen["group.listed"]
    assert seen["group.state"] == [["Stable"]]
    assert seen["group.type"] == [["Classic"]]
    assert seen["group.assignor"] == [["range"]]
    assert seen["group.coordinator"] == [[seen["cluster.controller"][0][0]]]
    [(member, client, assignment)] = seen["group.member"]
    assert member.startswith(client + "-")
    assert assignment == ",".join(f"{TOPIC}:{p}" for p in range(3))
    assert seen["group.offset"] == [[f"{TOPIC}:0", "8", "-"]]


def test_alter_and_delete_consumer_group_offsets(seen, broker):
    # while the member consumes the topic, Kafka refuses to drop its offsets
    assert seen["group.offset.delete_live"] == [["GroupSubscribedToTopicException"]]
    assert seen["group.offset.altered"] == [
        [f"{TOPIC}:0", "6", "-"],
        [f"{TOPIC}:2", "0", "set_by_admin"],
    ]
    assert seen["group.offset.deleted"] == [[f"{TOPIC}:2", "0", "set_by_admin"]]
    assert seen["group.state.after"] == [["Empty"]]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP})
    try:
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in range(3)], timeout=10)
        assert [(c.offset, c.metadata) for c in committed] == [
            (OFFSET_INVALID, None),
            (OFFSET_INVALID, None),
            (0, "set by admin"),
        ]
    finally:
        consumer.close()
