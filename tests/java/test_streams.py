"""Kafka Streams (kafka-streams 4.x, as in pom.xml) against one broker: a word count with a
state store, its changelog and a repartition topic, run with processing.guarantee
exactly_once_v2 (transactions: a producer per thread, offsets committed in the transaction) and
at_least_once; its output is read back by a read_committed consumer. The exactly-once run is
restarted without its local state, which it rebuilds from the changelog topic. The same with
group.protocol=streams (KIP-1071: the broker assigns the tasks, creates the internal topics), and
two instances of it sharing the tasks; a static member (group.instance.id) restarted takes its tasks
back without a rebalance."""

from __future__ import annotations

import collections
import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.cli.main import main
from odradek.protocol.errors import ErrorCode
from odradek.testing import running_broker, wait_until
from tests.server.conftest import KafkaConnection

from . import jars
from .support import classpath, create_topic, start_java

LINES = [
    "the quick brown fox",
    "jumps over the lazy dog",
    "the dog barks",
    "a fox is quick and the dog is lazy",
] * 25


def latest_counts(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    """The last count of each word in ``topic``, as a read_committed consumer reads it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        counts: dict[str, int] = {}
        at_end: set[int] = set()
        while len(at_end) < partitions:
            message = consumer.poll(5)
            if message is None:
                break
            if message.error():
                at_end.add(message.partition())
                continue
            counts[message.key().decode()] = int(message.value())
        return counts
    finally:
        consumer.close()


def produce_lines(bootstrap: str, topic: str, lines: list[str], first_key: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, line in enumerate(lines, first_key):
        producer.produce(topic, value=line.encode(), key=str(i).encode())
    producer.flush(30)


def word_counts(lines: list[str]) -> collections.Counter[str]:
    return collections.Counter(w for line in lines for w in line.split())


def run_word_count(
    bootstrap: str, app_id: str, source: str, sink: str, state: Path, guarantee: str,
    log: Path, expected: dict[str, int], feed: Callable[[], None] = lambda: None,
    protocol: str = "classic",
) -> list[str]:  # fmt: skip
    """Run JavaStreams until the sink's latest counts are ``expected`` (``feed`` called once it
    runs), close it and return what it printed, after checking it ran and closed cleanly.
    ``protocol`` is its group.protocol (classic, or streams: KIP-1071)."""
    app = start_java(
        "JavaStreams", bootstrap, app_id, source, sink, str(state), guarantee, protocol, log=log
    )
    try:
        feed()
        try:
            wait_until(lambda: latest_counts(bootstrap, sink, 2) == expected, 90, 1)
        except AssertionError as error:
            seen = latest_counts(bootstrap, sink, 2)
            wrong = {w: (seen.get(w), n) for w, n in expected.items() if seen.get(w) != n}
            raise AssertionError(
                f"{error}: (seen, expected) {wrong}\n{log.read_text()[-3000:]}"
            ) from None
    finally:
        assert app.stdin is not None and app.stdout is not None
        app.stdin.close()
        out = app.stdout.read()
        app.wait(60)
    lines = out.splitlines()
    states = [line.split()[1] for line in lines if line.startswith("state ")]
    assert "RUNNING" in states and "ERROR" not in states, out
    assert "closed" in lines
    return lines


def test_word_count_at_least_once(bootstrap: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 2)
    produce_lines(bootstrap, source, LINES)
    run_word_count(
        bootstrap, f"wordcount-{suffix}", source, sink, tmp_path / "state", "at_least_once",
        tmp_path / "streams.log", word_counts(LINES),
    )  # fmt: skip


def test_word_count_exactly_once_restarts_from_its_changelog(
    bootstrap: str, tmp_path: Path
) -> None:
    """exactly_once_v2; then the application is stopped, its local state deleted, and started
    again: its store is rebuilt from the changelog, and counts of new lines continue from it."""
    suffix = uuid.uuid4().hex[:6]
    app_id = f"wordcount-{suffix}"
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 2)
    produce_lines(bootstrap, source, LINES)
    state = tmp_path / "state"
    args = (bootstrap, app_id, source, sink, state, "exactly_once_v2")
    run_word_count(*args, tmp_path / "first.log", word_counts(LINES))

    changelog = f"{app_id}-counts-changelog"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, changelog)
    assert admin.describe_configs([resource])[resource].result(10)["cleanup.policy"].value == (
        "compact"
    )
    assert (state / app_id).is_dir()  # the RocksDB store was on disk ...
    shutil.rmtree(state)  # ... and is gone: only the changelog knows the counts now

    more = ["the fox again", "a new word zebra"] * 10
    out = run_word_count(
        *args, tmp_path / "second.log", word_counts(LINES + more),
        feed=lambda: produce_lines(bootstrap, source, more, len(LINES)),
    )  # fmt: skip
    restored = [line.split()[1:] for line in out if line.startswith("restored ")]
    assert {(store, topic) for store, topic, _, _ in restored} == {("counts", changelog)}
    # Each distinct word of the first run has at least one record in the changelog.
    assert sum(int(n) for *_, n in restored) >= len(word_counts(LINES)), out


def streams_group(bootstrap: str, group: str) -> Any:
    """The group as StreamsGroupDescribe answers it."""
    with KafkaConnection(bootstrap) as client:
        coordinator = client.request(10, 4, key_type=0, coordinator_keys=[group]).coordinators[0]
    with KafkaConnection(f"{coordinator.host}:{coordinator.port}") as client:
        (described,) = client.request(
            89, 0, group_ids=[group], include_authorized_operations=False
        ).groups
    return described


def test_word_count_with_the_streams_protocol(bootstrap: str, tmp_path: Path) -> None:
    """group.protocol=streams, exactly_once_v2: the broker creates the repartition and changelog
    topics the topology asks for and assigns every task to the one member; a restart without
    local state restores the store from the changelog."""
    suffix = uuid.uuid4().hex[:6]
    app_id = f"wordcount-streams-{suffix}"
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 2)
    produce_lines(bootstrap, source, LINES)
    state = tmp_path / "state"
    args = (bootstrap, app_id, source, sink, state, "exactly_once_v2")
    run_word_count(*args, tmp_path / "first.log", word_counts(LINES), protocol="streams")
    described = streams_group(bootstrap, app_id)
    assert described.error_code == ErrorCode.none and described.group_state == "Empty"
    assert {s.subtopology_id for s in described.topology.subtopologies} == {"0", "1"}
    changelog = f"{app_id}-counts-changelog"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert changelog in admin.list_topics(timeout=10).topics
    shutil.rmtree(state)
    more = ["the fox again", "a new word zebra"] * 10
    out = run_word_count(
        *args, tmp_path / "second.log", word_counts(LINES + more),
        feed=lambda: produce_lines(bootstrap, source, more, len(LINES)), protocol="streams",
    )  # fmt: skip
    restored = [line.split()[1:] for line in out if line.startswith("restored ")]
    assert {(store, topic) for store, topic, _, _ in restored} == {("counts", changelog)}


def test_two_instances_share_the_tasks_with_the_streams_protocol(
    bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two instances of the application: each gets half the tasks (none of them both), the
    counts are exact, and ``odradek groups`` lists and describes the streams group."""
    suffix = uuid.uuid4().hex[:6]
    app_id = f"wordcount-pair-{suffix}"
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    create_topic(bootstrap, source, 4)
    create_topic(bootstrap, sink, 2)
    apps = [
        start_java(
            "JavaStreams",
            bootstrap,
            app_id,
            source,
            sink,
            str(tmp_path / f"state{i}"),
            "at_least_once",
            "streams",
            log=tmp_path / f"app{i}.log",
        )
        for i in range(2)
    ]
    try:

        def shared() -> bool:
            described = streams_group(bootstrap, app_id)
            members = described.members if described.error_code == ErrorCode.none else ()
            return (
                described.group_state == "Stable"
                and len(members) == 2
                and all(m.assignment.active_tasks for m in members)
            )

        wait_until(shared, 90, 1)
        described = streams_group(bootstrap, app_id)
        owned = [
            {(t.subtopology_id, p) for t in m.assignment.active_tasks for p in t.partitions}
            for m in described.members
        ]
        assert not owned[0] & owned[1]
        assert owned[0] | owned[1] == {(s, p) for s in "01" for p in range(4)}
        assert {len(o) for o in owned} == {4}
        produce_lines(bootstrap, source, LINES)
        wait_until(lambda: latest_counts(bootstrap, sink, 2) == word_counts(LINES), 90, 1)

        def run(*args: str) -> Any:
            capsys.readouterr()
            assert main(["groups", *args, "--bootstrap-server", bootstrap, "--output", "json"]) == 0
            return json.loads(capsys.readouterr().out)

        assert {
            "group": app_id,
            "type": "streams",
            "state": "Stable",
            "protocol_type": "streams",
        } in run("list")
        (group,) = run("describe", app_id)
        assert (group["state"], group["protocol_type"]) == ("Stable", "streams")
        assigned = sorted(
            (a["topic"], a["partition"]) for m in group["members"] for a in m["assignment"]
        )
        assert [tp for tp in assigned if tp[0] == source] == [(source, p) for p in range(4)]
    finally:
        outs = []
        for app in apps:
            assert app.stdin is not None and app.stdout is not None
            app.stdin.close()
            outs.append(app.stdout.read())
            app.wait(60)
    for out in outs:
        assert "closed" in out.splitlines(), out


