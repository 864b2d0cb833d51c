"""Share groups (KIP-932) with confluent-kafka's ``ShareConsumer`` against a real broker: two
consumers share a 4-partition topic, RELEASE redelivers with a higher delivery count, REJECT
never again, a killed consumer's records come back once their locks expire, and a poison record
is archived at the delivery limit.

The broker runs on a manual clock (lock expiry is the test's to cause); the share consumers are
real librdkafka clients over real sockets. A killed consumer is a child process that exits
without closing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from odradek.cli.main import main
from odradek.clock import ManualClock
from odradek.testing import BrokerProcess, RunningBroker, free_port, running_broker

from .conftest import create_topics

LOCK_MS = 30_000  # group.share.record.lock.duration.ms
DELIVERY_LIMIT = 3
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, clock: ManualClock) -> Iterator[RunningBroker]:
    with running_broker(
        tmp_path_factory.mktemp("share-groups"),
        clock=clock,
        group_share_delivery_count_limit=str(DELIVERY_LIMIT),
        group_share_heartbeat_interval_ms="200",
        offsets_topic_num_partitions="4",
    ) as running:
        yield running


def earliest(bootstrap: str, group: str) -> None:
    """``share.auto.offset.reset=earliest`` for ``group`` (a group config, as Kafka's tests
    set it through the admin client)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.auto.offset.reset",
                "earliest",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 4, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, str(i).encode(), partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


def share_consumer(bootstrap: str, group: str, topic: str, **extra: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})
    consumer.subscribe([topic])
    return consumer


def poll_until(
    consumers: list[ShareConsumer],
    done: Callable[[], bool],
    on_message: Callable[[int, Message], None],
) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for n, consumer in enumerate(consumers):
            for message in consumer.poll(0.2):
                assert message.error() is None, message.error()
                on_message(n, message)


def wait_for_members(broker: RunningBroker, group: str, consumers: list[ShareConsumer]) -> None:
    """Poll ``consumers`` (which get nothing yet) until they are all in the group, each with the
    group's latest assignment, as ShareGroupDescribe tells it, looked at inside the broker."""
    count = len(consumers)

    async def settled() -> bool:
        assert broker.broker is not None
        described = broker.broker.services.groups.shard.share.describe(group)
        return len(described.members) == count and all(
            m.member_epoch == described.assignment_epoch for m in described.members
        )

    deadline = time.monotonic() + TIMEOUT_S
    while not broker.call(settled()):
        assert time.monotonic() < deadline, "the group did not settle"
        for consumer in consumers:
            assert list(consumer.poll(0.1)) == []


@pytest.fixture
def group() -> str:
    return f"share-{uuid.uuid4().hex[:8]}"


def test_two_consumers_share_every_record_once(
    broker: RunningBroker, topic_name: str, group: str
) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {topic_name: 4})
    earliest(bootstrap, group)
    consumers = [share_consumer(bootstrap, group, topic_name) for _ in range(2)]
    seen: dict[bytes, list[int]] = {}
    wait_for_members(broker, group, consumers)

    def record(n: int, message: Message) -> None:
        assert message.delivery_count() == 1
        seen.setdefault(message.value() or b"", []).append(n)

    try:
        # In rounds: a fetch already waiting when the group's assignment moved may take every
        # partition's records once; the members' next fetches follow the assignment.
        for round_ in range(4):
            produce(bootstrap, topic_name, 100, start=100 * round_)
            poll_until(consumers, lambda r=round_: len(seen) == 100 * (r + 1), record)
        # Nothing more comes: each record went to one consumer, once.
        for consumer in consumers:
            assert list(consumer.poll(0.5)) == []
    finally:
        for consumer in consumers:
            consumer.close()
    assert sorted(seen) == sorted(str(i).encode() for i in range(400))
    assert all(len(who) == 1 for who in seen.values())
    assert {who[0] for who in seen.values()} == {0, 1}  # both consumers took part


