"""KIP-848 consumer groups (``group.protocol=consumer``) with confluent-kafka against a real
odradek broker (a child process, as in ``test_groups_confluent_kafka``): the broker assigns,
members move partitions one heartbeat at a time, and a member that leaves does not stop the
others."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from odradek.testing import BrokerProcess

from .groups_support import (
    TIMEOUT_S,
    close_all,
    group_broker_args,
    partition_of,
    produce_everywhere,
    wait_until,
)

HEARTBEAT_MS = 250


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("groups-kip848"),
        *group_broker_args(),
        "-o",
        f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}",
    ).start()
    yield process
    process.terminate()


class Member:
    """A ``group.protocol=consumer`` consumer that remembers what was revoked from it."""

    def __init__(self, bootstrap: str, group: str, name: str) -> None:
        self.name = name
        self.revoked: list[int] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )

    def subscribe(self, topic: str) -> None:
        def on_revoke(consumer: Any, partitions: list[TopicPartition]) -> None:
            self.revoked.extend(p.partition for p in partitions)

        self.consumer.subscribe([topic], on_revoke=on_revoke)

    def owned(self) -> set[int]:
        return {p.partition for p in self.consumer.assignment()}

    def poll(self) -> Message | None:
        message = self.consumer.poll(0.02)
        if message is not None:
            assert message.error() is None, message.error()
        return message


def polling(
    members: list[Member], got: dict[str, list[Message]] | None = None
) -> Callable[[], None]:
    def tick() -> None:
        for m in members:
            message = m.poll()
            if message is not None:
                assert got is not None, f"unexpected record {message.value()!r}"
                got[m.name].append(message)

    return tick


def split(members: list[Member], partitions: int = 6) -> Callable[[], bool]:
    """The members hold all ``partitions``, none twice, as evenly as can be."""

    def check() -> bool:
        owned = [m.owned() for m in members]
        every = sorted(p for o in owned for p in o)
        sizes = {len(o) for o in owned}
        return every == list(range(partitions)) and max(sizes) - min(sizes) <= 1

    return check


def test_three_members_share_six_partitions_and_one_leaves(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"kip848-{topic}"
    members = [Member(bootstrap, group, f"c{i}") for i in range(3)]
    started = time.monotonic()
    for m in members:
        m.subscribe(topic)
    wait_until(split(members), what="3 members sharing 6 partitions", tick=polling(members))
    stable_s = time.monotonic() - started
    print(f"KIP-848 group of three stable in {stable_s:.2f} s")
    assert [len(m.owned()) for m in members] == [2, 2, 2]
    # The admin client describes it with ConsumerGroupDescribe.
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: the future needs it alive
    described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
    assert (described.type, described.state) == (
        ConsumerGroupType.CONSUMER,
        ConsumerGroupState.STABLE,
    )
    assert sorted(
        sorted(p.partition for p in m.assignment.topic_partitions) for m in described.members
    ) == sorted(sorted(m.owned()) for m in members)

    got: dict[str, list[Message]] = {m.name: [] for m in members}
    sent = produce_everywhere(bootstrap, topic, 5, prefix="first")
    wait_until(
        lambda: sum(map(len, got.values())) >= len(sent),
        what="the first records",
        tick=polling(members, got),
    )
    assert sorted(msg.value() for ms in got.values() for msg in ms) == sorted(sent)
    for m in members:
        assert {msg.partition() for msg in got[m.name]} == m.owned()
        m.consumer.commit(asynchronous=False)

    stayers, leaving = members[:2], members[2]
    kept = {m.name: m.owned() for m in stayers}
    revoked_before = {m.name: list(m.revoked) for m in stayers}
    leaving.consumer.close()  # a heartbeat with epoch -1
    moved_at = time.monotonic()
    got = {m.name: [] for m in stayers}
    sent = produce_everywhere(bootstrap, topic, 5, prefix="second")
    wait_until(split(stayers), what="2 members sharing 6 partitions", tick=polling(stayers, got))
    print(f"KIP-848 partitions of a leaver moved in {time.monotonic() - moved_at:.2f} s")
    wait_until(
        lambda: sum(map(len, got.values())) >= len(sent),
        what="the second records",
        tick=polling(stayers, got),
    )
    values = [msg.value() for ms in got.values() for msg in ms]
    assert sorted(values) == sorted(sent), "each record once, from the committed offsets"
    for m in stayers:
        # Nothing was taken from the members that stayed: they kept their partitions (and
        # consumed from them throughout), and only gained the leaver's.
        assert m.revoked == revoked_before[m.name]
        assert kept[m.name] < m.owned()
        assert {partition_of(v.value()) for v in got[m.name]} == m.owned()
    assert time.monotonic() - started < TIMEOUT_S * 3
    close_all([m.consumer for m in stayers])


def test_a_classic_consumer_joins_a_kip_848_group_and_gets_partitions(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    # Kafka 4's online migration: a classic member (JoinGroup/SyncGroup/Heartbeat) in a group
    # of the consumer protocol is one of its members and gets its share from the broker.
    topic = make_topic(topic_name, 6)
    group = f"kip848-{topic}"
    modern = Member(bootstrap, group, "modern")
    modern.subscribe(topic)
    wait_until(lambda: len(modern.owned()) == 6, what="six partitions", tick=polling([modern]))
    classic = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "classic",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "partition.assignment.strategy": "range",
        }
    )
    try:
        classic.subscribe([topic])

        def tick() -> None:
            polling([modern])()
            message = classic.poll(0.02)
            assert message is None or message.error() is None

        def shared() -> bool:
            mine = {p.partition for p in classic.assignment()}
            theirs = modern.owned()
            return (
                bool(mine)
                and bool(theirs)
                and mine.isdisjoint(theirs)
                and (sorted(mine | theirs) == list(range(6)))
            )

        wait_until(shared, what="the classic and the KIP-848 member sharing", tick=tick)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert described.type == ConsumerGroupType.CONSUMER
        assert len(described.members) == 2
    finally:
        classic.close()
    # It left: its partitions go back.
    wait_until(
        lambda: len(modern.owned()) == 6, what="six partitions again", tick=polling([modern])
    )
    close_all([modern.consumer])


def test_a_kip_848_member_upgrades_a_classic_group_online(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    # Kafka 4's online upgrade (group.consumer.migration.policy=bidirectional): a
    # consumer-protocol member joining a stable classic group converts it; the classic member
    # keeps consuming as a member of the consumer group and gives the newcomer its share.
    topic = make_topic(topic_name, 6)
    group = f"kip848-{topic}"
    classic = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "classic",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "partition.assignment.strategy": "range",
        }
    )
    modern = Member(bootstrap, group, "modern")
    try:
        classic.subscribe([topic])

        def tick() -> None:
            message = classic.poll(0.02)
            assert message is None or message.error() is None

        wait_until(lambda: len(classic.assignment()) == 6, what="a classic group", tick=tick)
        modern.subscribe(topic)

        def both() -> None:
            tick()
            polling([modern])()

        def shared() -> bool:
            mine = {p.partition for p in classic.assignment()}
            theirs = modern.owned()
            return (
                bool(mine)
                and bool(theirs)
                and mine.isdisjoint(theirs)
                and (sorted(mine | theirs) == list(range(6)))
            )

        wait_until(shared, what="the two members sharing", tick=both)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)
        assert described.type == ConsumerGroupType.CONSUMER
    finally:
        classic.close()
    close_all([modern.consumer])