def test_the_streams_protocol_word_count_outlives_a_broker_restart(tmp_path: Path) -> None:
    """exactly_once_v2 with group.protocol=streams while its broker restarts: the group comes
    back from __consumer_offsets with its member (the same one, still holding every task) and
    its committed offsets, and the counts stay exact."""
    suffix = uuid.uuid4().hex[:6]
    app_id = f"wordcount-restart-{suffix}"
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    with running_broker(tmp_path / "broker", group_initial_rebalance_delay_ms="0") as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, source, 2)
        create_topic(bootstrap, sink, 2)
        produce_lines(bootstrap, source, LINES)
        app = start_java(
            "JavaStreams", bootstrap, app_id, source, sink, str(tmp_path / "state"),
            "exactly_once_v2", "streams", log=tmp_path / "app.log",
        )  # fmt: skip
        try:
            wait_until(lambda: latest_counts(bootstrap, sink, 2) == word_counts(LINES), 90, 1)
            (member,) = streams_group(bootstrap, app_id).members
            broker.restart()
            more = ["the fox again", "a new word zebra"] * 10
            produce_lines(bootstrap, source, more, len(LINES))
            expected = word_counts(LINES + more)
            wait_until(lambda: latest_counts(bootstrap, sink, 2) == expected, 120, 1)
            (after,) = streams_group(bootstrap, app_id).members
            assert after.member_id == member.member_id
            assert after.assignment.active_tasks == member.assignment.active_tasks
        finally:
            assert app.stdin is not None and app.stdout is not None
            app.stdin.close()
            out = app.stdout.read()
            app.wait(60)
        assert "closed" in out.splitlines(), out


