"""The web console in a real browser (Debian's chromium, headless, driven by playwright-core)
against a real broker serving it on ``metrics.listener``: every page and every action, what the
page shows checked against what was produced, and each change checked over the Kafka protocol.
A second broker with ACLs shows a console principal without ALTER the cluster's refusal."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition

from odradek.client.acls import AclAdmin
from odradek.client.admin import EARLIEST, ClusterAdmin
from odradek.client.data import DataClient
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from odradek.security.client_settings import ClientSecurity
from odradek.testing import RunningBroker

from .support import (
    BASE_TIMESTAMP_MS,
    BackgroundProducer,
    commit,
    committed,
    drive,
    http,
    produce_records,
    require_browser,
)


@pytest.fixture(autouse=True)
def _browser() -> None:
    require_browser()


TOPIC = "orders"
RECORDS = 10


def console_base(broker: RunningBroker) -> str:
    assert broker.broker is not None and broker.broker.metrics is not None
    host, port = broker.broker.metrics.bound
    return f"http://{host}:{port}"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    running = RunningBroker(
        tmp_path / "data", {"metrics.listener": "127.0.0.1:0", "num.partitions": "1"}
    ).start()
    try:
        yield running
    finally:
        running.stop()


def joined_consumer(bootstrap: str, group: str) -> Consumer:
    """A consumer (confluent-kafka) that has joined ``group`` with every partition of the
    topic, and committed offset 4 of partition 0. It heartbeats on librdkafka's thread, so it
    stays a member while the browser works."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "console-test-member",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer was given no partitions"
        consumer.poll(0.2)
    consumer.commit(offsets=[KafkaPartition(TOPIC, 0, 4)], asynchronous=False)
    return consumer


def test_every_page_and_action(broker: RunningBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap

    async def create() -> None:
        async with await ClusterAdmin.connect(bootstrap) as admin:
            await admin.create_topic(TOPIC, 3, 1, {"retention.ms": "86400000"})
            await admin.create_topic("live", 1, 1)

    asyncio.run(create())
    with DataClient(bootstrap) as client:
        produce_records(client, TOPIC, 0, RECORDS)
    groups = [
        ("g-earliest", "earliest", None),
        ("g-offset", "offset", 7),
        ("g-timestamp", "timestamp", BASE_TIMESTAMP_MS + 5000),
        ("g-shift", "shift", -2),
    ]
    for group, _, _ in groups:
        commit(bootstrap, group, {(TOPIC, 0): 9, (TOPIC, 1): 0})

    member = joined_consumer(bootstrap, "g-live")
    try:
        with BackgroundProducer(bootstrap, "live") as load:
            seen = drive(
                "full",
                console_base(broker),
                tmp_path / "every-page",
                topic=TOPIC,
                live_topic="live",
                groups=groups,
                records={"count": RECORDS, "timestamp_of_5": BASE_TIMESTAMP_MS + 5000},
                member_group="g-live",
            )
    finally:
        member.close()
    assert load.written > 0

    # Brokers: the one broker, shown as the controller.
    assert seen["brokers"] == [1]
    assert seen["controller_shown"] == 1
    # Topics: the row of the topic, the refusal of a bad name, the topic made and deleted.
    assert seen["topic_row"][:3] == [TOPIC, "3", "1"]
    assert "is not a topic name" in seen["bad_name_error"]
    assert seen["create"] == {"error": None, "notice": "Created topic console-made."}
    assert seen["delete_topic"] == {"error": None, "notice": "Deleted topic console-made."}
    assert "console-made" not in seen["topics_after_delete"]
    # Partitions: leader 1, replicas and ISR [1], offsets 0..10 on partition 0.
    assert [row[:7] for row in seen["partitions"]] == [
        ["0", "1", "0", "1", "1", "0", str(RECORDS)],
        ["1", "1", "0", "1", "1", "0", "0"],
        ["2", "1", "0", "1", "1", "0", "0"],
    ]
    # A config altered, shown, and as the cluster has it.
    assert seen["alter"]["error"] is None
    assert seen["retention_shown"] == "7200000"
    # Records as produced: keys, values, headers; JSON pretty-printed; hex; from a timestamp.
    assert [row[0] for row in seen["text_rows"]] == [str(i) for i in range(RECORDS)]
    assert [row[2] for row in seen["text_rows"]] == [f"k{i}" for i in range(RECORDS)]
    assert seen["text_rows"][3][3] == '{"n": 3, "name": "record 3"}'
    assert seen["text_rows"][0][4] == "source: console-test"
    assert seen["json_first_value"] == '{\n  "n": 0,\n  "name": "record 0"\n}'
    assert seen["hex_first_value"].startswith("7b 22 6e 22 3a 20 30")  # {"n": 0
    assert [row[0] for row in seen["timestamp_rows"]] == ["5", "6", "7"]
    # Records deleted below offset 3: the page shows it, and ListOffsets agrees.
    assert seen["delete_records"]["error"] is None, seen["delete_records"]
    assert "the log now starts at offset 3" in seen["delete_records"]["notice"]
    assert seen["partition0_after_delete"][5] == "3"
    # Groups: each reset as asked, shown, and committed (checked with OffsetFetch).
    assert {"g-earliest", "g-offset", "g-timestamp", "g-shift"} <= set(seen["groups"])
    expected = {
        "g-earliest": {(TOPIC, 0): 3, (TOPIC, 1): 0},
        "g-offset": {(TOPIC, 0): 7, (TOPIC, 1): 0},
        "g-timestamp": {(TOPIC, 0): 5, (TOPIC, 1): 0},
        "g-shift": {(TOPIC, 0): 7, (TOPIC, 1): 0},
    }
    for group, offsets in expected.items():
        reset = seen["resets"][group]
        assert reset["outcome"]["error"] is None, reset
        assert [(r[0], int(r[1]), int(r[3])) for r in reset["plan"]] == [
            (t, p, o) for (t, p), o in sorted(offsets.items())
        ]
        assert [(r[0], int(r[1]), int(r[2])) for r in reset["after"]] == [
            (t, p, o) for (t, p), o in sorted(offsets.items())
        ]
        assert committed(bootstrap, group) == offsets

    async def state() -> tuple[dict[tuple[str, int], int], dict[str, str]]:
        async with await ClusterAdmin.connect(bootstrap) as admin:
            starts = await admin.list_offsets([(TOPIC, 0)], EARLIEST)
            configs = (await admin.topic_configs([TOPIC]))[TOPIC]
            topics = {t.name for t in (await admin.describe_cluster()).topics}
            assert "console-made" not in topics
            return starts, configs

    starts, configs = asyncio.run(state())
    assert starts == {(TOPIC, 0): 3}
    assert configs["retention.ms"] == "7200000"
    # A group with a member: the member and its assignment shown; a reset refused, as Kafka
    # refuses to move the offsets of a group with active members.
    ((member_id, _, client_id, _, assignment, pushed),) = seen["members"]
    assert member_id.startswith("console-test-member")
    assert pushed == "\u2013"  # an en dash: its client pushes no metrics (KIP-714)
    assert client_id == "console-test-member"
    assert assignment == f"{TOPIC}-0, {TOPIC}-1, {TOPIC}-2"
    assert "active members" in seen["member_group_reset"]["error"]
    assert committed(bootstrap, "g-live") == {(TOPIC, 0): 4}
    # Live rates: the records written while the page sampled.
    assert float(seen["live_rate"]) > 0
    # The page weight of a first load, reported by the run (a few requests, small).
    assert seen["first_load"]["bytes"] > 0
    print(f"console first load: {seen['first_load']}")


JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_viewer="viewer-secret";'
)