def test_release_redelivers_and_reject_never_again(
    broker: RunningBroker, topic_name: str, group: str
) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {topic_name: 4})
    earliest(bootstrap, group)
    produce(bootstrap, topic_name, 40)
    explicit = {"share.acknowledgement.mode": "explicit"}
    consumers = [share_consumer(bootstrap, group, topic_name, **explicit) for _ in range(2)]
    deliveries: dict[bytes, list[int]] = {}

    def judge(n: int, message: Message) -> None:
        value = message.value() or b""
        counts = deliveries.setdefault(value, [])
        counts.append(message.delivery_count())
        index = int(value)
        if index % 4 == 0 and len(counts) == 1:
            ack = AcknowledgeType.RELEASE  # once: it comes back
        elif index % 4 == 1:
            ack = AcknowledgeType.REJECT  # never again
        else:
            ack = AcknowledgeType.ACCEPT
        consumers[n].acknowledge(message, ack)

    try:
        poll_until(
            consumers,
            lambda: (
                len(deliveries) == 40
                and all(len(deliveries[str(i).encode()]) == 2 for i in range(0, 40, 4))
            ),
            judge,
        )
        for consumer in consumers:
            consumer.commit_sync(TIMEOUT_S)
            assert list(consumer.poll(0.5)) == []
    finally:
        for consumer in consumers:
            consumer.close()
    for i in range(40):
        expected = [1, 2] if i % 4 == 0 else [1]
        assert deliveries[str(i).encode()] == expected, i


_KILLED_CONSUMER = """
import os, sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
while True:
    got = [m for m in c.poll(0.2) if m.error() is None]
    if got:
        print(" ".join(m.value().decode() for m in got), flush=True)
        os._exit(0)  # killed: no acknowledgement, no close
"""


def test_a_killed_consumer_s_records_come_back_after_the_lock(
    broker: RunningBroker, clock: ManualClock, topic_name: str, group: str
) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {topic_name: 1})
    earliest(bootstrap, group)
    produce(bootstrap, topic_name, 10, partitions=1)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_CONSUMER, bootstrap, group, topic_name],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    held = set(killed.stdout.split())
    assert held
    survivor = share_consumer(bootstrap, group, topic_name)
    seen: dict[str, int] = {}

    def record(_: int, message: Message) -> None:
        seen[(message.value() or b"").decode()] = message.delivery_count()

    try:
        others = {str(i) for i in range(10)} - held
        poll_until([survivor], lambda: others <= set(seen), record)
        assert not held & set(seen)  # still locked for the killed consumer
        clock.advance(LOCK_MS)
        poll_until([survivor], lambda: len(seen) == 10, record)
    finally:
        survivor.close()
    assert {seen[v] for v in held} == {2}
    assert all(seen[v] == 1 for v in others)


def test_a_poison_record_is_archived_at_the_delivery_limit(
    broker: RunningBroker, topic_name: str, group: str
) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {topic_name: 1})
    earliest(bootstrap, group)
    produce(bootstrap, topic_name, 1, partitions=1)
    consumer = share_consumer(
        bootstrap, group, topic_name, **{"share.acknowledgement.mode": "explicit"}
    )
    counts: list[int] = []

    def release(_: int, message: Message) -> None:
        counts.append(message.delivery_count())
        consumer.acknowledge(message, AcknowledgeType.RELEASE)

    try:
        poll_until([consumer], lambda: len(counts) == DELIVERY_LIMIT, release)
        consumer.commit_sync(TIMEOUT_S)
        # Archived: a new record after it is delivered, the poison one never again.
        produce(bootstrap, topic_name, 1, partitions=1)
        after: list[int] = []
        poll_until(
            [consumer],
            lambda: bool(after),
            lambda _, m: (after.append(m.offset()), consumer.acknowledge(m)),
        )
    finally:
        consumer.close()
    assert counts == list(range(1, DELIVERY_LIMIT + 1))
    assert after == [1]