def test_standby_tasks_with_the_streams_protocol(tmp_path: Path) -> None:
    """group.streams.num.standby.replicas=1 on the broker: each of two instances holds a
    standby of every stateful task the other runs (none of stateless ones), and the counts are
    exact."""
    suffix = uuid.uuid4().hex[:6]
    app_id = f"wordcount-standby-{suffix}"
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    with running_broker(
        tmp_path / "broker",
        group_initial_rebalance_delay_ms="0",
        group_streams_num_standby_replicas="1",
    ) as broker:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, source, 2)
        create_topic(bootstrap, sink, 2)
        apps = [
            start_java(
                "JavaStreams",
                bootstrap,
                app_id,
                source,
                sink,
                str(tmp_path / f"state{i}"),
                "at_least_once",
                "streams",
                log=tmp_path / f"app{i}.log",
            )
            for i in range(2)
        ]
        try:

            def tasks(kind: str) -> list[set[tuple[str, int]]]:
                described = streams_group(bootstrap, app_id)
                return [
                    {
                        (t.subtopology_id, p)
                        for t in getattr(m.assignment, kind)
                        for p in t.partitions
                    }
                    for m in described.members
                ]

            def placed() -> bool:
                active, standby = tasks("active_tasks"), tasks("standby_tasks")
                stateful = {("1", p) for p in range(2)}
                return len(active) == 2 and all(active) and standby[0] | standby[1] == stateful

            wait_until(placed, 90, 1)
            active, standby = tasks("active_tasks"), tasks("standby_tasks")
            # Only the counting subtopology (1) has a store, so only its tasks have standbys.
            assert standby[0] == {t for t in active[1] if t[0] == "1"}
            assert standby[1] == {t for t in active[0] if t[0] == "1"}
            produce_lines(bootstrap, source, LINES)
            wait_until(lambda: latest_counts(bootstrap, sink, 2) == word_counts(LINES), 90, 1)
        finally:
            for app in apps:
                assert app.stdin is not None
                app.stdin.close()
            for app in apps:
                app.wait(60)


