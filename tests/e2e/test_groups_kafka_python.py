"""Consumer groups with kafka-python against a real odradek broker.

A KafkaConsumer is not thread-safe and must be polled to take part in its group, so each member
here polls in a thread of its own, as an application's consumer loop would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import ConsumerRebalanceListener, KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

from odradek.testing import RunningBroker, running_broker

from .conftest import create_topics
from .groups_support import (
    GROUP_BROKER_SETTINGS,
    HEARTBEAT_MS,
    SESSION_MS,
    describe,
    group_broker,
    partition_of,
    produce_everywhere,
    split_among,
    wait_until,
)

# Long polls: kafka-python 3.0 can stall a member whose poll() times out in the middle of a
# rebalance (its SyncGroup response arrives but the assignment is never applied).
POLL_MS = 1000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    yield from group_broker(tmp_path_factory.mktemp("groups-kafka-python"))


class Member:
    """A consumer polling in its own thread; what it read and holds is visible from outside."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str, **config: Any):
        self.client_id = client_id
        self.records: list[tuple[int, bytes]] = []
        self.assigned: set[int] = set()
        self.revoked: list[set[int]] = []
        self._stop = threading.Event()
        self._commit = threading.Event()
        self._committed = threading.Event()
        self.failure: BaseException | None = None
        settings: dict[str, Any] = {
            "bootstrap_servers": bootstrap,
            "group_id": group,
            "client_id": client_id,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            "session_timeout_ms": SESSION_MS,
            "heartbeat_interval_ms": HEARTBEAT_MS,
        }
        self.consumer = KafkaConsumer(**(settings | config))
        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member.revoked.append({tp.partition for tp in revoked})

            def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        self.consumer.subscribe([topic], listener=Listener())
        self._thread = threading.Thread(target=self._run, name=client_id, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for tp, messages in self.consumer.poll(timeout_ms=POLL_MS).items():
                    self.records.extend((tp.partition, m.value) for m in messages)
                self.assigned = {tp.partition for tp in self.consumer.assignment()}
                if self._commit.is_set():
                    self.consumer.commit()
                    self._commit.clear()
                    self._committed.set()
        except BaseException as e:
            self.failure = e

    def commit(self) -> None:
        self._committed.clear()
        self._commit.set()
        assert self._committed.wait(10), f"{self.client_id} did not commit"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close(autocommit=False)
        assert self.failure is None, self.failure


def read_all(members: list[Member], count: int) -> None:
    wait_until(lambda: sum(len(m.records) for m in members) >= count, what=f"{count} records")


def check_split(members: list[Member], sent: list[bytes]) -> None:
    values = [v for m in members for _, v in m.records]
    assert sorted(values) == sorted(sent), "every record once"
    owners: dict[int, set[str]] = {}
    for m in members:
        for partition, value in m.records:
            assert partition_of(value) == partition
            owners.setdefault(partition, set()).add(m.client_id)
    assert all(len(names) == 1 for names in owners.values()), owners


def test_two_then_three_members_split_six_partitions(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"split-{topic}"
    members = [Member(bootstrap, group, topic, f"kp{i}") for i in range(2)]
    wait_until(split_among(bootstrap, group, 2, topic), what="2 members")
    wait_until(lambda: all(len(m.assigned) == 3 for m in members))
    sent = produce_everywhere(bootstrap, topic, 4, prefix="first")
    read_all(members, len(sent))
    check_split(members, sent)
    for m in members:
        m.commit()
        m.records.clear()

    members.append(Member(bootstrap, group, topic, "kp2"))
    wait_until(split_among(bootstrap, group, 3, topic), what="3 members")
    wait_until(lambda: all(len(m.assigned) == 2 for m in members))
    sent = produce_everywhere(bootstrap, topic, 4, prefix="second")
    read_all(members, len(sent))
    check_split(members, sent)
    for m in members:
        m.close()


def test_a_member_that_leaves_has_its_partitions_reassigned(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"leave-{topic}"
    members = [Member(bootstrap, group, topic, f"kp{i}") for i in range(3)]
    wait_until(split_among(bootstrap, group, 3, topic), what="3 members")
    members.pop().close()
    wait_until(split_among(bootstrap, group, 2, topic), what="2 members")
    wait_until(lambda: sorted(p for m in members for p in m.assigned) == list(range(6)))
    for m in members:
        m.close()


def test_a_static_member_rejoins_without_a_rebalance(
    broker: RunningBroker, bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"static-{topic}"
    static = {"session_timeout_ms": 6000}
    stays = Member(bootstrap, group, topic, "stays", group_instance_id="stays", **static)
    leaves = Member(bootstrap, group, topic, "back", group_instance_id="back", **static)
    wait_until(split_among(bootstrap, group, 2, topic), what="2 members")
    wait_until(lambda: len(stays.assigned) == 3 and len(leaves.assigned) == 3)
    owned = set(leaves.assigned)
    revocations = len(stays.revoked)
    generation = _generation(broker, group)
    leaves.close()
    back = Member(bootstrap, group, topic, "back", group_instance_id="back", **static)
    wait_until(lambda: back.assigned == owned, what="the old partitions back")
    assert describe(bootstrap, group).state == "Stable"
    assert _generation(broker, group) == generation, "no rebalance happened"
    assert len(stays.revoked) == revocations
    stays.close()
    back.close()


def _generation(broker: RunningBroker, group: str) -> int:
    async def read() -> int:
        assert broker.broker is not None
        return broker.broker.groups.shard.groups[group].generation

    return broker.call(read())


def test_cooperative_sticky_moves_only_what_it_must(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"coop-{topic}"
    cooperative = {"partition_assignment_strategy": [CooperativeStickyAssignor]}
    first = Member(bootstrap, group, topic, "first", **cooperative)
    wait_until(lambda: len(first.assigned) == 6, what="all partitions to the first member")
    second = Member(bootstrap, group, topic, "second", **cooperative)
    wait_until(split_among(bootstrap, group, 2, topic), what="2 members")
    wait_until(lambda: len(first.assigned) == 3 and len(second.assigned) == 3)
    assert describe(bootstrap, group).protocol == "cooperative-sticky"
    moved = set().union(*first.revoked)
    assert moved == second.assigned, f"only what moved was revoked: {first.revoked}"
    first.close()
    second.close()


def test_committed_offsets_survive_a_restart(tmp_path: Path) -> None:
    with running_broker(tmp_path, **GROUP_BROKER_SETTINGS) as broker:
        create_topics(broker.bootstrap, {"resume": 3})
        sent = produce_everywhere(broker.bootstrap, "resume", 4, partitions=3)
        first = Member(broker.bootstrap, "resumers", "resume", "first")
        read_all([first], len(sent))
        first.commit()
        first.close()
        broker.restart()
        later = produce_everywhere(broker.bootstrap, "resume", 2, partitions=3, prefix="later")
        second = Member(broker.bootstrap, "resumers", "resume", "second")
        read_all([second], len(later))
        wait_until(lambda: len(second.assigned) == 3)
        second.close()
        assert sorted(v for _, v in second.records) == sorted(later), "nothing read twice"
