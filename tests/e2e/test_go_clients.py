"""Go clients of Kafka's old protocol versions against a real odradek broker over real sockets.

The programs of tests/go drive the versions Debian bookworm packages: sarama 1.22.1 (whose
``config.Version`` picks the request versions: 0.8.2 sends Produce v0 and Fetch v0 with message
format v0, OffsetCommit v1 and ListOffsets v0; 0.10.0 Produce v2 and Fetch v2 with message format
v1; 0.11 and later RecordBatch v2, with maxTimestamp left at -1; its ClusterAdmin sends
DescribeConfigs v0 and the ACL APIs v0) and kafka-go 0.2.1 (Produce v2 and Fetch v2, a group with
OffsetCommit v2). Every connection passes through a
recording proxy, so each test also shows which request versions the client really sent; with
``ODRADEK_CAPTURE=1`` the frames are written to tests/protocol/captured (its README).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from odradek.testing import RunningBroker
from tests.go.programs import program

from .conftest import stored_codecs, stored_max_timestamps
from .recording_proxy import RecordingProxy, proxied_broker, record_captures

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
JOIN_GROUP, SYNC_GROUP, CREATE_TOPICS, DESCRIBE_CONFIGS = 11, 14, 19, 32
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
SARAMA, KAFKA_GO = "sarama 1.22.1", "kafka-go 0.2.1"
# the client ids the programs send (the tests' own clients pass the same proxy)
SARAMA_ID, KAFKA_GO_ID = "odradek-sarama-test", "odradek-kafka-go-test"
RUN_TIMEOUT_S = 90

# sarama's config.Version → the Produce and Fetch versions it sends (sarama's own tables)
SARAMA_VERSIONS = {
    "0.8.2.2": (0, 0),
    "0.10.0.0": (2, 2),
    "0.10.2.0": (2, 3),
    "0.11.0.0": (3, 4),
    "2.0.0": (3, 4),
}
CODECS = ["none", "gzip", "snappy", "lz4"]


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RecordingProxy, Any]]:
    with proxied_broker(tmp_path_factory.mktemp("go")) as both:
        yield both


@pytest.fixture(scope="module")
def broker(proxied: tuple[RecordingProxy, RunningBroker]) -> RunningBroker:
    """The broker behind the proxy (``make_topic`` uses it too)."""
    return proxied[1]


@pytest.fixture
def recorded(proxied: tuple[RecordingProxy, RunningBroker]) -> RecordingProxy:
    """The proxy, with only this test's frames."""
    proxied[0].clear()
    return proxied[0]


