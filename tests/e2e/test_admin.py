"""Admin APIs through confluent-kafka's AdminClient and kafka-python's KafkaAdminClient: topics,
partitions, configs and their sources, DeleteRecords, the cluster, and the errors Kafka gives.

The module's broker sets ``log.retention.ms`` in its properties, so a topic's ``retention.ms``
comes from the static broker config unless the topic overrides it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonTopicPartition
from kafka import errors as kafka_errors
from kafka.admin import AlterConfigOp, ConfigResourceType
from kafka.admin import ConfigResource as KafkaPythonConfigResource

from odradek.testing import RunningBroker, running_broker

from .conftest import ADMIN_TIMEOUT_S

BROKER_RETENTION_MS = "7200000"
DEFAULT_SEGMENT_BYTES = "1073741824"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("admin"), log_retention_ms=BROKER_RETENTION_MS
    ) as running:
        yield running


# -- confluent-kafka ---------------------------------------------------------------------------


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def result(future: Future[Any]) -> Any:
    return future.result(timeout=ADMIN_TIMEOUT_S)


def error_code(future: Future[Any]) -> int:
    """The Kafka error code a failed admin future carries."""
    with pytest.raises(KafkaException) as failure:
        result(future)
    error = failure.value.args[0]
    assert isinstance(error, KafkaError)
    return error.code()


def create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> dict:
    return admin.create_topics(
        list(topics), operation_timeout=ADMIN_TIMEOUT_S, validate_only=validate_only
    )


def topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return result(future)


def values_and_sources(entries: dict[str, ConfigEntry], *names: str) -> dict[str, tuple]:
    return {n: (entries[n].value, ConfigSource(entries[n].source).name) for n in names}


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), partition=partition)
    assert producer.flush(ADMIN_TIMEOUT_S) == 0


def test_create_describe_and_delete_a_topic(admin, bootstrap, topic_name):
    futures = create(
        admin,
        NewTopic(
            topic_name,
            num_partitions=3,
            replication_factor=1,
            config={"retention.ms": "60000", "cleanup.policy": "compact"},
        ),
    )
    assert result(futures[topic_name]) is None

    (described,) = admin.describe_topics(TopicCollection([topic_name])).values()
    description = result(described)
    assert description.name == topic_name
    assert not description.is_internal
    assert [p.id for p in description.partitions] == [0, 1, 2]
    for p in description.partitions:
        assert p.leader.id == 1
        assert [n.id for n in p.replicas] == [1]
        assert [n.id for n in p.isr] == [1]

    entries = topic_configs(admin, topic_name)
    assert values_and_sources(
        entries, "retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes"
    ) == {
        "retention.ms": ("60000", "DYNAMIC_TOPIC_CONFIG"),
        "cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG"),
        "segment.bytes": (DEFAULT_SEGMENT_BYTES, "DEFAULT_CONFIG"),
        "max.message.bytes": ("1048588", "DEFAULT_CONFIG"),
    }
    assert not entries["retention.ms"].is_default
    assert entries["segment.bytes"].is_default

    deleted = admin.delete_topics([topic_name], operation_timeout=ADMIN_TIMEOUT_S)
    assert result(deleted[topic_name]) is None
    assert topic_name not in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    (gone,) = admin.describe_topics(TopicCollection([topic_name])).values()
    assert error_code(gone) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_a_topic_without_overrides_takes_the_broker_configs(admin, topic_name):
    result(create(admin, NewTopic(topic_name, num_partitions=1, replication_factor=1))[topic_name])
    entries = topic_configs(admin, topic_name)
    assert values_and_sources(entries, "retention.ms", "segment.bytes") == {
        "retention.ms": (BROKER_RETENTION_MS, "STATIC_BROKER_CONFIG"),
        "segment.bytes": (DEFAULT_SEGMENT_BYTES, "DEFAULT_CONFIG"),
    }


def test_describe_cluster_and_broker_configs(admin, broker):
    cluster = result(admin.describe_cluster(request_timeout=ADMIN_TIMEOUT_S))
    assert cluster.cluster_id
    assert cluster.controller.id == 1
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", broker.port)]

    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
    entries = result(future)
    assert values_and_sources(entries, "log.retention.ms", "num.partitions") == {
        "log.retention.ms": (BROKER_RETENTION_MS, "STATIC_BROKER_CONFIG"),
        "num.partitions": ("1", "DEFAULT_CONFIG"),
    }
    assert entries["log.dirs"].value == str(broker.data_dir)
    assert entries["log.dirs"].is_read_only


def op(name: str, value: str | None, operation: AlterConfigOpType) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=operation)


def test_incremental_alter_configs(admin, topic_name):
    result(
        create(
            admin,
            NewTopic(
                topic_name, 1, 1, config={"retention.ms": "60000", "max.message.bytes": "5000"}
            ),
        )[topic_name]
    )

    def alter(*entries: ConfigEntry) -> Future[Any]:
        resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=list(entries))
        (future,) = admin.incremental_alter_configs([resource]).values()
        return future

    result(
        alter(
            op("segment.bytes", "1048576", AlterConfigOpType.SET),
            op("retention.ms", None, AlterConfigOpType.DELETE),
            op("cleanup.policy", "compact", AlterConfigOpType.APPEND),
        )
    )
    entries = topic_configs(admin, topic_name)
    assert values_and_sources(
        entries, "segment.bytes", "retention.ms", "cleanup.policy", "max.message.bytes"
    ) == {
        "segment.bytes": ("1048576", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": (BROKER_RETENTION_MS, "STATIC_BROKER_CONFIG"),  # back to the broker's
        "cleanup.policy": ("delete,compact", "DYNAMIC_TOPIC_CONFIG"),
        "max.message.bytes": ("5000", "DYNAMIC_TOPIC_CONFIG"),  # untouched
    }

    result(alter(op("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)))
    assert topic_configs(admin, topic_name)["cleanup.policy"].value == "compact"

    unknown = alter(op("no.such.config", "1", AlterConfigOpType.SET))
    assert error_code(unknown) == KafkaError.INVALID_CONFIG
    invalid = alter(op("retention.ms", "soon", AlterConfigOpType.SET))
    assert error_code(invalid) == KafkaError.INVALID_CONFIG
    # A refused change changes nothing.
    assert topic_configs(admin, topic_name)["segment.bytes"].value == "1048576"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_legacy_alter_configs_replaces_all_overrides(admin, bootstrap, topic_name):
    result(create(admin, NewTopic(topic_name, 1, 1, config={"retention.ms": "60000"}))[topic_name])
    resource = ConfigResource(
        ResourceType.TOPIC, topic_name, set_config={"max.message.bytes": "2000"}
    )
    (future,) = admin.alter_configs([resource]).values()
    result(future)
    entries = topic_configs(admin, topic_name)
    assert values_and_sources(entries, "max.message.bytes", "retention.ms") == {
        "max.message.bytes": ("2000", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": (BROKER_RETENTION_MS, "STATIC_BROKER_CONFIG"),
    }

    # The new max.message.bytes is enforced on produce.
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    errors: list[KafkaError] = []
    producer.produce(topic_name, b"x" * 5000, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(ADMIN_TIMEOUT_S)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]

    unknown = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"no.such.config": "1"})
    (future,) = admin.alter_configs([unknown]).values()
    assert error_code(future) == KafkaError.INVALID_CONFIG


def test_create_partitions(admin, bootstrap, topic_name):
    result(create(admin, NewTopic(topic_name, num_partitions=2, replication_factor=1))[topic_name])
    (future,) = admin.create_partitions(
        [NewPartitions(topic_name, 5)], operation_timeout=ADMIN_TIMEOUT_S
    ).values()
    assert result(future) is None
    partitions = (
        admin.list_topics(topic_name, timeout=ADMIN_TIMEOUT_S).topics[topic_name].partitions
    )
    assert sorted(partitions) == [0, 1, 2, 3, 4]
    produce(bootstrap, topic_name, 3, partition=4)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        watermarks = consumer.get_watermark_offsets(TopicPartition(topic_name, 4), ADMIN_TIMEOUT_S)
        assert watermarks == (0, 3)
    finally:
        consumer.close()

    for count in (5, 3):  # the same count, or fewer: Kafka only adds partitions
        (future,) = admin.create_partitions([NewPartitions(topic_name, count)]).values()
        assert error_code(future) == KafkaError.INVALID_PARTITIONS
    (future,) = admin.create_partitions([NewPartitions("no-such-topic", 4)]).values()
    assert error_code(future) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_records_and_list_offsets(admin, bootstrap, topic_name):
    result(create(admin, NewTopic(topic_name, num_partitions=2, replication_factor=1))[topic_name])
    produce(bootstrap, topic_name, 10)
    tp = TopicPartition(topic_name, 0, 4)
    (future,) = admin.delete_records([tp], operation_timeout=ADMIN_TIMEOUT_S).values()
    assert result(future).low_watermark == 4

    specs = {
        TopicPartition(topic_name, 0): OffsetSpec.earliest(),
        TopicPartition(topic_name, 1): OffsetSpec.latest(),
    }
    listed = {tp.partition: result(f).offset for tp, f in admin.list_offsets(specs).items()}
    assert listed == {0: 4, 1: 0}
    (latest,) = admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.latest()}).values()
    assert result(latest).offset == 10

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        assert consumer.get_watermark_offsets(
            TopicPartition(topic_name, 0), ADMIN_TIMEOUT_S, cached=False
        ) == (4, 10)
        consumer.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while len(got) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.value()))
        assert got == [(i, f"m{i}".encode()) for i in range(4, 10)]
    finally:
        consumer.close()

    # Up to the high watermark (-1) empties the partition; beyond it is out of range.
    (future,) = admin.delete_records([TopicPartition(topic_name, 0, -1)]).values()
    assert result(future).low_watermark == 10
    (future,) = admin.delete_records([TopicPartition(topic_name, 0, 11)]).values()
    assert error_code(future) == KafkaError.OFFSET_OUT_OF_RANGE


def test_validate_only_creates_nothing(admin, topic_name):
    futures = create(admin, NewTopic(topic_name, 2, 1), validate_only=True)
    assert result(futures[topic_name]) is None
    assert topic_name not in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics


def test_describing_an_unknown_topic_does_not_create_it(admin, topic_name):
    (future,) = admin.describe_topics(TopicCollection([topic_name])).values()
    assert error_code(future) == KafkaError.UNKNOWN_TOPIC_OR_PART
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic_name)]).values()
    assert error_code(future) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic_name not in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics


def test_topic_errors(admin, topic_name):
    result(create(admin, NewTopic(topic_name, 1, 1))[topic_name])
    assert error_code(create(admin, NewTopic(topic_name, 1, 1))[topic_name]) == (
        KafkaError.TOPIC_ALREADY_EXISTS
    )
    none = f"{topic_name}-p0"
    failed = create(admin, NewTopic(none, num_partitions=0, replication_factor=1))[none]
    assert error_code(failed) == KafkaError.INVALID_PARTITIONS
    rf3 = f"{topic_name}-rf3"
    assert error_code(create(admin, NewTopic(rf3, 1, replication_factor=3))[rf3]) == (
        KafkaError.INVALID_REPLICATION_FACTOR
    )
    bad = f"{topic_name}-bad-config"
    assert error_code(create(admin, NewTopic(bad, 1, 1, config={"no.such.config": "1"}))[bad]) == (
        KafkaError.INVALID_CONFIG
    )
    assert error_code(create(admin, NewTopic(bad, 1, 1, config={"retention.ms": "x"}))[bad]) == (
        KafkaError.INVALID_CONFIG
    )
    assert error_code(admin.delete_topics(["no-such-topic"])["no-such-topic"]) == (
        KafkaError.UNKNOWN_TOPIC_OR_PART
    )
    # Nothing was created by the failed attempts.
    topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    assert topic_name in topics
    assert rf3 not in topics
    assert none not in topics
    assert bad not in topics


# -- kafka-python ------------------------------------------------------------------------------


@pytest.fixture
def kp_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=ADMIN_TIMEOUT_S * 1000
    )
    try:
        yield client
    finally:
        client.close()


def kp_topic_configs(kp_admin: KafkaAdminClient, topic: str, **kwargs: Any) -> dict[str, dict]:
    described = kp_admin.describe_configs(
        [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all", **kwargs
    )
    return described["topic"][topic]


def test_kafka_python_topic_lifecycle(kp_admin, broker, topic_name):
    created = kp_admin.create_topics(
        {
            topic_name: {
                "num_partitions": 2,
                "replication_factor": 1,
                "configs": {"retention.ms": "60000"},
            }
        }
    )
    (entry,) = created["topics"]
    assert (entry["name"], entry["error_code"], entry["num_partitions"]) == (topic_name, 0, 2)

    (described,) = kp_admin.describe_topics([topic_name])
    assert described["name"] == topic_name
    assert described["error_code"] == 0
    assert [
        (p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
        for p in described["partitions"]
    ] == [(0, 1, [1], [1]), (1, 1, [1], [1])]
    assert topic_name in kp_admin.list_topics()

    cluster = kp_admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (1, "127.0.0.1", broker.port)
    ]

    configs = kp_topic_configs(kp_admin, topic_name, include_synonyms=True)
    assert configs["retention.ms"]["value"] == "60000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert [(s["name"], s["value"], s["source"]) for s in configs["retention.ms"]["synonyms"]] == [
        ("retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG"),
        ("log.retention.ms", BROKER_RETENTION_MS, "STATIC_BROKER_CONFIG"),
        ("log.retention.ms", "604800000", "DEFAULT_CONFIG"),
    ]
    assert (configs["segment.bytes"]["value"], configs["segment.bytes"]["config_source"]) == (
        DEFAULT_SEGMENT_BYTES,
        "DEFAULT_CONFIG",
    )
    modified = kp_admin.describe_configs(
        [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic_name)]
    )["topic"][topic_name]
    assert set(modified) == {"retention.ms"}

    kp_admin.create_partitions({topic_name: 4})
    (described,) = kp_admin.describe_topics([topic_name])
    assert [p["partition_index"] for p in described["partitions"]] == [0, 1, 2, 3]

    kp_admin.delete_topics([topic_name])
    assert topic_name not in kp_admin.list_topics()


def test_kafka_python_alter_configs(kp_admin, topic_name):
    kp_admin.create_topics(
        {
            topic_name: {
                "num_partitions": 1,
                "replication_factor": 1,
                "configs": {"retention.ms": "60000"},
            }
        }
    )

    def alter(configs: dict[str, Any], **kwargs: Any) -> str:
        resource = KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic_name, configs=configs)
        return kp_admin.alter_configs([resource], **kwargs)["topic"][topic_name]

    assert alter({"segment.bytes": "1048576"}, incremental=True) == "OK"
    assert alter({"cleanup.policy": (AlterConfigOp.APPEND, "compact")}, incremental=True) == "OK"
    configs = kp_topic_configs(kp_admin, topic_name)
    assert {
        n: configs[n]["value"] for n in ("segment.bytes", "retention.ms", "cleanup.policy")
    } == {
        "segment.bytes": "1048576",
        "retention.ms": "60000",
        "cleanup.policy": "delete,compact",
    }

    assert alter({"retention.ms": (AlterConfigOp.DELETE, None)}, incremental=True) == "OK"
    configs = kp_topic_configs(kp_admin, topic_name)
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["config_source"]) == (
        BROKER_RETENTION_MS,
        "STATIC_BROKER_CONFIG",
    )

    # Legacy AlterConfigs: kafka-python re-sends the other overrides, since the request
    # replaces them all.
    assert alter({"max.message.bytes": "3000"}, incremental=False) == "OK"
    configs = kp_topic_configs(kp_admin, topic_name)
    assert {
        n: configs[n]["value"] for n in ("max.message.bytes", "segment.bytes", "cleanup.policy")
    } == {
        "max.message.bytes": "3000",
        "segment.bytes": "1048576",
        "cleanup.policy": "delete,compact",
    }

    # The broker itself refuses unknown names (raise_on_unknown=False skips the client's check).
    refused = alter({"no.such.config": "1"}, incremental=True, raise_on_unknown=False)
    assert "InvalidConfigurationError" in refused
    refused = alter({"no.such.config": "1"}, incremental=False, raise_on_unknown=False)
    assert "InvalidConfigurationError" in refused


def test_kafka_python_delete_records(kp_admin, bootstrap, topic_name):
    kp_admin.create_topics({topic_name: {"num_partitions": 1, "replication_factor": 1}})
    produce(bootstrap, topic_name, 8)
    tp = KafkaPythonTopicPartition(topic_name, 0)
    deleted = kp_admin.delete_records({tp: 5})
    assert deleted[tp]["low_watermark"] == 5
    assert deleted[tp]["error_code"] == 0
    with pytest.raises(kafka_errors.OffsetOutOfRangeError):
        kp_admin.delete_records({tp: 100})


def test_kafka_python_errors(kp_admin, topic_name):
    kp_admin.create_topics({topic_name: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kafka_errors.TopicAlreadyExistsError):
        kp_admin.create_topics({topic_name: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        kp_admin.create_topics({f"{topic_name}-p0": {"num_partitions": 0, "replication_factor": 1}})
    with pytest.raises(kafka_errors.InvalidReplicationFactorError):
        kp_admin.create_topics(
            {f"{topic_name}-rf3": {"num_partitions": 1, "replication_factor": 3}}
        )
    with pytest.raises(kafka_errors.InvalidConfigurationError):
        kp_admin.create_topics(
            {f"{topic_name}-cfg": {"num_partitions": 1, "configs": {"no.such.config": "1"}}}
        )
    with pytest.raises(kafka_errors.InvalidPartitionsError):
        kp_admin.create_partitions({topic_name: 1})
    with pytest.raises(kafka_errors.UnknownTopicOrPartitionError):
        kp_admin.delete_topics(["no-such-topic"])
    with pytest.raises(kafka_errors.InvalidTopicError):
        kp_admin.create_topics({"bad/name": {"num_partitions": 1}})

    # Partition count and replication factor left out (-1) take the broker's defaults.
    kp_admin.create_topics([f"{topic_name}-defaults"])
    (described,) = kp_admin.describe_topics([f"{topic_name}-defaults"])
    assert len(described["partitions"]) == 1
    leftovers = {f"{topic_name}-p0", f"{topic_name}-rf3", f"{topic_name}-cfg"}
    assert not leftovers & set(kp_admin.list_topics())
