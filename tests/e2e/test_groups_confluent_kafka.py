"""Consumer groups with confluent-kafka (librdkafka) against a real odradek broker.

The broker runs as a child process (see ``group_broker_process`` for why)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Message, TopicPartition

from odradek.testing import BrokerProcess

from .groups_support import (
    HEARTBEAT_MS,
    SESSION_MS,
    TIMEOUT_S,
    close_all,
    describe,
    group_broker_args,
    group_broker_process,
    partition_of,
    produce_everywhere,
    split_among,
    wait_until,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = group_broker_process(tmp_path_factory.mktemp("groups-confluent"))
    yield process
    process.terminate()


def consumer_config(bootstrap: str, group: str, client_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
        **extra,
    }


def poller(consumers: list[Consumer]) -> Callable[[], None]:
    def poll() -> None:
        for c in consumers:
            message = c.poll(0.02)
            # (An error event may come while the group forms; a record may not.)
            assert message is None or message.error() is not None, (
                f"unexpected record {message.topic()}/{message.partition()}@{message.offset()}: "
                f"{message.value()!r}"
            )

    return poll


def consume(
    consumers: dict[str, Consumer], count: int, grace_s: float = 0.5
) -> dict[str, list[Message]]:
    """Poll every consumer until ``count`` records arrived in all, then a little longer (a
    duplicate would show up then)."""
    got: dict[str, list[Message]] = {name: [] for name in consumers}
    deadline = time.monotonic() + TIMEOUT_S
    settle: float | None = None
    while settle is None or time.monotonic() < settle:
        assert time.monotonic() < deadline, f"got {sum(map(len, got.values()))} of {count}"
        for name, c in consumers.items():
            message = c.poll(0.02)
            if message is not None:
                assert message.error() is None, message.error()
                got[name].append(message)
        if settle is None and sum(map(len, got.values())) >= count:
            settle = time.monotonic() + grace_s
    return got


def commit_offsets(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    """Commit ``offsets`` for ``group`` from outside group management."""
    committer = Consumer(consumer_config(bootstrap, group, "committer"))
    committer.commit(offsets=offsets, asynchronous=False)
    committer.close()


def check_split(got: dict[str, list[Message]], sent: list[bytes]) -> None:
    """Each record came once, and each partition was read by one consumer only."""
    values = [m.value() for messages in got.values() for m in messages]
    assert sorted(values) == sorted(sent)
    owners: dict[int, set[str]] = {}
    for name, messages in got.items():
        for m in messages:
            owners.setdefault(m.partition(), set()).add(name)
            assert partition_of(m.value()) == m.partition()
    assert all(len(names) == 1 for names in owners.values()), owners


def test_two_then_three_members_split_six_partitions(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"split-{topic}"
    # Every partition starts with a commit, so no member looks up the log start. librdkafka
    # (through 2.16) restarts such a lookup when its reply comes after the partition was revoked,
    # then fetches the partition unassigned and hands those records out when it gets the
    # partition again, past its committed offset: the group first forms with one member, so a
    # revocation follows every first assignment here.
    commit_offsets(bootstrap, group, [TopicPartition(topic, p, 0) for p in range(6)])
    consumers = {name: Consumer(consumer_config(bootstrap, group, name)) for name in ("c0", "c1")}
    for c in consumers.values():
        c.subscribe([topic])
    wait_until(
        split_among(bootstrap, group, 2, topic),
        what="2 members",
        tick=poller([*consumers.values()]),
    )
    sent = produce_everywhere(bootstrap, topic, 5, prefix="first")
    got = consume(consumers, len(sent))
    check_split(got, sent)
    assert all(len({m.partition() for m in ms}) == 3 for ms in got.values())
    for c in consumers.values():
        c.commit(asynchronous=False)

    consumers["c2"] = Consumer(consumer_config(bootstrap, group, "c2"))
    consumers["c2"].subscribe([topic])
    wait_until(
        split_among(bootstrap, group, 3, topic),
        what="3 members",
        tick=poller([*consumers.values()]),
    )
    sent = produce_everywhere(bootstrap, topic, 5, prefix="second")
    got = consume(consumers, len(sent))
    check_split(got, sent)  # committed offsets: nothing of the first round comes again
    assert all(len({m.partition() for m in ms}) == 2 for ms in got.values())
    close_all(consumers.values())


def test_a_member_that_leaves_has_its_partitions_reassigned(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"leave-{topic}"
    consumers = [Consumer(consumer_config(bootstrap, group, f"c{i}")) for i in range(3)]
    for c in consumers:
        c.subscribe([topic])
    wait_until(split_among(bootstrap, group, 3, topic), what="3 members", tick=poller(consumers))
    leaving = consumers.pop()
    started = time.monotonic()
    leaving.close()  # sends LeaveGroup
    wait_until(split_among(bootstrap, group, 2, topic), what="2 members", tick=poller(consumers))
    assert time.monotonic() - started < SESSION_MS / 1000, "a leave needs no session timeout"
    wait_until(
        lambda: sorted(p.partition for c in consumers for p in c.assignment()) == list(range(6)),
        what="the consumers to take over",
        tick=poller(consumers),
    )
    close_all(consumers)


_KILLABLE_CONSUMER = """
import json, sys
from confluent_kafka import Consumer
consumer = Consumer(json.loads(sys.argv[1]))
consumer.subscribe([sys.argv[2]])
while True:
    consumer.poll(0.1)