def test_odradek_groups_lists_and_describes_a_share_group(
    broker: RunningBroker, topic_name: str, group: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {topic_name: 2})
    earliest(bootstrap, group)
    produce(bootstrap, topic_name, 6, partitions=2)
    consumer = share_consumer(bootstrap, group, topic_name)
    seen: list[Message] = []
    try:
        poll_until([consumer], lambda: len(seen) == 6, lambda _, m: seen.append(m))
        consumer.commit_sync(TIMEOUT_S)  # accepts what the last poll gave

        def run(*args: str) -> Any:
            capsys.readouterr()
            assert main(["groups", *args, "--bootstrap-server", bootstrap, "--output", "json"]) == 0
            return json.loads(capsys.readouterr().out)

        listed = run("list")
        assert {"group": group, "type": "share", "state": "Stable", "protocol_type": "share"} in (
            listed
        )
        (described,) = run("describe", group)
    finally:
        consumer.close()
    assert (described["state"], described["protocol_type"]) == ("Stable", "share")
    (member,) = described["members"]
    assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [
        (topic_name, 0),
        (topic_name, 1),
    ]
    assert sorted(
        (o["partition"], o["current_offset"], o["lag"]) for o in described["offsets"]
    ) == [(0, 3, 0), (1, 3, 0)]


def test_read_committed_delivers_no_aborted_or_open_transaction(
    broker: RunningBroker, topic_name: str, group: str
) -> None:
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {topic_name: 1})
    earliest(bootstrap, group)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{group}"})
    producer.init_transactions(TIMEOUT_S)
    for outcome in ("aborted", "committed"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic_name, f"{outcome}-{i}".encode(), partition=0)
        if outcome == "aborted":
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic_name, b"open-0", partition=0)  # never committed while we read
    producer.flush(TIMEOUT_S)
    consumer = share_consumer(bootstrap, group, topic_name)
    seen: list[bytes] = []
    try:
        poll_until([consumer], lambda: len(seen) >= 3, lambda _, m: seen.append(m.value() or b""))
        assert list(consumer.poll(0.5)) == []
    finally:
        consumer.close()
        producer.abort_transaction(TIMEOUT_S)
    assert seen == [b"committed-0", b"committed-1", b"committed-2"]


def test_accepted_records_stay_done_across_a_broker_crash(
    tmp_path: Path, topic_name: str, group: str
) -> None:
    """The share-partition's state is in ``__share_group_state``: after a kill -9 and a restart
    the accepted records are not delivered again, the acquired but unacknowledged ones are."""
    port = free_port()
    args = ("-o", "group.share.heartbeat.interval.ms=200")
    broker = BrokerProcess(tmp_path, *args, port=port).start()
    try:
        bootstrap = broker.bootstrap
        create_topics(bootstrap, {topic_name: 1})
        earliest(bootstrap, group)
        produce(bootstrap, topic_name, 10, partitions=1)
        first = share_consumer(bootstrap, group, topic_name)
        accepted: set[str] = set()
        try:
            poll_until(
                [first],
                lambda: len(accepted) == 10,
                lambda _, m: accepted.add((m.value() or b"").decode()),
            )
            first.commit_sync(TIMEOUT_S)  # implicit mode: what was delivered is accepted
        finally:
            first.close()
        assert accepted == {str(i) for i in range(10)}
        produce(bootstrap, topic_name, 10, partitions=1, start=10)
        killed = subprocess.run(
            [sys.executable, "-c", _KILLED_CONSUMER, bootstrap, group, topic_name],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=True,
        )
        held = set(killed.stdout.split())
        assert held and held <= {str(i) for i in range(10, 20)}
        broker.kill()
        broker = BrokerProcess(tmp_path, *args, port=port).start()
        after = share_consumer(bootstrap, group, topic_name)
        seen: dict[str, int] = {}

        def record(_: int, message: Message) -> None:
            value = (message.value() or b"").decode()
            assert value not in seen, f"{value} delivered twice"
            seen[value] = message.delivery_count()

        try:
            poll_until([after], lambda: len(seen) >= 10, record)
            after.commit_sync(TIMEOUT_S)
            assert list(after.poll(1.0)) == []
        finally:
            after.close()
        assert set(seen) == {str(i) for i in range(10, 20)}
    finally:
        broker.kill()