def run(name: str, command: str, proxy: RecordingProxy, **flags: Any) -> list[dict[str, Any]]:
    """Run a Go program's subcommand against the broker through the proxy; its JSON lines."""
    args = [f"-{k.replace('_', '-')}={v}" for k, v in flags.items()]
    done = subprocess.run(
        [str(program(name)), f"-brokers={proxy.address}", *args, command],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{name} {command} {args} failed:\n{done.stderr}"
    return [json.loads(line) for line in done.stdout.splitlines() if line]


def capture(
    proxy: RecordingProxy, name: str, client: str, topics: dict[str, int], codec: str = "none"
) -> None:
    """Keep this test's frames of the Go program (``ODRADEK_CAPTURE``): all of them, or with a
    codec, its compressed Produce requests alone; a Fetch keeps the Produce requests it read."""
    frames = proxy.sent_by(KAFKA_GO_ID if name == "kafka_go" else SARAMA_ID)
    produced = [f for f in frames if f[:2] == PRODUCE.to_bytes(2, "big")]
    if codec != "none":
        frames = produced
    variant = "" if codec == "none" else codec
    record_captures(name, client, frames, topics, variant, {FETCH: produced})


def committed(bootstrap: str, group: str, topic: str, partition: int = 0) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(TopicPartition(topic, partition))
    finally:
        consumer.close()


def release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def sent(count: int, first: int = 0) -> list[tuple[str, str]]:
    return [(f"k{i}", f"v{i}") for i in range(first, first + count)]


@pytest.mark.parametrize(
    ("version", "codec"),
    [
        (version, codec)
        for version in sorted(SARAMA_VERSIONS, key=release)
        for codec in CODECS
        # sarama refuses LZ4 below Kafka 0.10 (its config check)
        if codec != "lz4" or release(version) >= (0, 10)
    ],
)
def test_sarama_produces_and_consumes(broker, recorded, make_topic, topic_name, version, codec):
    topic = make_topic(topic_name, partitions=2)
    produced = run(
        "saramaclient",
        "produce",
        recorded,
        version=version,
        topic=topic,
        partition=1,
        count=25,
        codec=codec,
    )
    assert [(r["partition"], r["offset"]) for r in produced] == [(1, i) for i in range(25)]
    assert stored_codecs(broker, topic, 1) == {codec}

    got = run(
        "saramaclient",
        "consume",
        recorded,
        version=version,
        topic=topic,
        partition=1,
        offset=5,
        count=20,
    )
    assert [(r["offset"], r["key"], r["value"]) for r in got] == [
        (i, k, v) for i, (k, v) in enumerate(sent(25)) if i >= 5
    ]
    if release(version) >= (0, 10):  # message format v1 and later carry timestamps
        assert [r["timestamp"] for r in got] == [1_700_000_000_000 + i for i in range(5, 25)]
    produce_version, fetch_version = SARAMA_VERSIONS[version]
    assert {(PRODUCE, produce_version), (FETCH, fetch_version)} <= set(recorded.requests(SARAMA_ID))
    capture(recorded, "sarama", f"{SARAMA} version={version} codec={codec}", {topic: 2}, codec)


def test_sarama_zstd_in_produce_v3_is_refused_as_kafka_refuses_it(recorded, make_topic, topic_name):
    """sarama 1.22 sends zstd batches in Produce v3 (1.23 moved to v7): KIP-110 has Kafka
    answer UNSUPPORTED_COMPRESSION_TYPE below v7, and nothing is stored."""
    topic = make_topic(topic_name)
    done = subprocess.run(
        [
            str(program("saramaclient")),
            f"-brokers={recorded.address}",
            "-version=2.1.0",
            f"-topic={topic}",
            "-codec=zstd",
            "-count=3",
            "produce",
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1
    assert "does not support the compression type" in done.stderr
    assert (PRODUCE, 3) in recorded.requests(SARAMA_ID)
    consumer = KafkaConsumer(bootstrap_servers=recorded.address)
    try:
        assert consumer.end_offsets([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 0}
    finally:
        consumer.close()


@pytest.mark.parametrize("version", ["0.10.0.0", "0.11.0.0", "2.0.0"])
def test_sarama_records_are_found_by_time(broker, recorded, make_topic, topic_name, version):
    """sarama 1.22 leaves RecordBatch v2's maxTimestamp at -1; as Kafka does, the broker takes
    it from the records, so ListOffsets by time and the time index find them."""
    topic = make_topic(topic_name)
    run("saramaclient", "produce", recorded, version=version, topic=topic, count=25)
    stored = stored_max_timestamps(broker, topic)  # a batch or two, as sarama sent them
    assert stored[-1] == 1_700_000_000_024
    assert all(1_700_000_000_000 <= t <= 1_700_000_000_024 for t in stored), stored
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=recorded.address)
    try:
        found = consumer.offsets_for_times({tp: 1_700_000_000_010})[tp]
        assert (found.offset, found.timestamp) == (10, 1_700_000_000_010)
        assert consumer.offsets_for_times({tp: 1_700_000_000_025}) == {tp: None}
    finally:
        consumer.close()


@pytest.mark.parametrize("version", ["0.10.2.0", "2.0.0"])
def test_sarama_group_commits_and_resumes(recorded, make_topic, topic_name, version):
    topic = make_topic(topic_name)
    group = f"{topic_name}-group"
    run("saramaclient", "produce", recorded, version=version, topic=topic, count=10)

    first = run(
        "saramaclient", "group", recorded, version=version, topic=topic, group=group, count=6
    )
    assert [(r["offset"], r["value"]) for r in first] == [(i, f"v{i}") for i in range(6)]
    assert committed(recorded.address, group, topic) == 6
    second = run(
        "saramaclient", "group", recorded, version=version, topic=topic, group=group, count=4
    )
    assert [(r["offset"], r["value"]) for r in second] == [(i, f"v{i}") for i in range(6, 10)]
    assert committed(recorded.address, group, topic) == 10
    requests = {key for key, _ in recorded.requests(SARAMA_ID)}
    assert {JOIN_GROUP, SYNC_GROUP, OFFSET_COMMIT, OFFSET_FETCH} <= requests
    capture(recorded, "sarama", f"{SARAMA} version={version} consumer group", {topic: 1})


def test_two_sarama_members_share_a_group(recorded, make_topic, topic_name):
    """Two members of one group, started together, split four partitions between them however
    the rebalances fall: each takes 20 records and commits them, and together they read all
    40 once (commits made during a rebalance count, as Kafka counts them)."""
    version = "2.0.0"
    topic = make_topic(topic_name, partitions=4)
    group = f"{topic_name}-group"
    for partition in range(4):
        run(
            "saramaclient",
            "produce",
            recorded,
            version=version,
            topic=topic,
            partition=partition,
            count=10,
        )
    args = [
        str(program("saramaclient")),
        f"-brokers={recorded.address}",
        f"-version={version}",
        f"-topic={topic}",
        f"-group={group}",
        "-count=20",
        "-timeout=60s",
        "group",
    ]
    members = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [member.communicate(timeout=RUN_TIMEOUT_S) for member in members]
    for member, (_, err) in zip(members, outputs, strict=True):
        assert member.returncode == 0, err
    read = [
        (r["partition"], r["offset"], r["value"])
        for out, _ in outputs
        for r in map(json.loads, out.splitlines())
    ]
    assert sorted(read) == [(p, i, f"v{i}") for p in range(4) for i in range(10)]
    assert [committed(recorded.address, group, topic, p) for p in range(4)] == [10] * 4


@pytest.mark.parametrize("version", ["0.8.2.2", "0.10.0.0"])
def test_sarama_commits_outside_a_group(recorded, make_topic, topic_name, version):
    """sarama's OffsetManager commits with OffsetCommit v1 (generation -1, no member) and reads
    back with OffsetFetch v1."""
    topic = make_topic(topic_name, partitions=3)
    group = f"{topic_name}-offsets"
    run("saramaclient", "produce", recorded, version=version, topic=topic, partition=2, count=10)

    def offsets(command: str, **flags: Any) -> list[dict[str, Any]]:
        return run(
            "saramaclient",
            command,
            recorded,
            version=version,
            topic=topic,
            group=group,
            partition=2,
            **flags,
        )

    assert offsets("committed") == [{"offset": -1, "metadata": ""}]  # none yet: OffsetNewest
    offsets("commit", offset=7)
    assert offsets("committed") == [{"offset": 7, "metadata": "committed by sarama"}]
    assert committed(recorded.address, group, topic, 2) == 7
    assert {(OFFSET_COMMIT, 1), (OFFSET_FETCH, 1)} <= set(recorded.requests(SARAMA_ID))
    capture(recorded, "sarama", f"{SARAMA} version={version} offset manager", {topic: 3})


def test_sarama_admin_creates_a_topic_and_describes_its_configs(recorded, topic_name):
    version = "1.0.0"
    run("saramaclient", "create-topic", recorded, version=version, topic=topic_name, count=3)
    entries = run("saramaclient", "describe-configs", recorded, version=version, topic=topic_name)
    by_name = {e["name"]: e for e in entries}
    assert by_name["retention.ms"]["value"] == "3600000"
    assert by_name["retention.ms"]["default"] is False
    assert by_name["cleanup.policy"] == {
        "name": "cleanup.policy",
        "value": "delete",
        "read_only": False,
        "default": True,
    }
    assert (DESCRIBE_CONFIGS, 0) in recorded.requests(SARAMA_ID)
    assert CREATE_TOPICS in {key for key, _ in recorded.requests(SARAMA_ID)}
    capture(recorded, "sarama", f"{SARAMA} version={version} cluster admin", {topic_name: 3})


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingProxy]:
    """The proxy of a broker with Kafka's authorizer, whose unauthenticated clients (the
    test's) are super users."""
    with proxied_broker(
        tmp_path_factory.mktemp("go-acls"),
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
        super_users="User:ANONYMOUS",
    ) as (proxy, _):
        yield proxy


def test_sarama_admin_creates_lists_and_deletes_acls(secured, topic_name):
    """sarama 1.22's ACL calls are v0 (no pattern type: LITERAL, as Kafka 3.9 reads them)."""
    proxy: RecordingProxy = secured
    steps = run("saramaclient", "acls", proxy, version="2.0.0", topic=topic_name)
    topic, group, read, allow = 2, 3, 3, 3  # Kafka's codes: resource types, READ, ALLOW
    acl = {"principal": "User:alice", "host": "*", "operation": read, "permission": allow}
    by_step: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        by_step.setdefault(step.pop("step"), []).append(step)
    assert sorted(by_step["created"], key=lambda a: a["resource_type"]) == [
        {"resource_type": topic, "name": topic_name, **acl},
        {"resource_type": group, "name": topic_name, **acl},
    ]
    assert by_step["deleted"] == [
        {"resource_type": topic, "name": topic_name, "principal": "User:alice", "operation": read}
    ]
    assert by_step["left"] == [{"resource_type": group, "name": topic_name, **acl}]
    assert {(DESCRIBE_ACLS, 0), (CREATE_ACLS, 0), (DELETE_ACLS, 0)} <= set(
        proxy.requests(SARAMA_ID)
    )
    capture(proxy, "sarama", f"{SARAMA} version=2.0.0 ACLs", {})


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_go_writer_and_group_reader(broker, recorded, make_topic, topic_name, codec):
    topic = make_topic(topic_name)
    group = f"{topic_name}-group"
    run("kafkagoclient", "write", recorded, topic=topic, count=30, codec=codec)
    assert stored_codecs(broker, topic) == {codec}

    got = run("kafkagoclient", "read", recorded, topic=topic, group=group, count=30)
    assert [(r["partition"], r["offset"], r["key"], r["value"]) for r in got] == [
        (0, i, k, v) for i, (k, v) in enumerate(sent(30))
    ]
    assert [r["timestamp"] for r in got] == [1_700_000_000_000 + i for i in range(30)]
    assert committed(recorded.address, group, topic) == 30
    assert {(PRODUCE, 2), (FETCH, 2)} <= set(recorded.requests(KAFKA_GO_ID))
    assert {JOIN_GROUP, SYNC_GROUP, OFFSET_COMMIT} <= {
        key for key, _ in recorded.requests(KAFKA_GO_ID)
    }
    capture(recorded, "kafka_go", f"{KAFKA_GO} codec={codec}", {topic: 1}, codec)