"""


def test_a_killed_member_is_replaced_after_its_session_timeout(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"kill-{topic}"
    doomed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _KILLABLE_CONSUMER,
            json.dumps(consumer_config(bootstrap, group, "doomed")),
            topic,
        ]
    )
    try:
        survivor = Consumer(consumer_config(bootstrap, group, "survivor"))
        survivor.subscribe([topic])
        wait_until(
            split_among(bootstrap, group, 2, topic), what="2 members", tick=poller([survivor])
        )
        doomed.kill()  # no LeaveGroup, no more heartbeats
        killed = time.monotonic()
        wait_until(
            split_among(bootstrap, group, 1, topic), what="1 member", tick=poller([survivor])
        )
        elapsed = time.monotonic() - killed
        assert elapsed >= SESSION_MS / 1000 * 0.8, "the group waited for the session to end"
        wait_until(lambda: len(survivor.assignment()) == 6, tick=poller([survivor]))
        survivor.close()
    finally:
        doomed.kill()
        doomed.wait()


def test_committed_offsets_survive_a_restart_and_a_new_member_resumes(tmp_path: Path) -> None:
    from .conftest import create_topics

    broker = group_broker_process(tmp_path)
    try:
        create_topics(broker.bootstrap, {"resume": 2})
        sent = produce_everywhere(broker.bootstrap, "resume", 10, partitions=2)
        first = Consumer(consumer_config(broker.bootstrap, "resumers", "first"))
        first.subscribe(["resume"])
        seen: list[bytes] = []
        wait_until(lambda: len(seen) >= 7, tick=lambda: _take(first, seen))
        first.close()

        assert broker.terminate() == 0  # a clean stop, as SIGTERM gives
        broker = group_broker_process(tmp_path, port=broker.port)

        second = Consumer(consumer_config(broker.bootstrap, "resumers", "second"))
        second.subscribe(["resume"])
        got = consume({"second": second}, len(sent) - len(seen))
        rest = [m.value() for m in got["second"]]
        assert not set(rest) & set(seen), "a committed record came again"
        assert sorted(seen + rest) == sorted(sent)
        committed = second.committed([TopicPartition("resume", 0), TopicPartition("resume", 1)])
        assert sum(max(tp.offset, 0) for tp in committed) == len(seen), committed
        second.close()
    finally:
        broker.kill()


def _take(consumer: Consumer, seen: list[bytes]) -> None:
    message = consumer.poll(0.05)
    if message is not None and message.error() is None and len(seen) < 7:
        seen.append(message.value())
        consumer.commit(message=message, asynchronous=False)


def test_a_static_member_rejoins_without_a_rebalance(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"static-{topic}"
    static = {"session.timeout.ms": 6000}
    events: list[str] = []
    stays = Consumer(
        consumer_config(bootstrap, group, "stays", **static, **{"group.instance.id": "stays"})
    )
    stays.subscribe(
        [topic],
        on_assign=lambda c, ps: events.append("assign"),
        on_revoke=lambda c, ps: events.append("revoke"),
    )
    restarts = Consumer(
        consumer_config(bootstrap, group, "restarts", **static, **{"group.instance.id": "restarts"})
    )
    restarts.subscribe([topic])
    wait_until(
        split_among(bootstrap, group, 2, topic), what="2 members", tick=poller([stays, restarts])
    )
    wait_until(
        lambda: events[-1:] == ["assign"] and len(stays.assignment()) == 3,
        tick=poller([stays, restarts]),
    )
    settled = list(events)
    before = describe(bootstrap, group)
    owned = next(set(m.assignment) for m in before.members if m.group_instance_id == "restarts")
    old_member = next(m.member_id for m in before.members if m.group_instance_id == "restarts")

    restarts.close()  # a static member sends no LeaveGroup: its partitions wait for it
    again = Consumer(
        consumer_config(bootstrap, group, "restarts", **static, **{"group.instance.id": "restarts"})
    )
    again.subscribe([topic])
    wait_until(
        lambda: {(topic, p.partition) for p in again.assignment()} == owned,
        what="the restarted member's old partitions",
        tick=poller([stays, again]),
    )
    after = describe(bootstrap, group)
    assert after.state == "Stable"
    new_member = next(m.member_id for m in after.members if m.group_instance_id == "restarts")
    assert new_member != old_member
    stays_member = next(m.member_id for m in after.members if m.group_instance_id == "stays")
    assert stays_member == next(
        m.member_id for m in before.members if m.group_instance_id == "stays"
    )
    for _ in range(10):
        poller([stays, again])()
    # Any rebalance of an eager group revokes every partition: no revocation, no rebalance.
    assert events == settled, "the other member saw no revocation"
    close_all([stays, again])


def test_cooperative_sticky_moves_only_what_it_must(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    topic = make_topic(topic_name, 6)
    group = f"coop-{topic}"
    cooperative = {"partition.assignment.strategy": "cooperative-sticky"}
    revoked: list[set[int]] = []
    first = Consumer(consumer_config(bootstrap, group, "first", **cooperative))
    first.subscribe([topic], on_revoke=lambda c, ps: revoked.append({p.partition for p in ps}))
    wait_until(split_among(bootstrap, group, 1, topic), what="1 member", tick=poller([first]))
    wait_until(lambda: len(first.assignment()) == 6, tick=poller([first]))
    second = Consumer(consumer_config(bootstrap, group, "second", **cooperative))
    second.subscribe([topic])
    wait_until(
        split_among(bootstrap, group, 2, topic), what="2 members", tick=poller([first, second])
    )
    wait_until(
        lambda: len(first.assignment()) == 3 and len(second.assignment()) == 3,
        tick=poller([first, second]),
    )
    assert describe(bootstrap, group).protocol == "cooperative-sticky"
    moved = set().union(*revoked) if revoked else set()
    assert len(moved) == 3, f"only the partitions that moved were revoked: {revoked}"
    kept = {p.partition for p in first.assignment()}
    assert kept.isdisjoint(moved) and kept | moved == set(range(6))
    assert {p.partition for p in second.assignment()} == moved
    close_all([first, second])


def test_time_for_three_members_to_become_stable(
    bootstrap: str,
    make_topic: Callable[..., str],
    topic_name: str,
    record_property: Callable[[str, object], None],
) -> None:
    """From three subscribes to three consumers holding two partitions each (with
    ``group.initial.rebalance.delay.ms=0`` and a 100 ms heartbeat interval)."""
    topic = make_topic(topic_name, 6)
    group = f"stable-{topic}"
    consumers = [Consumer(consumer_config(bootstrap, group, f"s{i}")) for i in range(3)]
    started = time.monotonic()
    for c in consumers:
        c.subscribe([topic])
    wait_until(
        lambda: all(len(c.assignment()) == 2 for c in consumers),
        what="three members with two partitions each",
        tick=poller(consumers),
    )
    elapsed = time.monotonic() - started
    record_property("three_member_stabilisation_s", round(elapsed, 3))
    print(f"three members stable after {elapsed * 1000:.0f} ms")
    assert split_among(bootstrap, group, 3, topic)()
    assert elapsed < 5
    close_all(consumers)


def test_committed_offsets_survive_kill_9(tmp_path: Path) -> None:
    """SIGKILL leaves the commits in the page cache, not on disk: recovery must find them."""
    from .conftest import create_topics

    args = group_broker_args()
    process = BrokerProcess(tmp_path, *args).start()
    try:
        create_topics(process.bootstrap, {"crash-commits": 3})
        consumer = Consumer(consumer_config(process.bootstrap, "crashers", "crasher"))
        offsets = [TopicPartition("crash-commits", p, 10 * (p + 1)) for p in range(3)]
        consumer.commit(offsets=offsets, asynchronous=False)
        consumer.close()
        process.kill()
        process = BrokerProcess(tmp_path, *args, port=process.port).start()
        later = Consumer(consumer_config(process.bootstrap, "crashers", "later"))
        committed = later.committed(
            [TopicPartition("crash-commits", p) for p in range(3)], timeout=TIMEOUT_S
        )
        assert [tp.offset for tp in committed] == [10, 20, 30]
        later.close()
    finally:
        process.kill()


def test_deleting_a_topic_deletes_its_committed_offsets(
    bootstrap: str, make_topic: Callable[..., str], topic_name: str
) -> None:
    from confluent_kafka.admin import AdminClient

    topic = make_topic(topic_name, 1)
    group = f"deleted-{topic}"
    consumer = Consumer(consumer_config(bootstrap, group, "deleter"))
    consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    assert describe(bootstrap, group).partitions[0].committed == 7
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=TIMEOUT_S)[topic].result(TIMEOUT_S)
    wait_until(lambda: not describe(bootstrap, group).partitions, what="the offsets to go")
    consumer.close()