def streams_client_version() -> tuple[int, ...]:
    """The version of the kafka-streams jar the Java programs run on."""
    classpath()
    names = [j.name for j in jars.jar_dir().glob("kafka-streams-*.jar")]
    (version,) = [n[len("kafka-streams-") : -len(".jar")] for n in names if n[14:15].isdigit()]
    return tuple(int(part) for part in version.split(".")[:2])


def test_a_static_member_restarted_takes_its_tasks_back_without_a_rebalance(
    bootstrap: str, tmp_path: Path
) -> None:
    """Two instances with group.instance.id (Kafka Streams 4.4 allows it with the streams
    protocol): one closed the default way stays in the group at member epoch -2 holding its
    tasks; started again with the same instance id and state directory it is a new member that
    takes those tasks at once, and the group epoch has not moved."""
    if streams_client_version() < (4, 4):
        pytest.skip("Kafka Streams before 4.4 refuses group.instance.id with the streams protocol")
    suffix = uuid.uuid4().hex[:6]
    app_id = f"wordcount-static-{suffix}"
    source, sink = f"streams-lines-{suffix}", f"streams-counts-{suffix}"
    create_topic(bootstrap, source, 4)
    create_topic(bootstrap, sink, 2)

    def start(name: str, log: str) -> Any:
        return start_java(
            "JavaStaticStreams", bootstrap, app_id, source, sink, str(tmp_path / name),
            f"instance-{name}", log=tmp_path / log,
        )  # fmt: skip

    def stop(app: Any) -> str:
        assert app.stdin is not None and app.stdout is not None
        app.stdin.close()
        out = str(app.stdout.read())
        app.wait(60)
        assert "closed" in out.splitlines(), out
        return out

    def by_instance() -> dict[str, Any]:
        described = streams_group(bootstrap, app_id)
        if described.error_code != ErrorCode.none:
            return {}
        return {m.instance_id.split("-")[1]: m for m in described.members}

    def active(member: Any) -> set[tuple[str, int]]:
        return {(t.subtopology_id, p) for t in member.assignment.active_tasks for p in t.partitions}

    def stable() -> bool:
        members = by_instance()
        return (
            streams_group(bootstrap, app_id).group_state == "Stable"
            and set(members) == {"a", "b"}
            and all(active(m) for m in members.values())
        )

    a, b = start("a", "a.log"), start("b", "b.log")
    try:
        wait_until(stable, 90, 1)
        epoch = streams_group(bootstrap, app_id).group_epoch
        before = by_instance()
        stop(a)
        left = by_instance()["a"]
        assert left.member_epoch == -2 and active(left) == active(before["a"])
        assert streams_group(bootstrap, app_id).group_epoch == epoch
        a = start("a", "a-again.log")
        wait_until(lambda: stable() and by_instance()["a"].member_id != left.member_id, 60, 1)
        after = by_instance()
        assert streams_group(bootstrap, app_id).group_epoch == epoch
        assert {k: active(m) for k, m in after.items()} == {k: active(m) for k, m in before.items()}
        produce_lines(bootstrap, source, LINES)
        wait_until(lambda: latest_counts(bootstrap, sink, 2) == word_counts(LINES), 90, 1)
    finally:
        for app in (a, b):
            if app.poll() is None:
                stop(app)
