"""Kafka's Java ``KafkaShareConsumer`` (KIP-932) and ``kafka-share-groups`` against one broker:
two share consumers split a 4-partition topic, RELEASE redelivers with a higher delivery count,
REJECT never again, RENEW (Kafka 4.4, KIP-1222) keeps the record with its consumer in the same
delivery; the tool describes the group and resets its offsets."""

from __future__ import annotations

import asyncio
import subprocess
from collections import defaultdict

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from odradek.client.admin import GroupAdmin
from odradek.testing import wait_until

from .support import TIMEOUT_S, create_topic, java_command, run_java

SHARE_GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def earliest(bootstrap: str, group: str) -> None:
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)


def value_of(i: int) -> str:
    return ("release", "reject", "renew", "accept")[i % 4] + str(i)


def assigned(bootstrap: str, group: str) -> list[int]:
    """How many partitions each member of share group ``group`` is assigned."""

    async def describe() -> list[int]:
        async with await GroupAdmin.connect(bootstrap, timeout_s=TIMEOUT_S) as admin:
            group_info = await admin.describe_group(group)
        return [len(member.assignment) for member in group_info.members]

    return asyncio.run(describe())


def test_two_java_share_consumers_release_and_reject(bootstrap: str) -> None:
    topic, group = "java-share", "java-share-group"
    create_topic(bootstrap, topic, partitions=4)
    earliest(bootstrap, group)
    # Between them they accept 30 records (the released ones on their second delivery, the
    # renewed ones when the consumer hands them out again).
    consumers = [
        subprocess.Popen(
            java_command("JavaShareConsumer", bootstrap, topic, group, "30", "15000"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    # The records come once both members hold their partitions: a partition that moves to the
    # member joining second takes the records the first still holds there with it (released,
    # delivered again with a higher count), a renewed one included.
    wait_until(
        lambda: sorted(assigned(bootstrap, group)) == [2, 2],
        TIMEOUT_S,
        what="both share consumers assigned two partitions each",
    )
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(topic, value_of(i).encode(), partition=i % 4)
    assert producer.flush(TIMEOUT_S) == 0
    deliveries: dict[str, list[int]] = defaultdict(list)
    for consumer in consumers:
        out, err = consumer.communicate(timeout=TIMEOUT_S * 2)
        assert consumer.returncode == 0, err
        for line in out.splitlines():
            _, _, _, value, count = line.split()
            deliveries[value].append(int(count))
    for i in range(40):
        expected = {0: [1, 2], 2: [1, 1]}.get(i % 4, [1])
        assert sorted(deliveries[value_of(i)]) == expected, value_of(i)

    described = run_java(
        SHARE_GROUPS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    # Every record done for the group: each partition's start offset is its end, no lag.
    assert sorted((r[1], r[2], r[3], r[-1]) for r in rows) == [
        (topic, str(p), "10", "0") for p in range(4)
    ], described

    reset = run_java(
        SHARE_GROUPS_TOOL,
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    )
    assert topic in reset
    described = run_java(
        SHARE_GROUPS_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    rows = [line.split() for line in described.splitlines() if line.startswith(group)]
    assert sorted((r[2], r[3]) for r in rows) == [(str(p), "0") for p in range(4)], described