def test_a_console_principal_without_alter_sees_the_refusal(tmp_path: Path) -> None:
    client_config = tmp_path / "console.properties"
    client_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="viewer" password="viewer-secret";\n'
    )
    settings = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "num.partitions": "1",
        "metrics.listener": "127.0.0.1:0",
        "console.client.config": str(client_config),
    }
    broker = RunningBroker(tmp_path / "data", settings).start()
    admin_security = ClientSecurity(
        "SASL_PLAINTEXT", mechanism="PLAIN", username="admin", password="admin-secret"
    )

    def allow(resource: ResourceType, operation: AclOperation) -> AclBinding:
        return AclBinding(
            ResourcePattern(
                resource,
                "*" if resource != ResourceType.CLUSTER else "kafka-cluster",
                PatternType.LITERAL,
            ),
            AccessControlEntry("User:viewer", "*", operation, AclPermissionType.ALLOW),
        )

    async def setup() -> None:
        async with await ClusterAdmin.connect(broker.bootstrap, security=admin_security) as admin:
            await admin.create_topic(TOPIC, 1, 1, {"retention.ms": "86400000"})
            await admin.create_topic("locked", 1, 1)
        async with await AclAdmin.connect(broker.bootstrap, security=admin_security) as acls:
            await acls.create(
                [
                    allow(ResourceType.TOPIC, AclOperation.DESCRIBE),
                    allow(ResourceType.TOPIC, AclOperation.DESCRIBE_CONFIGS),
                    allow(ResourceType.TOPIC, AclOperation.READ),
                    allow(ResourceType.CLUSTER, AclOperation.DESCRIBE),
                    AclBinding(
                        ResourcePattern(ResourceType.TOPIC, "locked", PatternType.LITERAL),
                        AccessControlEntry(
                            "User:viewer",
                            "*",
                            AclOperation.DESCRIBE_CONFIGS,
                            AclPermissionType.DENY,
                        ),
                    ),
                ]
            )

    try:
        asyncio.run(setup())
        seen = drive("acl", console_base(broker), tmp_path / "acl-refusal", topic=TOPIC)
        # A topic whose configs the principal may not describe still shows its partitions.
        locked = http(console_base(broker), "GET", "/api/topics/locked")

        async def after() -> dict[str, str]:
            async with await ClusterAdmin.connect(
                broker.bootstrap, security=admin_security
            ) as admin:
                return (await admin.topic_configs([TOPIC]))[TOPIC]

        configs = asyncio.run(after())
    finally:
        broker.stop()
    assert "topic_authorization_failed" in seen["delete_topic"]["error"]
    assert "HTTP 403" in seen["delete_topic"]["error"]
    assert "authorization_failed" in seen["alter"]["error"]
    assert configs["retention.ms"] == "86400000"  # refused, so unchanged
    assert locked.status == 200
    assert [p["leader"] for p in locked.body["partitions"]] == [1]
    assert "topic_authorization_failed" in locked.body["configs_error"]
